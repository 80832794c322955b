package import AppStoreServer
package import ReconcilerDomain

/// Sends each live notification to the handler of the app and environment it names, for one
/// `serve` that receives every app's notifications (Apple sends sandbox ones to the production URL
/// when no sandbox URL is set). The signature and chain are verified first, once, since they do not
/// depend on the app; only then is the signed `bundleId` and `environment` (and, in production,
/// `appAppleId`) read to pick the handler.
///
/// ```swift
/// let router = try NotificationRouter(handlers: targets.map { NotificationHandler(scope: $0.scope, verifier: $0.verifier, database: database) })
/// let (handler, notification) = try await router.route(signedPayload: body.signedPayload)
/// let result = try await handler.apply(notification, source: .webhook)
/// ```
package struct NotificationRouter: Sendable {
    /// Where a verified notification goes.
    package enum Route: Sendable {
        /// The handler of the app the notification names, and the notification verified for it.
        case handler(NotificationHandler, VerifiedNotification)
        /// An authentic notification for an app or environment this deployment does not serve:
        /// not stored, so Apple delivers it again once the configuration names the app.
        case notConfigured(UnconfiguredApp)
    }

    /// The app and environment an authentic notification names, when the configuration does not.
    package struct UnconfiguredApp: Sendable, CustomStringConvertible {
        package var bundleId: String?
        package var environment: AppStoreEnvironment?
        package var appAppleId: Int64?

        package var description: String {
            "an authentic notification for \(bundleId ?? "no app") (\(environment?.rawValue ?? "no environment")"
                + "\(appAppleId.map { ", app Apple ID \($0)" } ?? "")), which the configuration does not name"
        }
    }

    package let handlers: [NotificationHandler]
    private let verifier: SignedDataVerifier

    /// - Parameter handlers: one per app and environment; their verifiers must trust the same roots.
    package init(handlers: [NotificationHandler]) throws {
        guard let first = handlers.first else {
            throw ReconcilerError(.missingKey, "no app is configured to receive notifications for")
        }
        self.handlers = handlers
        self.verifier = first.verifier
    }

    /// The handler of the app the notification names, and the notification verified for it
    /// (nested values included), or the app an authentic notification names when it is not
    /// configured. Throws ``VerificationError`` for a forged or malformed payload.
    package func route(signedPayload: String) async throws -> Route {
        let unrouted = try await verifier.verifyNotificationOfAnyApp(signedPayload)
        guard
            let handler = handlers.first(where: {
                $0.verifier.configuration.target.owns(bundleId: unrouted.bundleId, environment: unrouted.environment, appAppleId: unrouted.appAppleId)
            })
        else {
            return .notConfigured(UnconfiguredApp(bundleId: unrouted.bundleId, environment: unrouted.environment, appAppleId: unrouted.appAppleId))
        }
        return .handler(handler, try await handler.verify(unrouted))
    }
}
