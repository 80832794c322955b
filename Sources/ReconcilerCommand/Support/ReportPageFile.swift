import ArgumentParser
import Foundation
import Logging
import Reconciler
import ReconcilerDomain
import ReconcilerStore
import ReportPage

/// Writes a run's incident report page (`run --report-html`, `status --run ID --html`).
enum ReportPageFile {
    /// Reads the run's timeline, renders the page and replaces `path` with it. The timeline is read
    /// outside the caller's task (a run stopped by a signal still gets its page) and for a few
    /// seconds at most; without it the page says so and shows the report.
    /// - Parameter announce: print where the page is (not when stdout is JSON).
    static func write(report: RunReport, ledger: RunLedger, to path: String, logger: Logger, announce: Bool = true) async throws {
        let reader = RunLedger(database: ledger.database.with(unavailableTimeout: .seconds(5)))
        let runId = report.runId
        let timeline: RunTimeline?
        do {
            timeline = try await Task.detached {
                guard let run = try await reader.run(id: runId) else { return nil }
                return try await reader.timeline(run: run)
            }.value
        } catch {
            logger.warning(
                "the run's timeline could not be read; the report page shows the report without it",
                metadata: [
                    "runId": "\(runId)", "error": "\(String(describing: error).prefix(300))",
                ])
            timeline = nil
        }
        let html = IncidentReportPage(report: report, timeline: timeline).render()
        do {
            try Data(html.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw ReconcilerError.configuration("cannot write the report page to \(path): \(error.localizedDescription)")
        }
        if announce { print("incident report page: \(path)") }
    }

    /// Refuses, before anything runs, a page path whose directory does not exist.
    static func validate(_ path: String, option: String) throws {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ValidationError("\(option) \(path): the directory \(directory) does not exist")
        }
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw ValidationError("\(option) \(path) is a directory; give a file name such as run-report.html")
        }
    }
}
