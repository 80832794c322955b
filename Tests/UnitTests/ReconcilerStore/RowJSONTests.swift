import AppStoreServer
import Foundation
import ReconcilerShared
import ReconcilerStore
import Testing

/// The store's JSON writer against Foundation's `JSONEncoder`: the same JSON values (what
/// PostgreSQL reads), for what rows hold, for what it leaves to Foundation, and for escapes.
@Suite struct RowJSONTests {
    /// Both texts parsed: equal as JSON values (key order and `\/` are spelling).
    static func sameJSON(_ value: some Encodable, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let written = try RowJSON.encode(value)
        let reference = try JSONEncoder().encode(value)
        let parsed = try JSONSerialization.jsonObject(with: Data(written.utf8), options: [.fragmentsAllowed]) as? NSObject
        let expected = try JSONSerialization.jsonObject(with: reference, options: [.fragmentsAllowed]) as? NSObject
        #expect(
            parsed != nil && parsed == expected, "\(written) against \(String(decoding: reference, as: UTF8.self))", sourceLocation: sourceLocation)
        return written
    }

    struct Row: Encodable {
        var id: String
        var count: Int64?
        var small: Int32
        var flag: Bool
        var state: PurchaseState?
        var tags: [String]
        var nested: [[Int]]
        var optionalTags: [String?]
        var raw: RawJSON?
    }

    @Test func rowsMeanWhatFoundationsJSONMeans() throws {
        let state = PurchaseState(originalTransactionId: "1000", productId: "monthly", purchaseDate: 1_700_000_000_000)
        let rows = [
            Row(id: "a", count: nil, small: -3, flag: true, state: state, tags: [], nested: [[1, 2], []], optionalTags: ["x", nil], raw: nil),
            Row(
                id: "quote \" backslash \\ slash / newline \n tab \t bell \u{7} ü € 𝄞", count: Int64.min, small: Int32.max, flag: false,
                state: nil, tags: ["", "b"], nested: [], optionalTags: [],
                raw: .object(["a": .array([.integer(1), .bool(false), .null, .string("s")]), "b": .object([:])])),
        ]
        let written = try Self.sameJSON(rows)
        // Written here, not handed over: Foundation would have escaped the slash.
        #expect(written.contains("slash / newline"))
        let first = try #require((try JSONSerialization.jsonObject(with: Data(written.utf8)) as? [[String: Any]])?.first)
        #expect(first["count"] == nil, "a nil written by encodeIfPresent is left out, as Foundation leaves it")
        _ = try Self.sameJSON([Row]())
        _ = try Self.sameJSON(["plain": "string"])
        _ = try Self.sameJSON(UInt64.max)
    }

    @Test func whatItDoesNotSpellAsFoundationDoesIsHandedToFoundation() throws {
        struct Dated: Encodable {
            var at: Date
            var data: Data
        }
        // Foundation's spellings (a number since 2001, base64) come out, not the types' own.
        let dated = try Self.sameJSON([Dated(at: Date(timeIntervalSince1970: 1_700_000_000.5), data: Data([1, 2, 3]))])
        #expect(dated.contains("AQID"))
        _ = try Self.sameJSON([RawJSON.number(1.5), .number(2), .integer(3)])
        // A value whose own code swallows the declined write still goes to Foundation whole.
        struct Swallowing: Encodable {
            enum Keys: String, CodingKey { case at, name }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: Keys.self)
                try? container.encode(Date(timeIntervalSince1970: 0), forKey: .at)
                try container.encode("x", forKey: .name)
            }
        }
        _ = try Self.sameJSON([Swallowing()])
        _ = try Self.sameJSON(["url": URL(string: "https://example.com/a")!])
    }

    @Test func aContainerWrittenToAfterALaterOneBeganIsHandedToFoundation() throws {
        struct OutOfOrder: Encodable {
            enum Keys: String, CodingKey { case first, second, last }
            func encode(to encoder: any Encoder) throws {
                var outer = encoder.container(keyedBy: Keys.self)
                var first = outer.nestedContainer(keyedBy: Keys.self, forKey: .first)
                var second = outer.nestedUnkeyedContainer(forKey: .second)
                try second.encode("in second")
                // `first` was closed when `second` began: written here, it would land inside `second`.
                try first.encode("in first", forKey: .last)
                try outer.encode(3, forKey: .last)
            }
        }
        let written = try Self.sameJSON([OutOfOrder()])
        #expect(written.contains("in first"))
    }
}
