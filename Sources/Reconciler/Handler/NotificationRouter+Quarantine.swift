package import AppStoreServer
package import ReconcilerDomain
package import ReconcilerStore

/// The live path never loses an authentic notification it cannot understand: one whose signature
/// and chain verify but which then fails to decode (``undecodable(_:)``: a required field missing
/// or of another type, a structure Apple added after this release) is quarantined with its exact
/// bytes and answered 200, since Apple may not retry a 4xx. `reconciler rejections --retry`
/// handles it again after an upgrade: one that then decodes is applied and leaves the quarantine.
/// Forgeries (a bad signature, an untrusted chain, a certificate not valid at the signed date) are
/// not quarantined: the webhook refuses them with 400.
///
/// ```swift
/// do { route = try await router.route(signedPayload: payload) }
/// catch let failure where NotificationRouter.undecodable(failure) != nil {
///     let quarantined = try await router.quarantine(signedPayload: payload, failure: NotificationRouter.undecodable(failure)!)
/// }
/// ```
extension NotificationRouter {
    /// The reasons the verifier gives only once a payload's signature and chain verified: what
    /// the notification says could not be understood, not who signed it.
    package static let undecodableReasons: Set<VerificationError.Reason> = [.invalidPayload, .missingSignedDate]

    /// The verifier's error when `error` says an authentic notification could not be understood.
    package static func undecodable(_ error: any Error) -> VerificationError? {
        guard let error = error as? VerificationError, undecodableReasons.contains(error.reason) else { return nil }
        return error
    }

    /// An authentic notification the webhook quarantined.
    package struct Quarantined: Sendable {
        package var rejection: Rejection
        /// What it names, read member by member (`nil` when it cannot be read).
        package var bundleId: String?
        package var environment: AppStoreEnvironment?
        /// Whether this delivery quarantined it (`false`: it was there already, Apple sent it again).
        package var isNew: Bool
    }

    /// Quarantines an authentic notification that failed with `failure` (``undecodable(_:)``),
    /// under the app and environment it names as far as they can be read.
    package func quarantine(signedPayload: String, failure: VerificationError) async throws -> Quarantined {
        let claims = UnverifiedPayload.notificationClaims(signedPayload)
        let rejection = Rejection(source: .webhook, signedValue: signedPayload, error: failure)
        let (bundleId, environment) = (claims.bundleId, claims.environment.map(AppStoreEnvironment.init(rawValue:)))
        let isNew = try await RunLedger(database: handlers[0].database).quarantineLive(rejection, bundleId: bundleId, environment: environment)
        return Quarantined(rejection: rejection, bundleId: bundleId, environment: environment, isNew: isNew)
    }

    /// What handling a quarantined notification again did.
    package enum RetryOutcome: Sendable {
        /// It decoded: applied as the webhook applies a notification, and out of the quarantine.
        case applied(HandlingResult, app: AppTarget)
        /// It still does not decode; it stays, with the reason of this attempt.
        case stillUndecodable(VerificationError)
        /// It decoded, for an app or environment the configuration does not name; it stays.
        case notConfigured(UnconfiguredApp)
    }

    /// Handles a notification the webhook quarantined again, through the same verification and
    /// handler as a live one. Throws ``VerificationError`` when it no longer verifies at all (the
    /// configured roots changed): it stays.
    package func retry(_ quarantined: RunLedger.QuarantinedNotification) async throws -> RetryOutcome {
        let ledger = RunLedger(database: handlers[0].database)
        let route: Route
        do {
            route = try await self.route(signedPayload: quarantined.signedPayload)
        } catch let error as VerificationError where Self.undecodableReasons.contains(error.reason) {
            try await ledger.noteRetryFailed(sha256: quarantined.payloadSHA256, reason: error.reason, detail: error.detail)
            return .stillUndecodable(error)
        }
        switch route {
        case .notConfigured(let app):
            return .notConfigured(app)
        case .handler(let handler, let notification):
            try await handler.database.storeHeaders(of: notification.signedParts)
            let result = try await handler.database.transaction { transaction in
                let result = try await handler.apply([notification], source: .webhook, on: transaction)[0]
                try await ledger.removeFromQuarantine(sha256: quarantined.payloadSHA256, on: transaction)
                return result
            }
            return .applied(result, app: handler.verifier.configuration.target)
        }
    }
}
