import AppStoreServer
import Foundation
import ReconcilerDomain
import TestSupport
import Testing

@testable import Reconciler

/// `reconciler doctor`'s output contract: the exit by 1 > 2 > 4 > 0, the lines, the JSON items
/// and the documented list of checks.
@Suite struct DoctorReportTests {
    static func result(_ status: DoctorStatus, transient: Bool = false) -> DoctorResult {
        DoctorResult(.database, status: status, detail: "d", fix: status == .ok ? nil : "Do it.", transient: transient)
    }

    @Test func theExitFollowsTheOneTablesPrecedence() {
        func exit(_ results: [DoctorResult]) -> ExitClass { DoctorReport(results: results).exitClass }
        #expect(exit([Self.result(.ok)]) == .recovered)
        #expect(exit([Self.result(.ok), Self.result(.warn)]) == .attention)
        #expect(exit([Self.result(.warn), Self.result(.fail, transient: true)]) == .retryable)
        #expect(exit([Self.result(.fail, transient: true), Self.result(.fail), Self.result(.warn)]) == .configuration)
        #expect(DoctorReport(results: [Self.result(.fail, transient: true)]).ending?.exitCode == 2)
        #expect(DoctorReport(results: [Self.result(.warn)]).ending?.exitCode == 4)
        #expect(DoctorReport(results: [Self.result(.fail)]).ending?.exitCode == 1)
    }

    @Test func aLineSaysTheStatusTheCheckItsAppAndTheFix() {
        let line = DoctorResult(
            .appleAuth, app: "com.example.one", environment: .production, status: .fail, detail: "HTTP 401", fix: "Check the key.")
        #expect(line.line == "FAIL apple-auth com.example.one (Production): HTTP 401 Fix: Check the key.")
        #expect(DoctorResult.ok(.feed, "12 changes").line == "ok   feed: 12 changes")
    }

    /// Every item has the six keys, `null` included.
    @Test func eachJSONItemHasTheSixKeys() throws {
        let data = try JSONEncoder().encode(DoctorReport(results: [Self.result(.ok)]))
        let items = try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
        #expect(items.count == 1)
        #expect(Set(items[0].keys) == ["check", "app", "environment", "status", "detail", "fix"])
        #expect(items[0]["app"] is NSNull)
        #expect(items[0]["status"] as? String == "ok")
        #expect(items[0]["check"] as? String == "database")
    }

    /// The reference lists every check by its name, and no other.
    @Test func theReferenceListsEveryCheck() throws {
        let reference = try String(contentsOf: Repository.root.appendingPathComponent("docs/reference.md"), encoding: .utf8)
        let section = try #require(reference.components(separatedBy: "### doctor's checks").dropFirst().first?.components(separatedBy: "\n## ").first)
        let listed = section.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("| `") else { return nil }
            return line.dropFirst(3).split(separator: "`").first.map(String.init)
        }
        #expect(listed == DoctorCheck.allCases.map(\.rawValue))
    }
}
