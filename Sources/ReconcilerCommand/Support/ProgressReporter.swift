import Foundation
import Logging
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

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

/// The progress of every app and environment a `run` recovers at once, each with its reporter:
/// on a terminal, one recovery rewrites one line in place; several each log their own.
final class RecoveryProgress: Sendable {
    let logger: Logger
    let interval: Duration
    let several: Bool
    /// With `--log-format json`, where each window's start is told (``announce(_:)``).
    let json: Bool
    private let reporters = Locked<[Task<Void, Never>]>([])

    init(logger: Logger, interval: Duration, several: Bool, json: Bool) {
        (self.logger, self.interval, self.several, self.json) = (logger, interval, several, json)
    }

    /// A new progress for one app and environment, reported until ``stop()``.
    func progress(of scope: AppScope) -> RunProgress {
        let progress = RunProgress()
        var targetLogger = logger
        if several { targetLogger[metadataKey: "app"] = "\(scope)" }
        let reporter = ProgressReporter(progress: progress, logger: targetLogger, interval: interval, rewritesLine: !several)
        reporters.withLock { $0.append(Task { await reporter.run() }) }
        return progress
    }

    /// Ends every reporter (a terminal's line is cleared).
    func stop() async {
        for reporter in reporters.withLock({ $0 }) {
            reporter.cancel()
            await reporter.value
        }
    }

    /// Prints the window a run is about to recover, before its first request, whatever the log
    /// level (a typo in a time shows here, not after the recovery): one line on stderr, stdout
    /// keeping the reports; with `--log-format json`, a notice log line.
    func announce(_ start: Recovery.WindowStart) {
        let verb = start.dryRun ? "dry run, would recover" : "recovering"
        guard !json else {
            logger.notice(
                "\(verb) a window",
                metadata: [
                    "app": "\(start.scope)", "start": "\(start.window.start)", "end": "\(start.window.end)",
                    "length": "\(start.window.duration.readableText)", "kind": "\(start.kind.rawValue)",
                ])
            return
        }
        // On a terminal the progress line may be on screen: clear it first.
        let clear = ProgressReporter.stderrIsTerminal ? "\r\u{1B}[K" : ""
        FileHandle.standardError.write(Data("\(clear)\(verb) \(start.scope): \(start.window.readableText)\n".utf8))
    }
}
