import AppStoreServer
import ArgumentParser
import Foundation
import Logging
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

struct CheckWebhookCommand: AsyncParsableCommand, UsesAppsOptions {
    static let configuration = CommandConfiguration(
        commandName: "check-webhook",
        abstract: "Ask the App Store to send a TEST notification and report whether the webhook got it.",
        discussion: """
            Calls Request a Test Notification, then polls Get Test Notification Status until the App Store has \
            tried to deliver it. Prints SUCCESS, or the sendAttemptResult Apple recorded. With DATABASE_URL set, \
            it also confirms the webhook stored the TEST notification. Each environment has its own URL in App \
            Store Connect: every app and environment configured is checked (--app and --environment choose), one \
            after the other, an app's production before its sandbox, each under its own header when there are \
            several. Exit 0 when every check succeeded, 2 when one failed, 1 when Apple refused the key.

              reconciler check-webhook
              reconciler check-webhook --app com.example.one
            """)

    @Option(help: ArgumentHelp("How long to wait for the delivery attempt, in seconds.", valueName: "s")) var timeout: Int = 60

    @OptionGroup var options: AppleOptions

    func run() async throws {
        let logger = logging.makeLogger()
        let targets = try app.commandTargets(api: api).productionFirst()
        let several = targets.count > 1
        var failures: [(app: AppTarget, error: ReconcilerError)] = []
        for target in targets {
            if several { print("== \(target.app)") }
            do {
                print(try await target.callingApple { try await database.checkWebhook(target, timeout: timeout, logger: logger) })
            } catch {
                // With several, a failure of one is printed and the others are checked all the same.
                guard several, let failure = ReconcilerError(endingCommandWith: error), failure.code != .interrupted else { throw error }
                print(failure.operatorMessage)
                failures.append((target.app, failure))
            }
        }
        if let worst = ReconcilerError.worst(of: failures, several: several) { throw worst }
    }
}
