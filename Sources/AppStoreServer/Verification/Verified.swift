import Foundation

/// A value signed by the App Store that ``SignedDataVerifier`` verified: its decoded payload and
/// the JWS it came in. Only the verifier makes one, so an API that takes `Verified` values (the
/// reconciler's store does) takes verified data only, and the compiler says so.
///
/// ```swift
/// let transaction = try await verifier.verifyTransaction(signedTransactionInfo)
/// print(transaction.payload.originalTransactionId ?? "", transaction.signedValue.count)
/// ```
public struct Verified<Payload: Sendable>: Sendable {
    /// What the JWS says, decoded.
    public let payload: Payload
    /// The JWS as received.
    public let signedValue: String

    init(_ payload: Payload, signedValue: String) {
        self.payload = payload
        self.signedValue = signedValue
    }
}

/// A subscription's signed pair, as notifications and Get All Subscription Statuses carry it.
public struct VerifiedSubscription: Sendable {
    public let transaction: Verified<JWSTransactionDecodedPayload>?
    public let renewalInfo: Verified<JWSRenewalInfoDecodedPayload>?

    /// The purchase both are about.
    public var originalTransactionId: String? {
        transaction?.payload.originalTransactionId ?? renewalInfo?.payload.originalTransactionId
    }
}

/// One signed value of any kind, for tools that show what a value is.
public struct InspectedValue: Sendable {
    public enum Kind: String, Sendable {
        case notification, transaction, renewalInfo, appTransaction, unknown
    }

    public let kind: Kind
    /// The payload's JSON.
    public let json: [UInt8]
    /// Whether the app and environment were checked too (not only the signature and chain).
    public let appChecked: Bool
}

extension SignedDataVerifier {
    /// Verifies a notification's `signedPayload` and checks its app and environment.
    public func verifyNotification(_ signedPayload: String) async throws -> Verified<ResponseBodyV2DecodedPayload> {
        Verified(try await verifyAndDecodeNotification(signedPayload), signedValue: signedPayload)
    }

    /// Verifies a `signedTransactionInfo` and checks its bundle id and environment.
    public func verifyTransaction(_ signedTransaction: String) async throws -> Verified<JWSTransactionDecodedPayload> {
        Verified(try await verifyAndDecodeTransaction(signedTransaction), signedValue: signedTransaction)
    }

    /// Verifies a `signedRenewalInfo` and checks its environment.
    public func verifyRenewalInfo(_ signedRenewalInfo: String) async throws -> Verified<JWSRenewalInfoDecodedPayload> {
        Verified(try await verifyAndDecodeRenewalInfo(signedRenewalInfo), signedValue: signedRenewalInfo)
    }

    /// Verifies a subscription's transaction and renewal info (either may be absent) and that both
    /// name the same original transaction.
    public func verifySubscription(signedTransactionInfo: String?, signedRenewalInfo: String?) async throws -> VerifiedSubscription {
        var transaction: Verified<JWSTransactionDecodedPayload>?
        var renewalInfo: Verified<JWSRenewalInfoDecodedPayload>?
        if let signedTransactionInfo { transaction = try await verifyTransaction(signedTransactionInfo) }
        if let signedRenewalInfo { renewalInfo = try await verifyRenewalInfo(signedRenewalInfo) }
        if let transaction, let renewalInfo, transaction.payload.originalTransactionId != renewalInfo.payload.originalTransactionId {
            throw VerificationError(.invalidPayload, "the transaction and renewal info name different originalTransactionIds")
        }
        return VerifiedSubscription(transaction: transaction, renewalInfo: renewalInfo)
    }

    /// Verifies one value of whatever kind it is, once: its signature and chain, and with
    /// `checkingApp` also the app and environment its kind carries. Returns its kind and JSON.
    public func inspect(_ jws: String, checkingApp: Bool) async throws -> InspectedValue {
        let json = try await verifySignatureAndDecodePayload(jws)
        let object = (try? JSONSerialization.jsonObject(with: Data(json))) as? [String: Any] ?? [:]
        let kind: InspectedValue.Kind
        if object["notificationType"] != nil || object["notificationUUID"] != nil {
            kind = .notification
        } else if object["transactionId"] != nil {
            kind = .transaction
        } else if object["receiptType"] != nil || object["appTransactionId"] != nil && object["originalTransactionId"] == nil {
            kind = .appTransaction
        } else if object["autoRenewStatus"] != nil || object["autoRenewProductId"] != nil || object["originalTransactionId"] != nil {
            kind = .renewalInfo
        } else {
            kind = .unknown
        }
        if checkingApp {
            // The signature is verified; what is left are the checks of the app and environment.
            let decoder = JSONDecoder()
            switch kind {
            case .notification: try checkApp(of: try decoder.decode(ResponseBodyV2DecodedPayload.self, from: Data(json)))
            case .transaction: try checkApp(of: try decoder.decode(JWSTransactionDecodedPayload.self, from: Data(json)))
            case .renewalInfo: try checkApp(of: try decoder.decode(JWSRenewalInfoDecodedPayload.self, from: Data(json)))
            case .appTransaction: try checkApp(of: try decoder.decode(AppTransaction.self, from: Data(json)))
            case .unknown: break
            }
        }
        return InspectedValue(kind: kind, json: json, appChecked: checkingApp && kind != .unknown)
    }
}
