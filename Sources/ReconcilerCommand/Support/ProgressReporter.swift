import Foundation
import Logging
import Reconciler
import ReconcilerDomain

/// Shows a run's progress: a line rewritten in place on a terminal, a log line every
/// `interval` otherwise (cron, systemd, Kubernetes).
struct ProgressReporter {
    let progress: RunProgress
    let logger: Logger
    let interval: Duration
    /// Whether it may rewrite one line on a terminal (not when several reporters share it).
    var rewritesLine = true

    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    func run() async {
        let terminal = rewritesLine && Self.stderrIsTerminal
        let period = terminal ? Duration.milliseconds(500) : interval
        while !Task.isCancelled {
            try? await Task.sleep(for: period)
            guard !Task.isCancelled else { break }
            let line = Self.line(progress.snapshot)
            if terminal {
                FileHandle.standardError.write(Data("\r\u{1B}[K\(line)".utf8))
            } else {
                logger.info("progress", metadata: ["status": "\(line)"])
            }
        }
        if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    static func line(_ snapshot: RunProgress.Snapshot) -> String {
        var text = "replay: shards \(snapshot.shardsDone)/\(snapshot.shardsTotal)"
        if snapshot.shardsFailed > 0 { text += " (\(snapshot.shardsFailed) failed)" }
        text +=
            ", pages \(snapshot.pages), notifications \(snapshot.notificationsSeen) (applied \(snapshot.applied), duplicate \(snapshot.duplicates), rejected \(snapshot.rejected))"
        if snapshot.phase != "replay" || snapshot.customersTotal > 0 {
            text += " | gap fill: customers \(snapshot.customersDone + snapshot.customersFailed)/\(snapshot.customersTotal)"
            if snapshot.customersFailed > 0 { text += " (\(snapshot.customersFailed) failed)" }
        }
        return text
    }
}
