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
                print(try await target.callingApple { try await check(target, logger: logger) })
            } catch {
                // With several, a failure of one is printed and the others are checked all the same.
                guard several, let failure = ReconcilerError(endingCommandWith: error), failure.code != .interrupted else { throw error }
                print(failure.operatorMessage)
                failures.append((target.app, failure))
            }
        }
        if let worst = ReconcilerError.worst(of: failures, several: several) { throw worst }
    }

    /// Checks one app and environment's webhook: the line that says it succeeded, or an error.
    private func check(_ target: CommandTarget, logger: Logger) async throws -> String {
        let client = target.client
        let verifier = target.verifier
        // With a database, the requests come out of the budget the app's other processes share.
        let sharing = [target.sharing([.requestTestNotification, .getTestNotificationStatus])]
        let interrupted = ReconcilerError(.interrupted, "interrupted before the App Store tried to deliver the TEST notification")
        let (token, status) = try await database.sharingBudgetIfConfigured(logger: logger, sharing: sharing, interrupted: interrupted) {
            [timeout] in try await Self.requestAndWait(client: client, timeout: timeout)
        }
        guard let attempt = status.sendAttempts?.last else {
            throw ReconcilerError.partial("FAILED: no delivery attempt within \(timeout) s (token \(token))")
        }
        var uuid = "?"
        if let payload = status.signedPayload {
            do {
                uuid = try await verifier.verifyAndDecodeNotification(payload).notificationUUID ?? "?"
            } catch let error as VerificationError {
                throw ReconcilerError.partial("FAILED: the TEST notification does not verify: \(error)")
            }
        }
        let when = attempt.attemptDate.map { "\(Timestamp(millisecondsSince1970: $0))" } ?? "?"
        guard attempt.sendAttemptResult == .success else {
            throw ReconcilerError.partial(
                "FAILED: \(attempt.sendAttemptResult?.rawValue ?? "UNKNOWN") at \(when) (notification \(uuid)); check that `reconciler serve` is reachable at the URL set in App Store Connect"
            )
        }
        var stored = ""
        if (try? database.settings()) != nil {
            let storedUUID = uuid
            let found = try await database.withDatabase(logger: logger) { database -> Bool in
                let store = PurchaseStore(logger: logger)
                // The webhook may still be writing it.
                for _ in 0..<20 {
                    if try await database.transaction({ try await store.notifications.hasNotification(uuid: storedUUID, on: $0) }) { return true }
                    try await Task.sleep(for: .milliseconds(250))
                }
                return false
            }
            guard found else {
                throw ReconcilerError.partial(
                    "FAILED: Apple reports SUCCESS at \(when), but notification \(uuid) is not in this database: is the webhook writing to another one?"
                )
            }
            stored = ", stored by the webhook"
        }
        return "SUCCESS: TEST notification \(uuid) delivered at \(when)\(stored)"
    }

    /// Requests the TEST notification, then polls its status until the App Store has tried to deliver it.
    private static func requestAndWait(client: AppStoreServerAPIClient, timeout: Int) async throws -> (String, CheckTestNotificationResponse) {
        let token: String
        do {
            guard let value = try await client.requestTestNotification().testNotificationToken else {
                throw ReconcilerError.partial("FAILED: the App Store returned no test notification token")
            }
            token = value
        } catch let error as AppStoreServerAPIError {
            // A refused key is the configuration's (exit 1): ``CommandTarget/callingApple(_:)`` names its settings.
            if error.refusesTheCredentials { throw error }
            throw ReconcilerError.partial("FAILED: Request a Test Notification: \(error)")
        }
        let deadline = ContinuousClock.now + .seconds(timeout)
        var status = CheckTestNotificationResponse()
        while ContinuousClock.now < deadline {
            do {
                status = try await client.getTestNotificationStatus(testNotificationToken: token)
            } catch let error as AppStoreServerAPIError {
                if error.refusesTheCredentials { throw error }
                throw ReconcilerError.partial("FAILED: Get Test Notification Status: \(error)")
            }
            if !(status.sendAttempts ?? []).isEmpty { break }
            try await Task.sleep(for: .seconds(1))
        }
        return (token, status)
    }
}
