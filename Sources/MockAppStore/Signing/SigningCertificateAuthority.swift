import AppStoreServer
package import Crypto
package import Foundation
package import SwiftASN1
package import X509

/// A three-level certificate authority shaped like Apple's (root, intermediate, leaf, all
/// P-256), whose certificates carry Apple's OIDs, for the mock App Store and for tests.
///
/// Strict verifiers (Apple's Python library uses OpenSSL's X509_STRICT) accept it: CA
/// certificates have critical basic constraints and key usage, and every certificate has key
/// identifiers.
///
/// ```swift
/// let authority = try SigningCertificateAuthority()
/// let signer = authority.signer
/// let jws = try signer.sign(notificationPayload)
/// try authority.rootPEM.write(toFile: "root.pem", atomically: true, encoding: .utf8)
/// ```
package struct SigningCertificateAuthority: Sendable {
    package struct Options: Sendable {
        package var name: String
        package var notValidBefore: Date
        package var notValidAfter: Date
        /// The leaf's own validity; defaults to the authority's.
        package var leafNotValidBefore: Date?
        package var leafNotValidAfter: Date?
        /// Leave out Apple's leaf OID 1.2.840.113635.100.6.11.1 (to build forged chains).
        package var includeLeafOID: Bool
        /// Leave out Apple's intermediate OID 1.2.840.113635.100.6.2.1.
        package var includeIntermediateOID: Bool
        /// The same seed gives the same keys; `nil` gives fresh random keys.
        package var seed: String?
        /// Pad each certificate (with a non-critical extension of filler text) to the size of
        /// Apple's (leaf 1,077, intermediate 794, root 583 bytes of DER in the real vectors), so a
        /// JWS header is about 4.4 KB as Apple's are: for measuring storage and throughput.
        package var appleSizedCertificates: Bool

        package init(
            name: String = "Mock App Store", notValidBefore: Date = Date(timeIntervalSinceNow: -2 * 365 * 86400),
            notValidAfter: Date = Date(timeIntervalSinceNow: 2 * 365 * 86400), leafNotValidBefore: Date? = nil,
            leafNotValidAfter: Date? = nil, includeLeafOID: Bool = true, includeIntermediateOID: Bool = true,
            seed: String? = nil, appleSizedCertificates: Bool = false
        ) {
            self.name = name
            self.notValidBefore = notValidBefore
            self.notValidAfter = notValidAfter
            self.leafNotValidBefore = leafNotValidBefore
            self.leafNotValidAfter = leafNotValidAfter
            self.includeLeafOID = includeLeafOID
            self.includeIntermediateOID = includeIntermediateOID
            self.seed = seed
            self.appleSizedCertificates = appleSizedCertificates
        }
    }

    /// The DER sizes of Apple's chain in the real vectors (`testdata/apple-signed`): leaf, intermediate, root.
    package static let appleCertificateSizes = (leaf: 1077, intermediate: 794, root: 583)
    /// A private arc for the filler extension of ``Options/appleSizedCertificates``.
    static let paddingOID: ASN1ObjectIdentifier = [1, 3, 6, 1, 4, 1, 99999, 1]

    package static let leafOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]
    package static let intermediateOID: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]

    package let root: Certificate
    package let intermediate: Certificate
    package let leaf: Certificate
    package let leafKey: P256.Signing.PrivateKey

    package init(options: Options = Options()) throws {
        let rootKey = Self.key(seed: options.seed, label: "root")
        let intermediateKey = Self.key(seed: options.seed, label: "intermediate")
        let leafKey = Self.key(seed: options.seed, label: "leaf")
        let rootName = try DistinguishedName {
            CountryName("US")
            OrganizationName(options.name)
            CommonName("\(options.name) Root CA")
        }
        let intermediateName = try DistinguishedName {
            CountryName("US")
            OrganizationName(options.name)
            OrganizationalUnitName("G1")
            CommonName("\(options.name) Intermediate CA")
        }
        let leafName = try DistinguishedName {
            CountryName("US")
            OrganizationName(options.name)
            CommonName("\(options.name) Signing")
        }
        let rootPublic = Certificate.PublicKey(rootKey.publicKey)
        let intermediatePublic = Certificate.PublicKey(intermediateKey.publicKey)
        let leafPublic = Certificate.PublicKey(leafKey.publicKey)
        let sizes = options.appleSizedCertificates ? Self.appleCertificateSizes : nil
        root = try Self.certificate(size: sizes?.root) { padding in
            try Certificate(
                version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: rootPublic,
                notValidBefore: options.notValidBefore, notValidAfter: options.notValidAfter,
                issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                    SubjectKeyIdentifier(hash: rootPublic)
                    if let padding { padding }
                },
                issuerPrivateKey: Certificate.PrivateKey(rootKey))
        }
        intermediate = try Self.certificate(size: sizes?.intermediate) { padding in
            try Certificate(
                version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: intermediatePublic,
                notValidBefore: options.notValidBefore, notValidAfter: options.notValidAfter,
                issuer: rootName, subject: intermediateName, signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                    SubjectKeyIdentifier(hash: intermediatePublic)
                    AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: rootPublic).keyIdentifier)
                    if options.includeIntermediateOID {
                        Certificate.Extension(oid: Self.intermediateOID, critical: false, value: [0x05, 0x00])
                    }
                    if let padding { padding }
                },
                issuerPrivateKey: Certificate.PrivateKey(rootKey))
        }
        leaf = try Self.certificate(size: sizes?.leaf) { padding in
            try Certificate(
                version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: leafPublic,
                notValidBefore: options.leafNotValidBefore ?? options.notValidBefore,
                notValidAfter: options.leafNotValidAfter ?? options.notValidAfter,
                issuer: intermediateName, subject: leafName, signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.notCertificateAuthority)
                    Critical(KeyUsage(digitalSignature: true))
                    SubjectKeyIdentifier(hash: leafPublic)
                    AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: intermediatePublic).keyIdentifier)
                    if options.includeLeafOID {
                        Certificate.Extension(oid: Self.leafOID, critical: false, value: [0x05, 0x00])
                    }
                    if let padding { padding }
                },
                issuerPrivateKey: Certificate.PrivateKey(intermediateKey))
        }
        self.leafKey = leafKey
    }

    /// A certificate `make` builds, padded to about `size` bytes of DER when a size is given.
    private static func certificate(size: Int?, _ make: (Certificate.Extension?) throws -> Certificate) throws -> Certificate {
        var certificate = try make(nil)
        guard let size else { return certificate }
        // The filler is a UTF8String; each try lands within a few bytes (signatures vary in length).
        var filler = max(0, size - der(certificate).count - 16)
        for _ in 0..<4 {
            let text = Array(String(repeating: "padding to the size of Apple's certificate; ", count: filler / 44 + 1).utf8.prefix(filler))
            var value: [UInt8] = [0x0C]
            value += text.count < 128 ? [UInt8(text.count)] : [0x82, UInt8(text.count >> 8), UInt8(text.count & 0xFF)]
            certificate = try make(Certificate.Extension(oid: paddingOID, critical: false, value: (value + text)[...]))
            let difference = size - der(certificate).count
            if abs(difference) <= 2 { break }
            filler = max(0, filler + difference)
        }
        return certificate
    }

    /// A signer whose `x5c` is this authority's chain.
    package var signer: JWSSigner {
        JWSSigner(key: leafKey, chain: [leaf, intermediate, root])
    }

    /// The root certificate in PEM, to configure as a trusted root.
    package var rootPEM: String {
        // A parsed or built certificate always serializes.
        try! root.serializeAsPEM().pemString
    }

    /// The root certificate in DER.
    package var rootDER: [UInt8] {
        Self.der(root)
    }

    static func der(_ certificate: Certificate) -> [UInt8] {
        var serializer = DER.Serializer()
        try! serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    /// A P-256 key derived from the seed, or a random one.
    static func key(seed: String?, label: String) -> P256.Signing.PrivateKey {
        guard let seed else { return P256.Signing.PrivateKey() }
        var material = Data(SHA256.hash(data: Data("\(seed)/\(label)".utf8)))
        // A hash at or above the curve order is not a scalar; rehash (chance about 2^-32).
        while true {
            if let key = try? P256.Signing.PrivateKey(rawRepresentation: material) { return key }
            material = Data(SHA256.hash(data: material))
        }
    }
}
