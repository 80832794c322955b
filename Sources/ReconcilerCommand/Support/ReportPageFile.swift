import AppStoreServer
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
        if announce { print(line(path: path, report: report)) }
    }

    /// `run --report-html`: one page per app and environment, each showing its newest run
    /// (``path(_:for:)`` with several). A page that cannot be written is a configuration error that
    /// becomes its outcome's stop. Returns where each was written (by index), as the line to print.
    static func write(_ path: String?, for outcomes: inout [RecoveryOutcome], ledger: RunLedger, logger: Logger) async -> [Int: String] {
        var pages: [Int: String] = [:]
        for index in outcomes.indices {
            guard let path, let report = outcomes[index].reports.last else { continue }
            let file = outcomes.count > 1 ? Self.path(path, for: outcomes[index].scope.target) : path
            do {
                try await write(report: report, ledger: ledger, to: file, logger: logger, announce: false)
                pages[index] = line(path: file, report: report)
            } catch {
                let stop = (error as? ReconcilerError) ?? .configuration("cannot write the report page to \(file): \(error)")
                outcomes[index].stop = outcomes[index].stop ?? stop
            }
        }
        return pages
    }

    /// Where a page was written and what it shows.
    static func line(path: String, report: RunReport) -> String {
        "incident report page: \(path) (run \(report.runId), \(report.bundleId) \(report.environment))"
    }

    /// The page of one app and environment when a run covers several: `incident.html` becomes
    /// `incident-com.example.one-production.html` (the extension stays last, so it opens as HTML).
    static func path(_ path: String, for target: AppTarget) -> String {
        let url = URL(fileURLWithPath: path)
        let name = url.deletingPathExtension().lastPathComponent + "-\(target.bundleId)-\(target.environment.rawValue.lowercased())"
        let file = url.pathExtension.isEmpty ? name : name + "." + url.pathExtension
        let directory = (path as NSString).deletingLastPathComponent
        return directory.isEmpty ? file : (directory as NSString).appendingPathComponent(file)
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
