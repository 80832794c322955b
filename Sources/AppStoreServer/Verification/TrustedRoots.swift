import Foundation
import SwiftASN1
public import X509

/// Root certificates that signed data must chain to.
public enum TrustedRoots {
    /// Apple Root CA - G3, bundled in the binary (DER, base64).
    ///
    /// SHA-256 `63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79`,
    /// valid 2014-04-30 to 2039-04-30; a test checks the fingerprint.
    public static let appleRootCAG3DER: [UInt8] = Array(Data(base64Encoded: appleRootCAG3Base64)!)

    private static let appleRootCAG3Base64 =
        "MIICQzCCAcmgAwIBAgIILcX8iNLFS5UwCgYIKoZIzj0EAwMwZzEbMBkGA1UEAwwSQXBwbGUgUm9vdCBDQSAtIEczMSYwJAYDVQQLDB1BcHBsZSBDZXJ0aWZpY2F0aW9uIEF1dGhvcml0eTETMBEGA1UECgwKQXBwbGUgSW5jLjELMAkGA1UEBhMCVVMwHhcNMTQwNDMwMTgxOTA2WhcNMzkwNDMwMTgxOTA2WjBnMRswGQYDVQQDDBJBcHBsZSBSb290IENBIC0gRzMxJjAkBgNVBAsMHUFwcGxlIENlcnRpZmljYXRpb24gQXV0aG9yaXR5MRMwEQYDVQQKDApBcHBsZSBJbmMuMQswCQYDVQQGEwJVUzB2MBAGByqGSM49AgEGBSuBBAAiA2IABJjpLz1AcqTtkyJygRMc3RCV8cWjTnHcFBbZDuWmBSp3ZHtfTjjTuxxEtX/1H7YyYl3J6YRbTzBPEVoA/VhYDKX1DyxNB0cTddqXl5dvMVztK517IDvYuVTZXpmkOlEKMaNCMEAwHQYDVR0OBBYEFLuw3qFYM4iapIqZ3r6966/ayySrMA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0PAQH/BAQDAgEGMAoGCCqGSM49BAMDA2gAMGUCMQCD6cHEFl4aXTQY2e3v9GwOAEZLuN+yRhHFD/3meoyhpmvOwgPUnPWTxnS4at+qIxUCMG1mihDK1A3UT82NQz60imOlM27jbdoXt2QfyFMm+YhidDkLF1vLUagM6BgD56KyKA=="

    /// Apple Root CA - G3 as a certificate.
    public static var appleRootCAG3: Certificate {
        // The bytes are a compile-time constant checked by a test, so parsing cannot fail.
        try! Certificate(derEncoded: appleRootCAG3DER)
    }

    /// Loads root certificates from files: PEM (one or more certificates) or DER. A directory
    /// contributes every `.pem`, `.cer`, `.crt` and `.der` file inside it.
    public static func load(paths: [String]) throws -> [Certificate] {
        var certificates: [Certificate] = []
        for path in paths where !path.isEmpty {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw TrustedRootsError("root certificate file \(path) does not exist")
            }
            if isDirectory.boolValue {
                let names = try FileManager.default.contentsOfDirectory(atPath: path).sorted()
                let files = names.filter { [".pem", ".cer", ".crt", ".der"].contains(where: $0.lowercased().hasSuffix) }
                certificates += try load(paths: files.map { "\(path)/\($0)" })
                continue
            }
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            certificates += try parse(bytes, source: path)
        }
        guard !certificates.isEmpty else { throw TrustedRootsError("no root certificate found in \(paths)") }
        return certificates
    }

    /// Parses PEM (any number of CERTIFICATE blocks) or a single DER certificate.
    public static func parse(_ bytes: [UInt8], source: String = "input") throws -> [Certificate] {
        let text = String(decoding: bytes, as: UTF8.self)
        if text.contains("-----BEGIN CERTIFICATE-----") {
            var result: [Certificate] = []
            var remainder = Substring(text)
            while let begin = remainder.range(of: "-----BEGIN CERTIFICATE-----"),
                let end = remainder.range(of: "-----END CERTIFICATE-----", range: begin.upperBound..<remainder.endIndex)
            {
                let block = String(remainder[begin.lowerBound..<end.upperBound])
                do {
                    result.append(try Certificate(pemEncoded: block))
                } catch {
                    throw TrustedRootsError("\(source): a PEM certificate does not parse: \(error)")
                }
                remainder = remainder[end.upperBound...]
            }
            return result
        }
        do {
            return [try Certificate(derEncoded: bytes)]
        } catch {
            throw TrustedRootsError("\(source) is neither a PEM nor a DER certificate: \(error)")
        }
    }
}

/// A root certificate file that cannot be used.
public struct TrustedRootsError: Error, CustomStringConvertible, Sendable {
    public var description: String
    init(_ description: String) { self.description = description }
}
