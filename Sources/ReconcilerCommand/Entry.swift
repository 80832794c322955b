import ArgumentParser
import Foundation
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

/// `reconciler`: brings in-app-purchase records back in line with the App Store after the
/// notification webhook was down.
@main
struct ReconcilerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reconciler",
        abstract: "Brings in-app purchase records back in line with the App Store after a webhook outage.",
        discussion: """
            The apps come from a configuration file, --config FILE or RECONCILER_CONFIG (every app and \
            environment of the deployment, the key, the entitlement rules: Configuration reference in \
            docs/reference.md); without one, the APP_STORE_* variables name one app in one environment: \
            APP_STORE_BUNDLE_ID, APP_STORE_APP_APPLE_ID (production), APP_STORE_ENVIRONMENT, \
            APP_STORE_ROOT_CERTIFICATES, APP_STORE_KEY_ID, APP_STORE_ISSUER_ID, APP_STORE_PRIVATE_KEY_PATH, \
            APP_STORE_API_BASE_URL. The database is DATABASE_URL (or --database-url) either way.

              export RECONCILER_CONFIG=/etc/reconciler/reconciler.yaml
              export DATABASE_URL=postgres://...
              reconciler migrate && reconciler serve --port 8080
              reconciler run --start now-6h --dry-run

            Exit codes: 0 success; 1 usage or configuration error, the run lease is held, or (repair) an unknown or \
            malformed order ID, transaction ID or app account token; 2 partial or \
            interrupted (something retryable was not recovered: rerun to resume); 3 a signed value is not \
            genuine (inspect, verify-stored); 4 done, but something needs a person (payloads quarantined for the first time, \
            requests Apple refused, a window lost to retention). Consumption requests never change a run's exit \
            code; `consumption send` exits 1 on bad input or an Apple 4xx and 2 on a 429 or 5xx.
            """,
        version: ReconcilerVersion.current,
        subcommands: [
            MigrateCommand.self, ServeCommand.self, RunCommand.self, RepairCommand.self, WorkCommand.self, StatusCommand.self,
            RejectionsCommand.self, ForwardCommand.self, ChangesCommand.self, ConsumptionCommand.self, PruneCommand.self, InspectCommand.self,
            ExportCommand.self, DetectOutageCommand.self, CheckWebhookCommand.self, VerifyStoredCommand.self, CompactPayloadsCommand.self,
            ImportCommand.self, SetAppAccountTokenCommand.self,
            DoctorCommand.self,
        ])

    /// Maps errors to the documented exit codes (``ReconcilerError/init(endingCommandWith:)``).
    static func main() async {
        MallocArenas.limit()
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            // Messages are built never to hold a database password; scrubbing is the last line of defence.
            let secrets = DatabaseOptions.connectionStrings()
            if let failure = ReconcilerError(endingCommandWith: error) {
                FileHandle.standardError.write(
                    Data((DatabaseSettings.scrubbing("Error: " + failure.operatorMessage, secretsOf: secrets) + "\n").utf8))
                Foundation.exit(failure.exitCode)
            }
            let code = exitCode(for: error)
            if code == .success {
                exit(withError: error)
            }
            let message = DatabaseSettings.scrubbing(fullMessage(for: error), secretsOf: secrets)
            if !message.isEmpty {
                FileHandle.standardError.write(Data((message.hasSuffix("\n") ? message : message + "\n").utf8))
            }
            // ArgumentParser's validation failures (64) are usage errors: exit 1, as the README says.
            Foundation.exit(code == .validationFailure ? 1 : code.rawValue)
        }
    }
}
