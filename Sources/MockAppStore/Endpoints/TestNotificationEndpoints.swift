import AppStoreServer
import Foundation
import NIOHTTP1
import Synchronization

/// Request a Test Notification (a TEST notification sent to the webhook now) and Get Test
/// Notification Status (its payload and send attempts).
extension MockAppStore {
    func requestTestNotification(in app: AppWorld) async -> MockHTTPResponse {
        guard let webhook = configuration.webhookURL else {
            return Self.apiError(.notFound, 4_040_007, "Server notification URL not found.")
        }
        let scenario = app.scenario
        var generator = SystemRandomNumberGenerator()
        let uuid = UUID().uuidString.lowercased()
        let payload = ResponseBodyV2DecodedPayload(
            notificationType: .test, notificationUUID: uuid, version: "2.0", signedDate: Self.nowMilliseconds,
            data: NotificationData(
                appAppleId: scenario.environment == .production ? scenario.appAppleId : nil,
                bundleId: scenario.bundleId, environment: scenario.environment))
        guard let signedPayload = try? authority.signer.sign(payload) else {
            return Self.apiError(.internalServerError, 5_000_000, "An unknown error occurred.")
        }
        let token = "\(UInt64.random(in: 1...UInt64.max, using: &generator))_\(uuid)"
        app.testNotifications.withLock { $0[token] = TestNotification(signedPayload: signedPayload, attempts: []) }
        // Apple sends it right away; its status shows no attempt until the first one is done.
        Task {
            let attemptedAt = Self.nowMilliseconds
            let result = await post(signedPayload, to: webhook)
            app.testNotifications.withLock { $0[token]?.attempts.append(SendAttemptItem(attemptDate: attemptedAt, sendAttemptResult: result)) }
        }
        return .json(.ok, SendTestNotificationResponse(testNotificationToken: token))
    }

    func testNotificationStatus(token: String, in app: AppWorld) -> MockHTTPResponse {
        guard let test = app.testNotifications.withLock({ $0[token] }) else {
            return Self.apiError(.notFound, 4_040_008, "Test notification not found.")
        }
        return .json(.ok, CheckTestNotificationResponse(signedPayload: test.signedPayload, sendAttempts: test.attempts))
    }
}
