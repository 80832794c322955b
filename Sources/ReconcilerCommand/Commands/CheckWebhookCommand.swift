import AppStoreServer
import ArgumentParser
import Foundation
import Logging
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

struct CheckWebhookCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-webhook",
        abstract: "Ask the App Store to send a TEST notification and report whether the webhook got it.",
        discussion: """
            Calls Request a Test Notification, then polls Get Test Notification Status until the App Store has \
            tried to deliver it. Prints SUCCESS, or the sendAttemptResult Apple recorded. With DATABASE_URL set, \
            it also confirms the webhook stored the TEST notification. Exit 0 on success, 2 on failure.

              reconciler check-webhook
            """)

    @Option(help: ArgumentHelp("How long to wait for the delivery attempt, in seconds.", valueName: "s")) var timeout: Int = 60

    @OptionGroup var app: AppOptions
    @OptionGroup var api: APIOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.makeLogger()
        let target = try app.commandTarget(api: api)
        let client = target.client
        let verifier = target.verifier
        // With a database, the requests come out of the budget the app's other processes share.
        let sharing = [target.sharing([.requestTestNotification, .getTestNotificationStatus])]
        let (token, status): (String, CheckTestNotificationResponse)
        do {
            (token, status) = try await database.sharingBudgetIfConfigured(logger: logger, sharing: sharing) { [timeout] in
                try await Self.requestAndWait(client: client, timeout: timeout)
            }
        } catch let error as ReconcilerError where error.code == .interrupted {
            throw ReconcilerError(.interrupted, "interrupted before the App Store tried to deliver the TEST notification")
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
        print("SUCCESS: TEST notification \(uuid) delivered at \(when)\(stored)")
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
            throw ReconcilerError.partial("FAILED: Request a Test Notification: \(error.operatorDescription)")
        }
        let deadline = ContinuousClock.now + .seconds(timeout)
        var status = CheckTestNotificationResponse()
        while ContinuousClock.now < deadline {
            do {
                status = try await client.getTestNotificationStatus(testNotificationToken: token)
            } catch let error as AppStoreServerAPIError {
                throw ReconcilerError.partial("FAILED: Get Test Notification Status: \(error.operatorDescription)")
            }
            if !(status.sendAttempts ?? []).isEmpty { break }
            try await Task.sleep(for: .seconds(1))
        }
        return (token, status)
    }
}
