import AppStoreServer
import ArgumentParser
import CoreMetrics
import Foundation
import Logging
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerMetrics
import ReconcilerStore

/// `--metrics-file` of a batch command (`run`, `repair`): one registry for the process, bootstrapped
/// for every library's swift-metrics, written atomically to the file whatever the outcome, so that
/// alerts see the exit code of a command that stopped before it could report too.
struct MetricsFile {
    let path: String
    let registry: MetricsRegistry

    /// The file of `path` (`nil` without `--metrics-file`), its registry labelled with the app and
    /// environment `app` names (none with several).
    init?(_ path: String?, app: AppOptions) {
        guard let path else { return nil }
        self.path = path
        registry = MetricsRegistry(bundleId: app.resolvedBundleId, environment: try? app.resolvedEnvironment)
        MetricsSystem.bootstrap(registry.factory)
    }

    /// Refuses, before anything runs, a file that could not be written: its directory must be
    /// writable (the file is written beside, then renamed) and it must not be a directory.
    static func validate(_ path: String?) throws {
        guard let path else { return }
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        guard FileManager.default.isWritableFile(atPath: directory) else {
            throw ValidationError(
                "--metrics-file \(path): the directory \(directory) does not exist or is not writable (the file is written beside, then renamed)")
        }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw ValidationError("--metrics-file \(path) is a directory; give a file name such as reconciler.prom")
        }
    }

    /// Writes what the registry holds now.
    func write() throws {
        do {
            try registry.writeTextfile(to: path)
        } catch {
            throw ReconcilerError.configuration("\(error)")
        }
    }
}

extension MetricsFile? {
    /// Runs a batch command's `work`; when it throws (it stopped before it could report: the
    /// configuration, the database), `record` is given its exit code and the file is written all
    /// the same, then the error ends the command.
    func recordingFailure<T>(
        logger: Logger, record: (MetricsRegistry, Int32) -> Void, work: () async throws -> T
    ) async throws -> T {
        do {
            return try await work()
        } catch {
            if let file = self {
                record(file.registry, ReconcilerError(endingCommandWith: error)?.exitCode ?? 1)
                do { try file.write() } catch let metricsError { logger.error("\(metricsError)") }
            }
            throw error
        }
    }
}

extension MetricsRegistry {
    /// What alerts watch besides a run, read from the database for each target into its scope of
    /// this registry: the quarantine, the last finished run, the newest live notification. A read
    /// that fails leaves the gauges as they were (the run's own outcome is already recorded).
    func refreshLedgerGauges(of targets: [CommandTarget], ledger: RunLedger) async {
        for target in targets {
            try? await LedgerMetrics(
                ledger: ledger, app: target.app, registry: scoped(target.app),
                liveConsumptionRequests: target.configuration.consumption.liveRequests
            ).refresh()
        }
    }
}
