import Crypto
import Foundation
import SwiftASN1
import Synchronization
@_spi(FixedExpiryValidationTime) public import X509

/// Verifies and decodes data signed by the App Store: notifications, transactions, renewal info and
/// app transactions.
///
/// A value is genuine when its JWS header says `ES256`, its `x5c` holds exactly
/// `[leaf, intermediate, root]`, the root is byte-identical to a configured root, the leaf carries
/// OID 1.2.840.113635.100.6.11.1 and the intermediate 1.2.840.113635.100.6.2.1, the chain is valid
/// under RFC 5280 at the payload's `signedDate`, and the ES256 signature matches. Then the
/// payload's app and environment must be the configured ones.
///
/// Verified chains are cached by their header, so a batch of payloads signed with the same
/// certificate does the X.509 work once; only the ES256 check runs per payload.
///
/// ```swift
/// let verifier = try SignedDataVerifier(configuration: .init(
///     bundleId: "com.example.app", appAppleId: 1234567890, environment: .production))
/// let notification = try await verifier.verifyAndDecodeNotification(body.signedPayload)
/// ```
public struct SignedDataVerifier: Sendable {
    public struct Configuration: Sendable {
        /// Trust anchors; the default is the bundled Apple Root CA - G3.
        public var rootCertificates: [Certificate]
        public var bundleId: String
        /// Required in production, where notifications carry it; sandbox payloads omit it.
        public var appAppleId: Int64?
        public var environment: AppStoreEnvironment
        /// How many distinct verified chains to remember.
        public var chainCacheCapacity: Int
        /// Rewrites a payload's JSON after its signature is verified and before it is decoded:
        /// how a build (or a test) teaches the decoder a shape Apple added after this release.
        /// `nil`, the default, decodes what Apple signed as it is; set it after `init`.
        public var payloadUpgrade: PayloadUpgrade?

        public init(
            rootCertificates: [Certificate] = [TrustedRoots.appleRootCAG3], bundleId: String,
            appAppleId: Int64? = nil, environment: AppStoreEnvironment, chainCacheCapacity: Int = 64
        ) {
            self.rootCertificates = rootCertificates
            self.bundleId = bundleId
            self.appAppleId = appAppleId
            self.environment = environment
            self.chainCacheCapacity = chainCacheCapacity
            self.payloadUpgrade = nil
        }

        /// The app and environment signed data must belong to.
        public var target: AppTarget { AppTarget(bundleId: bundleId, environment: environment, appAppleId: appAppleId) }
    }

    /// A configuration that cannot verify anything.
    public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Rewrites a verified payload's JSON before it is decoded (``Configuration/payloadUpgrade``).
    public struct PayloadUpgrade: Sendable {
        let rewrite: @Sendable ([UInt8]) throws -> [UInt8]

        public init(_ rewrite: @escaping @Sendable ([UInt8]) throws -> [UInt8]) {
            self.rewrite = rewrite
        }
    }

    public let configuration: Configuration
    private let chains: ChainVerifier

    /// A verifier of another app in another environment, sharing this one's roots and its cache of
    /// verified chains (one deployment verifies every app's data with the same Apple roots).
    public func verifier(for target: AppTarget) throws -> SignedDataVerifier {
        var configuration = self.configuration
        (configuration.bundleId, configuration.environment, configuration.appAppleId) = (target.bundleId, target.environment, target.appAppleId)
        return try SignedDataVerifier(configuration: configuration, chains: chains)
    }

    private init(configuration: Configuration, chains: ChainVerifier) throws {
        try Self.validate(configuration)
        self.configuration = configuration
        self.chains = chains
    }

    private static func validate(_ configuration: Configuration) throws {
        guard !configuration.rootCertificates.isEmpty else {
            throw ConfigurationError(description: "at least one root certificate is required")
        }
        guard !configuration.bundleId.isEmpty else {
            throw ConfigurationError(description: "the bundle id must not be empty")
        }
        if configuration.environment == .production, configuration.appAppleId == nil {
            throw ConfigurationError(description: "the app's Apple ID (APP_STORE_APP_APPLE_ID) is required in production")
        }
    }

    /// A notification whose signature and chain are verified, before its app is known: which app
    /// and environment it names decides where it goes (``accept(_:)`` of that app's verifier).
    public struct UnroutedNotification: Sendable {
        public let payload: ResponseBodyV2DecodedPayload
        public let signedPayload: String

        /// The app and environment the notification names (`data`, else `summary`, else the
        /// external purchase token, else `appData`).
        public var bundleId: String? { payload.appIdentity.bundleId }
        public var environment: AppStoreEnvironment? { payload.appIdentity.environment }
        public var appAppleId: Int64? { payload.appIdentity.appAppleId }
    }

    /// Verifies a notification's signature and chain without judging its app and environment, for
    /// a deployment that serves several: the result names its app, and that app's verifier accepts it.
    public func verifyNotificationOfAnyApp(_ signedPayload: String) async throws -> UnroutedNotification {
        let notification = try await chains.verify(signedPayload, as: ResponseBodyV2DecodedPayload.self, upgrade: configuration.payloadUpgrade)
        try Self.checkIdentity(of: notification)
        return UnroutedNotification(payload: notification, signedPayload: signedPayload)
    }

    /// Takes a notification verified by ``verifyNotificationOfAnyApp(_:)`` (of a verifier with the
    /// same roots) as this verifier's, checking its app and environment as ``verifyNotification(_:)`` does
    /// (its UUID and type were checked when it was verified: only the verifier makes one).
    public func accept(_ notification: UnroutedNotification) throws -> Verified<ResponseBodyV2DecodedPayload> {
        try checkApp(named: notification.payload.appIdentity)
        return Verified(notification.payload, signedValue: notification.signedPayload)
    }

    public init(configuration: Configuration) throws {
        try Self.validate(configuration)
        self.configuration = configuration
        self.chains = ChainVerifier(roots: configuration.rootCertificates, capacity: configuration.chainCacheCapacity)
    }

    /// Verifies a notification's `signedPayload` and checks its app and environment.
    ///
    /// The app and environment come from `data`, else `summary`, else `externalPurchaseToken`
    /// (Sandbox when its `externalPurchaseId` starts with `SANDBOX`), else `appData`, as in Apple's
    /// libraries; a notification with none of them names no app and is rejected.
    /// The nested `signedTransactionInfo`, `signedRenewalInfo` and `signedAppTransactionInfo` are
    /// not verified here; pass them to ``verifyAndDecodeTransaction(_:)``,
    /// ``verifyAndDecodeRenewalInfo(_:)`` and ``verifyAndDecodeAppTransaction(_:)``.
    public func verifyAndDecodeNotification(_ signedPayload: String) async throws -> ResponseBodyV2DecodedPayload {
        let notification = try await chains.verify(signedPayload, as: ResponseBodyV2DecodedPayload.self, upgrade: configuration.payloadUpgrade)
        try checkApp(of: notification)
        return notification
    }

    /// Verifies a `signedTransactionInfo` and checks its bundle id and environment.
    public func verifyAndDecodeTransaction(_ signedTransaction: String) async throws -> JWSTransactionDecodedPayload {
        let transaction = try await chains.verify(signedTransaction, as: JWSTransactionDecodedPayload.self, upgrade: configuration.payloadUpgrade)
        try checkApp(of: transaction)
        return transaction
    }

    /// Verifies a `signedRenewalInfo` and checks its environment (renewal info has no bundle id).
    public func verifyAndDecodeRenewalInfo(_ signedRenewalInfo: String) async throws -> JWSRenewalInfoDecodedPayload {
        let renewalInfo = try await chains.verify(signedRenewalInfo, as: JWSRenewalInfoDecodedPayload.self, upgrade: configuration.payloadUpgrade)
        try checkApp(of: renewalInfo)
        return renewalInfo
    }

    /// Verifies a `signedAppTransactionInfo` (the `appData` of a RESCIND_CONSENT notification) and
    /// checks its bundle id, its appAppleId in production, and its environment (`receiptType`).
    public func verifyAndDecodeAppTransaction(_ signedAppTransaction: String) async throws -> AppTransaction {
        let appTransaction = try await chains.verify(signedAppTransaction, as: AppTransaction.self, upgrade: configuration.payloadUpgrade)
        try checkApp(of: appTransaction)
        return appTransaction
    }

    /// Verifies the signature and chain only, without app or environment checks, and returns the
    /// payload's JSON; for tools that show what a value is before judging where it belongs.
    public func verifySignatureAndDecodePayload(_ jws: String) async throws -> [UInt8] {
        try await chains.verifiedPayload(jws, as: SignedDateField.self).json
    }

    // MARK: App and environment, once the signature is verified

    func checkApp(of notification: ResponseBodyV2DecodedPayload) throws {
        try Self.checkIdentity(of: notification)
        try checkApp(named: notification.appIdentity)
    }

    /// A notification names itself (`notificationUUID`) and its kind, whichever app it is for.
    private static func checkIdentity(of notification: ResponseBodyV2DecodedPayload) throws {
        guard let uuid = notification.notificationUUID, !uuid.isEmpty else {
            throw VerificationError(.invalidPayload, "the notification has no notificationUUID")
        }
        guard notification.notificationType != nil else {
            throw VerificationError(.invalidPayload, "the notification has no notificationType")
        }
    }

    /// The app and environment a notification names are this verifier's.
    private func checkApp(named identity: (bundleId: String?, appAppleId: Int64?, environment: AppStoreEnvironment?)) throws {
        try checkBundleId(identity.bundleId)
        try checkAppAppleId(identity.appAppleId)
        try checkEnvironment(identity.environment)
    }

    func checkApp(of transaction: JWSTransactionDecodedPayload) throws {
        guard let transactionId = transaction.transactionId, !transactionId.isEmpty,
            let originalTransactionId = transaction.originalTransactionId, !originalTransactionId.isEmpty
        else {
            throw VerificationError(.invalidPayload, "the transaction has no transactionId or originalTransactionId")
        }
        try checkBundleId(transaction.bundleId)
        try checkEnvironment(transaction.environment)
    }

    /// Renewal info has no bundle id: only its environment can be checked.
    func checkApp(of renewalInfo: JWSRenewalInfoDecodedPayload) throws {
        guard let originalTransactionId = renewalInfo.originalTransactionId, !originalTransactionId.isEmpty else {
            throw VerificationError(.invalidPayload, "the renewal info has no originalTransactionId")
        }
        try checkEnvironment(renewalInfo.environment)
    }

    /// An app transaction's environment is its `receiptType`.
    func checkApp(of appTransaction: AppTransaction) throws {
        try checkBundleId(appTransaction.bundleId)
        try checkAppAppleId(appTransaction.appAppleId)
        try checkEnvironment(appTransaction.receiptType)
    }

    /// Production payloads name the app's Apple ID; sandbox ones may omit it.
    private func checkAppAppleId(_ appAppleId: Int64?) throws {
        guard configuration.environment == .production else { return }
        guard appAppleId == configuration.appAppleId else {
            throw VerificationError(
                .invalidAppAppleId,
                "appAppleId \(appAppleId.map(String.init) ?? "missing") is not the configured \(configuration.appAppleId.map(String.init) ?? "")")
        }
    }

    private func checkBundleId(_ bundleId: String?) throws {
        guard bundleId == configuration.bundleId else {
            throw VerificationError(
                .invalidBundleId, "bundleId \(bundleId ?? "missing") is not the configured \(configuration.bundleId)")
        }
    }

    private func checkEnvironment(_ environment: AppStoreEnvironment?) throws {
        guard environment == configuration.environment else {
            throw VerificationError(
                .invalidEnvironment,
                "environment \(environment?.rawValue ?? "missing") is not the configured \(configuration.environment.rawValue)")
        }
    }
}

/// A signed payload: the certificates are judged at its `signedDate`.
protocol SignedPayload: Decodable {
    var signedDate: Int64? { get }
}

extension ResponseBodyV2DecodedPayload: SignedPayload {}
extension JWSTransactionDecodedPayload: SignedPayload {}
extension JWSRenewalInfoDecodedPayload: SignedPayload {}

extension AppTransaction: SignedPayload {
    /// An app transaction's signing date is its `receiptCreationDate`.
    var signedDate: Int64? { receiptCreationDate }
}

/// The one field every App Store signed value shares, for payloads of any kind.
private struct SignedDateField: SignedPayload {
    var signedDate: Int64?
}

/// The cryptographic half of verification, with the cache of verified chains.
final class ChainVerifier: Sendable {
    static let leafOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]
    static let intermediateOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]

    /// What a verified chain leaves behind: the key to check signatures with, and the time span
    /// in which all three certificates are valid (RFC 5280's other checks do not depend on time).
    struct VerifiedChain: Sendable {
        var leafKey: P256.Signing.PublicKey
        var notValidBefore: Date
        var notValidAfter: Date
    }

    private let roots: [Certificate]
    private let rootDERs: [[UInt8]]
    private let capacity: Int
    private let cache = Mutex<[HeaderKey: VerifiedChain]>([:])

    /// An encoded header as the cache's key: compared whole, hashed by its length and its first
    /// 512 bytes (they hold the leaf certificate's serial number), not by all 4.4 KB three times
    /// per notification. Only chains that passed full validation are cached, at most `capacity`.
    private struct HeaderKey: Hashable {
        let header: Substring

        func hash(into hasher: inout Hasher) {
            let utf8 = header.utf8
            hasher.combine(utf8.count)
            let hashed = utf8.withContiguousStorageIfAvailable {
                hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: $0.prefix(512))))
            }
            if hashed == nil { hasher.combine(String(header.prefix(512))) }
        }
    }

    init(roots: [Certificate], capacity: Int) {
        self.roots = roots
        self.rootDERs = roots.map { certificate in
            var serializer = DER.Serializer()
            // Serializing a parsed certificate re-emits its original bytes.
            try! serializer.serialize(certificate)
            return serializer.serializedBytes
        }
        self.capacity = max(1, capacity)
    }

    func verify<Payload: SignedPayload>(
        _ jws: String, as type: Payload.Type, upgrade: SignedDataVerifier.PayloadUpgrade? = nil
    ) async throws -> Payload {
        try await verifiedPayload(jws, as: type, upgrade: upgrade).payload
    }

    /// Verifies a JWS and decodes its payload once, as `Payload` (its JSON first rewritten by
    /// `upgrade`, when given); also returns the payload's JSON as signed.
    func verifiedPayload<Payload: SignedPayload>(
        _ jws: String, as type: Payload.Type, upgrade: SignedDataVerifier.PayloadUpgrade? = nil
    ) async throws -> (payload: Payload, json: [UInt8]) {
        let token = try CompactJWS(jws)
        let cached = cache.withLock { $0[HeaderKey(header: token.encodedHeader)] }
        let chain: VerifiedChain
        var needsFullValidation: (leaf: Certificate, intermediate: Certificate)?
        if let cached {
            chain = cached
        } else {
            let built = try buildChain(token)
            chain = built.chain
            needsFullValidation = (built.leaf, built.intermediate)
        }

        guard token.signature.count == 64,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: token.signature),
            chain.leafKey.isValidSignature(signature, for: token.signingInput)
        else {
            throw VerificationError(.invalidSignature, "the ES256 signature does not match the header and payload")
        }

        let payload: Payload
        do {
            payload = try JSONDecoder().decode(Payload.self, from: Data(try upgrade?.rewrite(token.payload) ?? token.payload))
        } catch {
            throw VerificationError(.invalidPayload, "the payload is not a \(Payload.self): \(error)")
        }
        guard let signedDateMilliseconds = payload.signedDate else {
            throw VerificationError(.missingSignedDate, "the payload has no signedDate to judge the certificates at")
        }
        let signedDate = Date(timeIntervalSince1970: Double(signedDateMilliseconds) / 1000)
        guard chain.notValidBefore <= signedDate, signedDate <= chain.notValidAfter else {
            throw VerificationError(
                .certificateNotValidAtSignedDate,
                "the chain is valid from \(chain.notValidBefore) to \(chain.notValidAfter), not at signedDate \(signedDate)")
        }

        if let (leaf, intermediate) = needsFullValidation {
            try await validateRFC5280(leaf: leaf, intermediate: intermediate, at: signedDate)
            cache.withLock { cache in
                if cache.count >= capacity { cache.removeAll(keepingCapacity: true) }
                cache[HeaderKey(header: token.encodedHeader)] = chain
            }
        }
        return (payload, token.payload)
    }

    /// The time-independent checks, each with its own reason.
    private func buildChain(_ token: CompactJWS) throws -> (chain: VerifiedChain, leaf: Certificate, intermediate: Certificate) {
        let header: JWSHeader
        let headerJSON = try token.decodedHeader()
        do {
            header = try JSONDecoder().decode(JWSHeader.self, from: Data(headerJSON))
        } catch {
            throw VerificationError(.malformedJWS, "the header is not a JSON object: \(error)")
        }
        guard header.alg == "ES256" else {
            throw VerificationError(.unsupportedAlgorithm, "alg is \(header.alg.map { "\"\($0)\"" } ?? "missing"), only ES256 is accepted")
        }
        guard let x5c = header.x5c, x5c.count == 3 else {
            throw VerificationError(.invalidChainLength, "x5c must hold [leaf, intermediate, root], found \(header.x5c?.count ?? 0) certificates")
        }
        var ders: [[UInt8]] = []
        var certificates: [Certificate] = []
        for (index, encoded) in x5c.enumerated() {
            guard let der = Data(base64Encoded: encoded) else {
                throw VerificationError(.invalidCertificate, "x5c[\(index)] is not base64")
            }
            do {
                certificates.append(try Certificate(derEncoded: [UInt8](der)))
                ders.append([UInt8](der))
            } catch {
                throw VerificationError(.invalidCertificate, "x5c[\(index)] is not a DER certificate: \(error)")
            }
        }
        let leaf = certificates[0], intermediate = certificates[1]
        guard let rootIndex = rootDERs.firstIndex(of: ders[2]) else {
            throw VerificationError(.untrustedRoot, "x5c[2] (\(certificates[2].subject)) is not byte-identical to a configured root certificate")
        }
        let root = roots[rootIndex]
        guard intermediate.issuer == root.subject, root.publicKey.isValidSignature(intermediate.signature, for: intermediate) else {
            throw VerificationError(.invalidChain, "x5c[1] (\(intermediate.subject)) is not issued by the root")
        }
        guard leaf.issuer == intermediate.subject, intermediate.publicKey.isValidSignature(leaf.signature, for: leaf) else {
            throw VerificationError(.invalidChain, "x5c[0] (\(leaf.subject)) is not issued by x5c[1]")
        }
        guard leaf.extensions[oid: Self.leafOID] != nil else {
            throw VerificationError(.missingLeafOID, "x5c[0] lacks extension 1.2.840.113635.100.6.11.1")
        }
        guard intermediate.extensions[oid: Self.intermediateOID] != nil else {
            throw VerificationError(.missingIntermediateOID, "x5c[1] lacks extension 1.2.840.113635.100.6.2.1")
        }
        guard let leafKey = P256.Signing.PublicKey(leaf.publicKey) else {
            throw VerificationError(.invalidCertificate, "the leaf key is not a P-256 key, so it cannot check ES256")
        }
        let chain = VerifiedChain(
            leafKey: leafKey,
            notValidBefore: max(leaf.notValidBefore, intermediate.notValidBefore, root.notValidBefore),
            notValidAfter: min(leaf.notValidAfter, intermediate.notValidAfter, root.notValidAfter))
        return (chain, leaf, intermediate)
    }

    /// The full RFC 5280 path validation (basic constraints, critical extensions, validity) by
    /// swift-certificates, as a last authority once the named checks have passed.
    private func validateRFC5280(leaf: Certificate, intermediate: Certificate, at signedDate: Date) async throws {
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
            RFC5280Policy(fixedExpiryValidationTime: signedDate)
            AppleChainLengthPolicy()
        }
        let result = await verifier.validate(leaf: leaf, intermediates: CertificateStore([intermediate]))
        switch result {
        case .validCertificate:
            return
        case .couldNotValidate(let failures):
            let reasons = failures.map { String(describing: $0.policyFailureReason) }.joined(separator: "; ")
            throw VerificationError(.invalidChain, "RFC 5280 validation failed: \(reasons.isEmpty ? "no path to a root" : reasons)")
        }
    }
}

/// Apple's chains are exactly leaf, intermediate, root.
private struct AppleChainLengthPolicy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        guard chain.count == 3 else {
            return .failsToMeetPolicy(reason: "the chain has \(chain.count) certificates, Apple's have 3")
        }
        return .meetsPolicy
    }
}
