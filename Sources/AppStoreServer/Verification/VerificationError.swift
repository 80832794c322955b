/// Why a signed value was rejected: one distinct, named ``Reason`` per check, plus a detail
/// for humans. Nothing a verifier rejects is ever applied.
public struct VerificationError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Reason: String, Hashable, Sendable, CaseIterable, Codable {
        /// Not three base64url segments, or a header that is not JSON.
        case malformedJWS = "MALFORMED_JWS"
        /// `alg` is not ES256 (for example `none` or `HS256`).
        case unsupportedAlgorithm = "UNSUPPORTED_ALGORITHM"
        /// `x5c` is missing or does not hold exactly three certificates.
        case invalidChainLength = "INVALID_CHAIN_LENGTH"
        /// An `x5c` entry is not a base64 DER certificate, or the leaf key is not P-256.
        case invalidCertificate = "INVALID_CERTIFICATE"
        /// `x5c[2]` is not byte-identical to one of the configured root certificates.
        case untrustedRoot = "UNTRUSTED_ROOT"
        /// The certificates do not chain (issuer, signature or RFC 5280 rules).
        case invalidChain = "INVALID_CHAIN"
        /// The leaf lacks Apple's OID 1.2.840.113635.100.6.11.1.
        case missingLeafOID = "MISSING_LEAF_OID"
        /// The intermediate lacks Apple's OID 1.2.840.113635.100.6.2.1.
        case missingIntermediateOID = "MISSING_INTERMEDIATE_OID"
        /// The ES256 signature does not match the header and payload.
        case invalidSignature = "INVALID_SIGNATURE"
        /// The payload has no `signedDate`, so there is no time to judge the certificates at.
        case missingSignedDate = "MISSING_SIGNED_DATE"
        /// A certificate of the chain was not valid at the payload's `signedDate`.
        case certificateNotValidAtSignedDate = "CERTIFICATE_NOT_VALID_AT_SIGNED_DATE"
        /// The payload is not JSON of the expected kind, or lacks a required field.
        case invalidPayload = "INVALID_PAYLOAD"
        /// The `bundleId` is not the configured one.
        case invalidBundleId = "INVALID_BUNDLE_ID"
        /// In production, the `appAppleId` is not the configured one.
        case invalidAppAppleId = "INVALID_APP_APPLE_ID"
        /// The `environment` is not the configured one.
        case invalidEnvironment = "INVALID_ENVIRONMENT"
    }

    public var reason: Reason
    public var detail: String

    public init(_ reason: Reason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    public var description: String { "\(reason.rawValue): \(detail)" }
}
