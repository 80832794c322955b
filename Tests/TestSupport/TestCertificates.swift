package import Crypto
import Foundation
import SwiftASN1
package import X509

/// A self-made certificate authority (P-256) that issues TLS server certificates, for a `PrivateCluster`
/// with `ssl=on`.
///
/// ```swift
/// let authority = try TestCertificateAuthority(name: "Test DB CA")
/// let server = try authority.serverCertificate(dnsNames: ["localhost"], ipAddresses: [[127, 0, 0, 1]])
/// let tls = PrivateCluster.Configuration.TLS(certificateChainPEM: server.certificatePEM, privateKeyPEM: server.privateKeyPEM)
/// ```
package struct TestCertificateAuthority {
    package let name: DistinguishedName
    package let key: P256.Signing.PrivateKey
    package let certificate: Certificate

    package var certificatePEM: String {
        get throws { try certificate.serializeAsPEM().pemString }
    }

    package init(name: String) throws {
        key = P256.Signing.PrivateKey()
        self.name = try DistinguishedName {
            OrganizationName("Reconciler tests")
            CommonName(name)
        }
        let publicKey = Certificate.PublicKey(key.publicKey)
        certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: publicKey,
            notValidBefore: Date(timeIntervalSinceNow: -3600), notValidAfter: Date(timeIntervalSinceNow: 7 * 86400),
            issuer: self.name, subject: self.name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: publicKey)
            },
            issuerPrivateKey: Certificate.PrivateKey(key))
    }

    /// A client certificate (and its key, as PEM) whose common name is `user`, for PostgreSQL's `cert` login.
    package func clientCertificate(user: String) throws -> (certificatePEM: String, privateKeyPEM: String) {
        let clientKey = P256.Signing.PrivateKey()
        let publicKey = Certificate.PublicKey(clientKey.publicKey)
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: publicKey,
            notValidBefore: Date(timeIntervalSinceNow: -3600), notValidAfter: Date(timeIntervalSinceNow: 7 * 86400),
            issuer: name, subject: try DistinguishedName { CommonName(user) }, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.clientAuth])
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: Certificate.PublicKey(key.publicKey)).keyIdentifier)
            },
            issuerPrivateKey: Certificate.PrivateKey(key))
        return (try certificate.serializeAsPEM().pemString, clientKey.pemRepresentation)
    }

    /// A server certificate (and its key, as PEM) for these names and IPv4 addresses, signed by this authority.
    package func serverCertificate(dnsNames: [String], ipAddresses: [[UInt8]]) throws -> (certificatePEM: String, privateKeyPEM: String) {
        let serverKey = P256.Signing.PrivateKey()
        let publicKey = Certificate.PublicKey(serverKey.publicKey)
        let subject = try DistinguishedName {
            OrganizationName("Reconciler tests")
            CommonName(dnsNames.first ?? "server")
        }
        let names = dnsNames.map { GeneralName.dnsName($0) } + ipAddresses.map { GeneralName.ipAddress(ASN1OctetString(contentBytes: $0[...])) }
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: publicKey,
            notValidBefore: Date(timeIntervalSinceNow: -3600), notValidAfter: Date(timeIntervalSinceNow: 7 * 86400),
            issuer: name, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true, keyAgreement: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names)
                SubjectKeyIdentifier(hash: publicKey)
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: Certificate.PublicKey(key.publicKey)).keyIdentifier)
            },
            issuerPrivateKey: Certificate.PrivateKey(key))
        return (try certificate.serializeAsPEM().pemString, serverKey.pemRepresentation)
    }
}
