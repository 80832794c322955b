import Foundation
import TestSupport
import Testing

/// ARCHITECTURE.md names the code's types as the code names them: every type it mentions in
/// backticks (`PurchaseStore`, `VerifiedNotification.storage`, `WebhookServer.answer(failure:)`) is
/// declared in Sources or Tests, or is a module or test target, and every member it names is
/// declared too. A type renamed, moved into another's file or folded away fails here until the
/// document follows.
@Suite struct ArchitectureTests {
    /// Names in backticks that are not the project's: Swift's own types and upcoming features,
    /// the types of libraries it follows (Hummingbird's), files.
    static let notOurs: Set<String> = [
        "Int64", "Duration", "Date", "String", "InternalImportsByDefault", "MemberImportVisibility", "HTTPResponseError",
    ]

    @Test func everyTypeItNamesIsDeclared() throws {
        let document = try String(contentsOf: Repository.root.appendingPathComponent("ARCHITECTURE.md"), encoding: .utf8)
        let declared = try Self.declaredNames(in: ["Sources", "Tests", "Plugins"])
        let targets = try Set(
            ["Sources", "Tests", "Plugins"].flatMap {
                try FileManager.default.contentsOfDirectory(atPath: Repository.root.appendingPathComponent($0).path)
            })
        var mentioned: [(type: String, members: [String])] = []
        for span in document.matches(of: /`([^`\n]+)`/).map({ String($0.output.1) }) {
            // A type, then members, then an argument list: `A`, `A.b`, `A.b(c:)`.
            guard let match = span.wholeMatch(of: /([A-Z][A-Za-z0-9]*)((?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?:\(.*\))?/) else { continue }
            let type = String(match.output.1)
            // A file (`Package.swift`) is not a type.
            guard !Self.notOurs.contains(type), span.wholeMatch(of: /.*\.(swift|md|yml|yaml|sql|json)/) == nil else { continue }
            mentioned.append((type, match.output.2.split(separator: ".").map(String.init)))
        }
        #expect(mentioned.count > 30, "ARCHITECTURE.md names fewer types than it did: \(mentioned.map(\.type))")
        var missing: Set<String> = []
        for (type, members) in mentioned {
            if !targets.contains(type) && !declared.types.contains(type) { missing.insert(type) }
            for member in members where !declared.members.contains(member) { missing.insert("\(type).\(member)") }
        }
        #expect(missing.isEmpty, "ARCHITECTURE.md names what the code does not declare: \(missing.sorted())")
    }

    /// What each stage of `jobs/dev/test` promises: the unit tests (run under Thread Sanitizer,
    /// without DATABASE_URL) need no database and start no process; the integration tests start no
    /// process (the end-to-end stage does).
    @Test func eachTestTargetKeepsToItsStage() throws {
        let processes = [
            "RunningProcess(", "runProcess(", ".reconciler(", "Chromium.", "PrometheusText.checkMetrics", "PrivateCluster", "Rehearsal.with",
        ]
        let database = ["TestDatabase.with", "HistoryMock.with"]
        var strays: [String] = []
        for (directory, forbidden) in [("Tests/UnitTests", processes + database), ("Tests/IntegrationTests", processes)] {
            let root = Repository.root.appendingPathComponent(directory)
            guard let files = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else { continue }
            for case let file as URL in files where file.pathExtension == "swift" && file.path != #filePath {
                let text = try String(contentsOf: file, encoding: .utf8)
                for word in forbidden where text.contains(word) { strays.append("\(directory)/\(file.lastPathComponent): \(word)") }
            }
        }
        #expect(strays.isEmpty, "a test in the wrong stage: \(strays)")
    }

    /// An app's environment travels as `AppStoreEnvironment` (inside an `AppTarget` where the app
    /// is known), never as a `String`: strings stay in Apple's models, the mock that imitates Apple,
    /// and the store's binding code (its internal rows and statements, which bind and decode
    /// values). A declaration `environment: String` anywhere else fails here.
    @Test func theEnvironmentIsTypedOutsideApplesModelsAndTheStoresBindings() throws {
        let apple = ["Sources/AppStoreServer/", "Sources/MockAppStore/", "Sources/MockAppStoreCommand/"]
        var strings: [String] = []
        let root = Repository.root.appendingPathComponent("Sources")
        guard let files = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else { return }
        for case let file as URL in files where file.pathExtension == "swift" {
            let path = String(file.path.dropFirst(Repository.root.path.count + 1))
            guard !apple.contains(where: path.hasPrefix) else { continue }
            let binding = path.hasPrefix("Sources/ReconcilerStore/")
            for (number, line) in try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            {
                let code = line.trimmingCharacters(in: .whitespaces)
                guard !code.hasPrefix("//"), code.contains(/\benvironment: String\b/) else { continue }
                // The store's internal rows and statements bind strings; what it offers its callers is typed.
                if binding && !code.contains(/\b(package|public)\b/) { continue }
                strings.append("\(path):\(number + 1): \(code)")
            }
        }
        #expect(strings.isEmpty, "environment: String outside Apple's models and the store's bindings:\n\(strings.joined(separator: "\n"))")
    }

    /// The names the Swift files under `directories` declare: types (and the types they extend),
    /// and members (functions, properties, enum cases).
    static func declaredNames(in directories: [String]) throws -> (types: Set<String>, members: Set<String>) {
        let typeKeywords: Set<Substring> = ["struct", "enum", "class", "actor", "protocol", "typealias", "extension"]
        let memberKeywords: Set<Substring> = ["func", "var", "let", "case"]
        var (types, members) = (Set<String>(), Set<String>())
        for directory in directories {
            let root = Repository.root.appendingPathComponent(directory)
            guard let files = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else { continue }
            for case let file as URL in files where file.pathExtension == "swift" {
                let words = try String(contentsOf: file, encoding: .utf8).split { !($0.isLetter || $0.isNumber || $0 == "_") }
                for (keyword, name) in zip(words, words.dropFirst()) {
                    if typeKeywords.contains(keyword) { types.insert(String(name)) }
                    if memberKeywords.contains(keyword) { members.insert(String(name)) }
                }
            }
        }
        return (types, members)
    }
}
