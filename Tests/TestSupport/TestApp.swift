package import AppStoreServer
import Foundation
package import MockAppStore
package import Reconciler
package import ReconcilerDomain
package import ReconcilerShared
package import ReconcilerStore

/// An app with its own test CA (Apple's OIDs) that signs notifications the way the App Store does.
package struct TestApp {
    package static let bundleId = "com.example.reconciler.tests"
    package static let appAppleId: Int64 = 1_122_334_455
    package let authority: SigningCertificateAuthority
    package let environment: AppStoreEnvironment
    package let start = Int64(Date().timeIntervalSince1970 * 1000) - 10 * 86_400_000

    package init(environment: AppStoreEnvironment = .production) throws {
        authority = try SigningCertificateAuthority()
        self.environment = environment
    }

    package var verifierConfiguration: SignedDataVerifier.Configuration {
        .init(rootCertificates: [authority.root], bundleId: Self.bundleId, appAppleId: Self.appAppleId, environment: environment)
    }

    /// The app and environment, judged by `entitlement` (the default rule unless given).
    package func scope(_ entitlement: EntitlementPolicy = .init()) -> AppScope {
        AppScope(target: verifierConfiguration.target, entitlement: entitlement)
    }

    package func handler(_ database: TestDatabase, entitlement: EntitlementPolicy = .init()) throws -> NotificationHandler {
        NotificationHandler(
            scope: scope(entitlement), verifier: try SignedDataVerifier(configuration: verifierConfiguration), database: database.database)
    }

    /// A monthly subscription transaction; `period` 0 is the first purchase.
    package func subscription(
        original: String, period: Int, product: String = "com.example.monthly", signedDate: Int64,
        revocationDate: Int64? = nil, transactionId: String? = nil
    ) -> JWSTransactionDecodedPayload {
        let purchase = start + Int64(period) * 30 * 86_400_000
        return JWSTransactionDecodedPayload(
            originalTransactionId: original, transactionId: transactionId ?? "\(original)\(period == 0 ? "" : "-\(period)")",
            bundleId: Self.bundleId, productId: product, subscriptionGroupIdentifier: "group.1",
            purchaseDate: purchase, originalPurchaseDate: start, expiresDate: purchase + 30 * 86_400_000, quantity: 1,
            type: .autoRenewableSubscription, inAppOwnershipType: .purchased, signedDate: signedDate,
            revocationReason: revocationDate == nil ? nil : .refundedDueToIssue, revocationDate: revocationDate,
            environment: environment, transactionReason: period == 0 ? .purchase : .renewal,
            revocationType: revocationDate == nil ? nil : .refundFull, revocationPercentage: revocationDate == nil ? nil : 100_000)
    }

    /// A consumable (or another one-time product) bought at `purchaseDate`.
    package func oneTime(
        _ transactionId: String, type: ProductType = .consumable, product: String = "com.example.coins", purchaseDate: Int64, signedDate: Int64,
        ownership: InAppOwnershipType = .purchased
    ) -> JWSTransactionDecodedPayload {
        JWSTransactionDecodedPayload(
            originalTransactionId: transactionId, transactionId: transactionId, bundleId: Self.bundleId, productId: product,
            purchaseDate: purchaseDate, originalPurchaseDate: purchaseDate, quantity: 1, type: type, inAppOwnershipType: ownership,
            signedDate: signedDate, environment: environment, transactionReason: .purchase, appTransactionId: "705000000000000042")
    }

    /// Renewal info; a billing problem shows as `isInBillingRetryPeriod`, and a grace period as its end.
    package func renewal(
        original: String, autoRenew: AutoRenewStatus, signedDate: Int64, product: String = "com.example.monthly",
        isInBillingRetryPeriod: Bool? = nil, gracePeriodExpiresDate: Int64? = nil
    ) -> JWSRenewalInfoDecodedPayload {
        JWSRenewalInfoDecodedPayload(
            originalTransactionId: original, autoRenewProductId: product, productId: product, autoRenewStatus: autoRenew,
            isInBillingRetryPeriod: isInBillingRetryPeriod, gracePeriodExpiresDate: gracePeriodExpiresDate,
            signedDate: signedDate, environment: environment)
    }

    package func notification(
        _ type: NotificationTypeV2, _ subtype: Subtype? = nil, uuid: String = UUID().uuidString.lowercased(),
        signedDate: Int64, transaction: JWSTransactionDecodedPayload? = nil,
        renewal: JWSRenewalInfoDecodedPayload? = nil, status: Status? = nil,
        bundleId: String = bundleId, appAppleId: Int64? = appAppleId, environment: AppStoreEnvironment? = nil,
        signer: JWSSigner? = nil, consumptionRequestReason: ConsumptionRequestReason? = nil
    ) throws -> String {
        let signer = signer ?? authority.signer
        let payload = ResponseBodyV2DecodedPayload(
            notificationType: type, subtype: subtype, notificationUUID: uuid, signedDate: signedDate,
            data: NotificationData(
                appAppleId: appAppleId, bundleId: bundleId, environment: environment ?? self.environment,
                signedTransactionInfo: try transaction.map { try signer.sign($0) },
                signedRenewalInfo: try renewal.map { try signer.sign($0) }, status: status,
                consumptionRequestReason: consumptionRequestReason))
        return try signer.sign(payload)
    }
}

extension NotificationHandler {
    /// A handler for the app and environment `verifier` accepts, judging `entitled` by
    /// `entitlement` (tests of one app; commands take the scope from the configuration).
    package init(verifier: SignedDataVerifier, database: Database, entitlement: EntitlementPolicy = .init()) {
        self.init(scope: AppScope(target: verifier.configuration.target, entitlement: entitlement), verifier: verifier, database: database)
    }
}
