package import AppStoreServer
package import ReconcilerDomain
package import ReconcilerShared

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

    /// Apple's last retry of a notification comes about 157 hours (6.5 days) after its first
    /// attempt, and each attempt is signed when first sent: a notification signed longer ago than
    /// this is not Apple's delivery but a copy someone posted.
    package static let maximumDeliveryAge: Duration = .days(7)

    /// The app and environment an authentic notification names, when the configuration does not.
    package struct UnconfiguredApp: Sendable, CustomStringConvertible {
        package var bundleId: String?
        package var environment: AppStoreEnvironment?
        package var appAppleId: Int64?
        package var signedDate: Timestamp?
        package var notificationType: NotificationTypeV2?
        /// Whether the deployment knows the app (configured in another environment, or listed in
        /// `knownApps`): then it is a gap in the configuration.
        package var isKnownApp: Bool

        /// Who can have sent such a notification, which decides whether a person is paged.
        package enum Sender: Sendable, Equatable {
            /// Apple, for an app the deployment knows: the configuration misses an app or an
            /// environment of the team's (503, pages).
            case appleForAKnownApp
            /// Apple for someone else's app, or anyone (a genuine notification of someone else's
            /// app, or a TEST notification, which anyone can request for their own app, posted
            /// here): 503 all the same, but no page.
            case someoneElse
            /// Not Apple: signed more than ``NotificationRouter/maximumDeliveryAge`` before `now`
            /// (or not dated at all), a copy posted again (400, no page).
            case replay
        }

        /// Who can have sent the notification, judged at `now`.
        package func sender(at now: Timestamp) -> Sender {
            guard let signedDate, now - signedDate <= NotificationRouter.maximumDeliveryAge else { return .replay }
            return isKnownApp && notificationType != .test ? .appleForAKnownApp : .someoneElse
        }

        package var description: String {
            "an authentic notification for \(bundleId ?? "no app") (\(environment?.rawValue ?? "no environment")"
                + "\(appAppleId.map { ", app Apple ID \($0)" } ?? "")), which the configuration does not name"
        }
    }

    package let handlers: [NotificationHandler]
    /// The bundle IDs the deployment knows: those of the handlers and `knownApps`.
    package let knownApps: Set<String>
    private let verifier: SignedDataVerifier

    /// - Parameters:
    ///   - handlers: one per app and environment; their verifiers must trust the same roots.
    ///   - knownApps: bundle IDs of apps the deployment knows besides the handlers' (the team's
    ///     apps configured in another environment or another deployment, `knownApps` in the file).
    package init(handlers: [NotificationHandler], knownApps: Set<String> = []) throws {
        guard let first = handlers.first else {
            throw ReconcilerError(.missingKey, "no app is configured to receive notifications for")
        }
        self.handlers = handlers
        self.knownApps = knownApps.union(handlers.map(\.verifier.configuration.bundleId))
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
            return .notConfigured(
                UnconfiguredApp(
                    bundleId: unrouted.bundleId, environment: unrouted.environment, appAppleId: unrouted.appAppleId,
                    signedDate: unrouted.payload.signedDate.map(Timestamp.init(millisecondsSince1970:)),
                    notificationType: unrouted.payload.notificationType, isKnownApp: unrouted.bundleId.map(knownApps.contains) ?? false))
        }
        return .handler(handler, try await handler.verify(unrouted))
    }
}
