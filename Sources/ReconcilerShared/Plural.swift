/// A count and its noun, singular for one: `1 request`, `2 requests`, `0 requests`.
///
/// ```swift
/// print(Plural.count(requests, "request"))            // "1 request"
/// print(Plural.count(entries, "entry", "entries"))    // "3 entries"
/// ```
package enum Plural {
    package static func count(_ count: some BinaryInteger, _ singular: String, _ plural: String? = nil) -> String {
        "\(count) \(noun(count, singular, plural))"
    }

    /// The noun alone, for a count printed elsewhere.
    package static func noun(_ count: some BinaryInteger, _ singular: String, _ plural: String? = nil) -> String {
        count == 1 ? singular : plural ?? singular + "s"
    }
}
