import Foundation
import PostgresNIO
import Reconciler
import ReconcilerDomain
import TestSupport
import Testing

@testable import ReconcilerStore

/// Database passwords never reach output, whatever the URL looks like. Every password
/// here is two distinctive halves around the characters that break URL parsers, so a test sees a partial
/// leak too: neither half may appear.
@Suite struct DatabaseSecretsTests: PasswordLeakTesting {

    /// Nasty connection strings and what their redaction shows.
    static let redactions: [(input: String, shown: String)] = [
        ("postgres://alice:\(secret("%t#"))@127.0.0.1:1/db", "postgres://alice:***@127.0.0.1:1/db"),
        ("postgres://alice:\(secret("@"))@127.0.0.1:1/db", "postgres://alice:***@127.0.0.1:1/db"),
        ("postgres://alice:\(secret("/"))@db.internal:5432/iap?sslmode=require", "postgres://alice:***@db.internal:5432/iap?sslmode=require"),
        ("postgres://alice:\(secret("?"))@db:5432/iap", "postgres://alice:***@db:5432/iap"),
        ("postgres://alice:\(secret(":"))@db/iap", "postgres://alice:***@db/iap"),
        ("postgres://alice:\(secret("%zz"))@db/iap", "postgres://alice:***@db/iap"),
        ("postgres://alice:\(secret(" "))@db/iap", "postgres://alice:***@db/iap"),
        ("postgres://alice:\(secret("#"))@db/iap?password=\(secret("&"))", "postgres://alice:***@db/iap"),
        ("postgres://alice@db/iap?sslmode=verify-full&password=\(secret("%26"))", "postgres://alice@db/iap?sslmode=verify-full"),
        ("postgres://db/iap?password=\(secret("@"))", "postgres://***@…"),
        ("postgres://db/iap?password=\(secret("#"))&sslmode=require", "postgres://db/iap"),
        ("postgres://\(secret("%3A"))@db/iap", "postgres://***@db/iap"),
        (
            "postgresql://alice:\(secret("@/"))@[::1]:5432/iap?sslrootcert=/etc/ssl/ca.pem",
            "postgresql://alice:***@[::1]:5432/iap?sslrootcert=/etc/ssl/ca.pem"
        ),
        ("mysql://alice:\(secret("!"))@db/iap", "mysql://alice:***@db/iap"),
        ("http://alice:\(secret("#"))@127.0.0.1/", "http://alice:***@127.0.0.1/"),
        ("host=127.0.0.1 port=1 user=alice password='\(secret(" host=x "))' dbname=iap", "host=127.0.0.1 port=1 user=alice password=*** dbname=iap"),
        ("host=db password=\(secret("\\ ")) sslmode=verify-full", "host=db password=*** sslmode=verify-full"),
        ("host=db password='\(secret("\\' x"))", "host=db password=***"),
        ("host=db password = \(secret("=")) user=alice", "host=db password=*** user=alice"),
        (secret(":"), "(not a URL)"),
        ("\(secret(":"))@db/iap", "(not a URL)"),
    ]

    @Test func redactionNeverShowsThePassword() throws {
        for (input, shown) in Self.redactions {
            let redacted = DatabaseSettings.redacted(input)
            #expect(!Self.leaks(redacted), "\(input) → \(redacted)")
            #expect(redacted == shown, "\(input)")
            // Parsing either succeeds, with a safe description, or fails with a safe message.
            do {
                let settings = try DatabaseSettings(url: input)
                #expect(!Self.leaks(settings.description), "\(input) → \(settings)")
            } catch let error as DatabaseSettings.InvalidURL {
                #expect(!Self.leaks(error.description) && !Self.leaks(error.debugDescription), "\(input) → \(error)")
            }
        }
    }

    @Test func ambiguousURLsAreRefusedAndEncodedOnesRead() throws {
        // libpq reads '?' and ':' in a password before the '@'; these parse, with the password intact.
        let questionMark = try DatabaseSettings(url: "postgres://alice:\(Self.secret("?:"))@db:6432/iap")
        #expect(questionMark.password == Self.secret("?:"))
        #expect(questionMark.host == "db" && questionMark.port == 6432 && questionMark.database == "iap" && questionMark.username == "alice")
        let encoded = try DatabaseSettings(url: "postgres://alice:\(Self.secret("%25t%23%40%2F%3F%20"))@db/iap")
        #expect(encoded.password == Self.secret("%t#@/? "))
        let inQuery = try DatabaseSettings(url: "postgres://db/iap?user=alice&password=\(Self.secret("%26"))&sslmode=require")
        #expect(inQuery.password == Self.secret("&") && inQuery.username == "alice" && inQuery.sslMode == .require)
        #expect(!Self.leaks(inQuery.description))
        // Unencoded '@', '/', '#', '%', spaces: a reader could split these differently, so they are refused.
        for middle in ["@", "/", "#", "%t", " ", "%zz"] {
            #expect(throws: DatabaseSettings.InvalidURL.self, "\(middle)") {
                try DatabaseSettings(url: "postgres://alice:\(Self.secret(middle))@db/iap")
            }
        }
        #expect(throws: DatabaseSettings.InvalidURL.self) { try DatabaseSettings(url: "host=db password=\(Self.secret(""))") }
        #expect(throws: DatabaseSettings.InvalidURL.self) { try DatabaseSettings(url: "mysql://alice:x@db/iap") }
    }

    @Test func scrubbingRemovesEveryReadingOfThePassword() {
        let url = "postgres://alice:\(Self.secret("%t#@"))@db/iap?password=\(Self.secret("%26"))"
        let message = "failed: \(Self.secret("%t#@")) / \(Self.secret("%26")) / \(Self.secret("&"))"
        let scrubbed = DatabaseSettings.scrubbing(message, secretsOf: [url])
        #expect(!Self.leaks(scrubbed), "\(scrubbed)")
        #expect(scrubbed.hasPrefix("failed: "))
    }

    /// A `Database` holds the listener's connection settings, password included; printed inside
    /// anything (ServiceLifecycle logs its services' descriptions at debug level), it shows its name only.
    @Test func aDatabasePrintedAnywhereShowsNoPassword() throws {
        struct Holder { let database: Database }
        let settings = try DatabaseSettings(url: "postgres://alice:\(Self.secret("pw"))@127.0.0.1:1/db")
        let database = try Database(settings: settings, logger: TestDatabase.logger)
        var dumped = ""
        dump(Holder(database: database), to: &dumped)
        for text in [
            "\(database)", String(reflecting: database), "\(Holder(database: database))", String(reflecting: Holder(database: database)),
            "\(database.configuration)", dumped,
        ] {
            #expect(!Self.leaks(text), "\(text)")
            #expect(text.contains("alice:***@127.0.0.1:1/db"), "\(text)")
        }
    }

    /// `sslmode` takes libpq's six names and no other; only `disable` and `allow` connect without TLS.
    @Test func everySSLModeOfLibpqParsesAndNoOtherDoes() throws {
        let modes = try DatabaseSettings.SSLMode.allCases.map { try DatabaseSettings(url: "postgres://db/iap?sslmode=\($0.rawValue)") }
        #expect(modes.map(\.sslMode.rawValue) == ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"])
        #expect(modes.map { $0.tlsConfiguration != nil } == [false, false, true, true, true, true])
        #expect(try DatabaseSettings(url: "postgres://db/iap").sslMode == .prefer)
        for unknown in ["verify_full", "VERIFY-FULL", ""] {
            #expect {
                try DatabaseSettings(url: "postgres://db/iap?sslmode=\(unknown)")
            } throws: { ($0 as? DatabaseSettings.InvalidURL)?.code == .invalidSSLMode }
        }
    }

    /// What the webhook and the metrics log of a store failure: the database's brief message or the
    /// failure's kind, never the text of an error that could carry a secret.
    @Test func aStoreFailureIsDescribedByItsKindNotItsText() {
        struct CarriesASecret: Error, CustomStringConvertible {
            var description: String { "postgres://alice:\(DatabaseSecretsTests.secret("x"))@db/iap" }
        }
        let described = Database.operatorDescription(of: CarriesASecret())
        #expect(described == "CarriesASecret" && !Self.leaks(described))
        let unknown = ReconcilerError(.unknownStoredValue, "runs.status holds \"archived\"")
        #expect(Database.operatorDescription(of: unknown).hasPrefix("unknownStoredValue: "))
    }

    @Test func tlsFilesAreCheckedWhenTheSettingsAreMade() throws {
        try TemporaryDirectory.with { directory in
            let missing = "/nonexistent/\(UUID().uuidString)/ca.pem"
            #expect {
                try DatabaseSettings(url: "postgres://alice:\(Self.secret(""))@db/iap?sslmode=verify-full&sslrootcert=\(missing)")
            } throws: { error in
                guard let error = error as? DatabaseSettings.InvalidURL else { return false }
                return error.code == .unreadableTLSFile && error.description.contains("sslrootcert") && !Self.leaks(error.description)
            }
            let notPEM = directory.file("not.pem")
            try "not a certificate".write(toFile: notPEM, atomically: true, encoding: .utf8)
            #expect {
                try DatabaseSettings(url: "postgres://db/iap?sslmode=verify-ca&sslrootcert=\(notPEM)")
            } throws: { ($0 as? DatabaseSettings.InvalidURL)?.code == .unreadableTLSFile }
            #expect {
                try DatabaseSettings(url: "postgres://db/iap?sslmode=require&sslrootcert=system")
            } throws: { ($0 as? DatabaseSettings.InvalidURL)?.code == .invalidSSLMode }
            #expect(try DatabaseSettings(url: "postgres://db/iap?sslrootcert=system").sslMode == .verifyFull)
            #expect {
                try DatabaseSettings(url: "postgres://db/iap?sslmode=verify-full&sslcert=\(notPEM)")
            } throws: { ($0 as? DatabaseSettings.InvalidURL)?.code == .unreadableTLSFile }
        }
    }

}
