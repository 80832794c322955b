import AppStoreServer
import Crypto
import Foundation
import MockAppStore
import Testing
import X509

/// Signed values made with a test CA built here (with Apple's OIDs), then forged one way each:
/// every forgery must fail with its own reason.
@Suite struct ForgedSignedDataTests {
    static let bundleId = "com.example.reconciler"
    static let appAppleId: Int64 = 1_234_567_890
    let authority: SigningCertificateAuthority
    let verifier: SignedDataVerifier
    let now = Int64(Date().timeIntervalSince1970 * 1000)

    init() throws {
        authority = try SigningCertificateAuthority()
        verifier = try SignedDataVerifier(
            configuration: .init(
                rootCertificates: [authority.root], bundleId: Self.bundleId, appAppleId: Self.appAppleId, environment: .production))
    }

    func notification(
        bundleId: String = bundleId, appAppleId: Int64? = appAppleId, environment: AppStoreEnvironment = .production,
        signedDate: Int64? = nil
    ) -> ResponseBodyV2DecodedPayload {
        ResponseBodyV2DecodedPayload(
            notificationType: .didRenew, notificationUUID: UUID().uuidString, signedDate: signedDate ?? now,
            data: NotificationData(appAppleId: appAppleId, bundleId: bundleId, environment: environment))
    }

    func reason(_ token: String) async -> VerificationError.Reason? {
        do {
            _ = try await verifier.verifyAndDecodeNotification(token)
            return nil
        } catch let error as VerificationError {
            return error.reason
        } catch {
            Issue.record("unexpected error \(error)")
            return nil
        }
    }

    @Test func aGenuineNotificationVerifies() async throws {
        let payload = notification()
        let decoded = try await verifier.verifyAndDecodeNotification(try authority.signer.sign(payload))
        #expect(decoded == payload)
    }

    @Test func aTamperedPayloadIsRejected() async throws {
        let token = try authority.signer.sign(notification())
        var parts = token.split(separator: ".").map(String.init)
        let other = try authority.signer.sign(notification()).split(separator: ".").map(String.init)
        parts[1] = other[1]
        #expect(await reason(parts.joined(separator: ".")) == .invalidSignature)
    }

    @Test func aSignatureByAnotherKeyIsRejected() async throws {
        let impostor = JWSSigner(key: P256.Signing.PrivateKey(), chain: [authority.leaf, authority.intermediate, authority.root])
        #expect(await reason(try impostor.sign(notification())) == .invalidSignature)
    }

    @Test func aChainToAnUnknownRootIsRejected() async throws {
        let stranger = try SigningCertificateAuthority()
        #expect(await reason(try stranger.signer.sign(notification())) == .untrustedRoot)
        // The trusted root pasted into x5c[2] does not help a foreign intermediate.
        let pasted = JWSSigner(key: stranger.leafKey, chain: [stranger.leaf, stranger.intermediate, authority.root])
        #expect(await reason(try pasted.sign(notification())) == .invalidChain)
    }

    @Test func missingAppleOIDsAreRejected() async throws {
        for (options, expected) in [
            (SigningCertificateAuthority.Options(includeLeafOID: false), VerificationError.Reason.missingLeafOID),
            (SigningCertificateAuthority.Options(includeIntermediateOID: false), .missingIntermediateOID),
        ] {
            let forged = try SigningCertificateAuthority(options: options)
            let verifier = try SignedDataVerifier(
                configuration: .init(
                    rootCertificates: [forged.root], bundleId: Self.bundleId, appAppleId: Self.appAppleId, environment: .production))
            let error = await #expect(throws: VerificationError.self) {
                _ = try await verifier.verifyAndDecodeNotification(try forged.signer.sign(notification()))
            }
            #expect(error?.reason == expected)
        }
    }

    @Test func algorithmsOtherThanES256AreRejected() async throws {
        let x5c = authority.signer.x5c.map { "\"\($0)\"" }.joined(separator: ",")
        for alg in ["none", "HS256", "ES384", "RS256"] {
            let signer = JWSSigner(key: authority.leafKey, rawHeaderJSON: "{\"alg\":\"\(alg)\",\"x5c\":[\(x5c)]}")
            #expect(await reason(try signer.sign(notification())) == .unsupportedAlgorithm, "\(alg)")
        }
        // "alg": "none" with an empty signature, the classic.
        let unsigned = try authority.signer.sign(notification()).split(separator: ".")
        let header = Base64URL.encode(Array("{\"alg\":\"none\",\"x5c\":[\(x5c)]}".utf8))
        #expect(await reason("\(header).\(unsigned[1]).") == .unsupportedAlgorithm)
    }

    @Test func aLeafExpiredAtSignedDateIsRejected() async throws {
        let expired = try SigningCertificateAuthority(
            options: .init(
                leafNotValidBefore: Date(timeIntervalSinceNow: -30 * 86400), leafNotValidAfter: Date(timeIntervalSinceNow: -86400)))
        let verifier = try SignedDataVerifier(
            configuration: .init(
                rootCertificates: [expired.root], bundleId: Self.bundleId, appAppleId: Self.appAppleId, environment: .production))
        let error = await #expect(throws: VerificationError.self) {
            _ = try await verifier.verifyAndDecodeNotification(try expired.signer.sign(notification()))
        }
        #expect(error?.reason == .certificateNotValidAtSignedDate)
        // Signed while the leaf was valid: genuine, even though the leaf has expired since.
        let old = notification(signedDate: now - 2 * 86_400_000)
        _ = try await verifier.verifyAndDecodeNotification(try expired.signer.sign(old))
        // The cache must not bypass the time check.
        await #expect(throws: VerificationError.self) {
            _ = try await verifier.verifyAndDecodeNotification(try expired.signer.sign(notification()))
        }
    }

    @Test func theAppAndEnvironmentMustBeTheConfiguredOnes() async throws {
        #expect(await reason(try authority.signer.sign(notification(bundleId: "com.other.app"))) == .invalidBundleId)
        #expect(await reason(try authority.signer.sign(notification(appAppleId: 42))) == .invalidAppAppleId)
        #expect(await reason(try authority.signer.sign(notification(appAppleId: nil))) == .invalidAppAppleId)
        #expect(await reason(try authority.signer.sign(notification(environment: .sandbox))) == .invalidEnvironment)
    }

    @Test func malformedInputIsRejected() async throws {
        for garbage in ["", "not a jws", "a.b", "a.b.c.d", "a.b.c.", ".b.c", "!!!.???.***", "eyJhbGciOiJFUzI1NiJ9..sig"] {
            #expect(await reason(garbage) == .malformedJWS, "\(garbage)")
        }
        let header = try authority.signer.sign(notification()).split(separator: ".")[0]
        // A valid header with a payload that is not JSON is caught by the signature first.
        #expect(await reason("\(header).bm90IGpzb24.AAAA") == .invalidSignature)
        // A genuinely signed payload that is not a notification.
        let notJSONObject = try authority.signer.sign(payloadJSON: Data("[1,2,3]".utf8))
        #expect(await reason(notJSONObject) == .invalidPayload)
        let noSignedDate = try authority.signer.sign(payloadJSON: Data("{\"notificationType\":\"TEST\"}".utf8))
        #expect(await reason(noSignedDate) == .missingSignedDate)
    }

    @Test func unknownEnumValuesDecodeAndKeepTheirRawString() async throws {
        let json = """
            {"notificationType":"SOMETHING_NEW","subtype":"ALSO_NEW","notificationUUID":"\(UUID().uuidString)",
             "signedDate":\(now),"data":{"bundleId":"\(Self.bundleId)","appAppleId":\(Self.appAppleId),
             "environment":"Production","status":9}}
            """
        let decoded = try await verifier.verifyAndDecodeNotification(try authority.signer.sign(payloadJSON: Data(json.utf8)))
        #expect(decoded.notificationType?.rawValue == "SOMETHING_NEW")
        #expect(decoded.notificationType?.isKnown == false)
        #expect(decoded.subtype?.rawValue == "ALSO_NEW")
        #expect(decoded.data?.status?.rawValue == 9)
    }

    /// A notification verified before its app is known (a webhook serving several apps) must still
    /// name itself and its kind, whichever app it is for; the app's verifier then accepts only its own.
    @Test func aNotificationOfAnyAppNamesItselfAndIsAcceptedOnlyByItsApp() async throws {
        func reason(_ payload: ResponseBodyV2DecodedPayload) async throws -> VerificationError.Reason? {
            do {
                _ = try await verifier.verifyNotificationOfAnyApp(try authority.signer.sign(payload))
                return nil
            } catch let error as VerificationError {
                return error.reason
            }
        }
        var withoutUUID = notification(bundleId: "com.other.app")
        withoutUUID.notificationUUID = nil
        #expect(try await reason(withoutUUID) == .invalidPayload)
        var withoutType = notification(bundleId: "com.other.app")
        withoutType.notificationType = nil
        #expect(try await reason(withoutType) == .invalidPayload)
        #expect(try await reason(notification(bundleId: "com.other.app")) == nil)

        let other = try await verifier.verifyNotificationOfAnyApp(try authority.signer.sign(notification(bundleId: "com.other.app")))
        #expect(other.bundleId == "com.other.app")
        let refused = #expect(throws: VerificationError.self) { _ = try verifier.accept(other) }
        #expect(refused?.reason == .invalidBundleId)
        let otherVerifier = try verifier.verifier(for: AppTarget(bundleId: "com.other.app", environment: .production, appAppleId: Self.appAppleId))
        #expect(try otherVerifier.accept(other).payload == other.payload)
        let own = notification()
        let accepted = try verifier.accept(try await verifier.verifyNotificationOfAnyApp(try authority.signer.sign(own)))
        #expect(accepted.payload == own)
    }

    @Test func productionRequiresTheAppAppleId() {
        #expect(throws: SignedDataVerifier.ConfigurationError.self) {
            _ = try SignedDataVerifier(configuration: .init(bundleId: Self.bundleId, environment: .production))
        }
    }
}
