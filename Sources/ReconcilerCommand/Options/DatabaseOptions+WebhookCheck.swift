import AppStoreServer
import Foundation
import Logging
import Reconciler
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

// The TEST notification's round trip, shared by `check-webhook` and `doctor --send-test`.
extension DatabaseOptions {
    /// Checks one app and environment's webhook: the line that says it succeeded, or an error
    /// (a `partial` one when Apple's delivery failed or the webhook did not store it).
    func checkWebhook(_ target: CommandTarget, timeout: Int, logger: Logger) async throws -> String {
        let client = target.client
        let verifier = target.verifier
        // With a database, the requests come out of the budget the app's other processes share.
        let sharing = [target.sharing([.requestTestNotification, .getTestNotificationStatus])]
        let interrupted = ReconcilerError(.interrupted, "interrupted before the App Store tried to deliver the TEST notification")
        let (token, status) = try await sharingBudgetIfConfigured(logger: logger, sharing: sharing, interrupted: interrupted) {
            try await Self.requestAndWait(client: client, timeout: timeout)
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
        if (try? settings()) != nil {
            let storedUUID = uuid
            let found = try await withDatabase(logger: logger) { database -> Bool in
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
