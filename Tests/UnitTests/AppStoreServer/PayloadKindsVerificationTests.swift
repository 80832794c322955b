import AppStoreServer
import Foundation
import MockAppStore
import Testing

/// Notifications without `data` verify against the app and environment they carry (`summary`,
/// else `externalPurchaseToken`, else `appData`, as in Apple's libraries), and each forged
/// variant fails with its reason. Also: every field Apple documents decodes and re-encodes.
@Suite struct PayloadKindsVerificationTests {
    static let bundleId = "com.example.reconciler"
    static let appAppleId: Int64 = 1_234_567_890
    let authority: SigningCertificateAuthority
    let production: SignedDataVerifier
    let sandbox: SignedDataVerifier
    let now = Int64(Date().timeIntervalSince1970 * 1000)

    init() throws {
        authority = try SigningCertificateAuthority()
        production = try SignedDataVerifier(
            configuration: .init(
                rootCertificates: [authority.root], bundleId: Self.bundleId, appAppleId: Self.appAppleId, environment: .production))
        sandbox = try SignedDataVerifier(
            configuration: .init(
                rootCertificates: [authority.root], bundleId: Self.bundleId, environment: .sandbox))
    }

    /// The app a payload names, and the environment it belongs to.
    struct Claim {
        var bundleId = PayloadKindsVerificationTests.bundleId
        var appAppleId: Int64? = PayloadKindsVerificationTests.appAppleId
        var environment: AppStoreEnvironment = .production
    }

    enum Kind: String, CaseIterable { case summary, externalPurchaseToken, appData }

    func appTransaction(_ claim: Claim) -> AppTransaction {
        AppTransaction(
            receiptType: claim.environment, appAppleId: claim.appAppleId, bundleId: claim.bundleId,
            receiptCreationDate: now, appTransactionId: "704289572311236578")
    }

    func notification(_ kind: Kind, _ claim: Claim = Claim(), signer: JWSSigner? = nil) throws -> String {
        var payload = ResponseBodyV2DecodedPayload(notificationUUID: UUID().uuidString, signedDate: now)
        switch kind {
        case .summary:
            payload.notificationType = .renewalExtension
            payload.subtype = .summary
            payload.summary = Summary(
                environment: claim.environment, appAppleId: claim.appAppleId, bundleId: claim.bundleId,
                productId: "p", requestIdentifier: UUID().uuidString, storefrontCountryCodes: ["USA"],
                succeededCount: 3, failedCount: 1)
        case .externalPurchaseToken:
            payload.notificationType = .externalPurchaseToken
            payload.subtype = .created
            let prefix = claim.environment == .sandbox ? "SANDBOX_" : ""
            payload.externalPurchaseToken = ExternalPurchaseToken(
                externalPurchaseId: prefix + UUID().uuidString, tokenCreationDate: now, appAppleId: claim.appAppleId,
                bundleId: claim.bundleId, tokenType: "ACQUISITION", tokenExpirationDate: now + 86_400_000)
        case .appData:
            payload.notificationType = .rescindConsent
            payload.appData = AppData(
                appAppleId: claim.appAppleId, bundleId: claim.bundleId, environment: claim.environment,
                signedAppTransactionInfo: try authority.signer.sign(appTransaction(claim)))
        }
        return try (signer ?? authority.signer).sign(payload)
    }

    func reason(_ verifier: SignedDataVerifier, _ token: String) async -> VerificationError.Reason? {
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

    @Test(arguments: Kind.allCases)
    func eachKindVerifiesInItsEnvironment(_ kind: Kind) async throws {
        let decoded = try await production.verifyAndDecodeNotification(try notification(kind))
        #expect(decoded.data == nil)
        #expect(decoded.appIdentity.bundleId == Self.bundleId && decoded.appIdentity.environment == .production)
        // The sandbox: Apple leaves out appAppleId, and the token says sandbox by its id's prefix.
        let sandboxClaim = Claim(appAppleId: kind == .appData ? nil : Self.appAppleId, environment: .sandbox)
        let inSandbox = try await sandbox.verifyAndDecodeNotification(try notification(kind, sandboxClaim))
        #expect(inSandbox.appIdentity.environment == .sandbox)
        // A sandbox payload naming this app is still not a production one.
        #expect(await reason(production, try notification(kind, Claim(environment: .sandbox))) == .invalidEnvironment)
    }

    @Test(arguments: Kind.allCases)
    func forgedVariantsOfEachKindFail(_ kind: Kind) async throws {
        #expect(await reason(production, try notification(kind, Claim(bundleId: "com.other.app"))) == .invalidBundleId)
        #expect(await reason(production, try notification(kind, Claim(appAppleId: 42))) == .invalidAppAppleId)
        #expect(await reason(production, try notification(kind, Claim(appAppleId: nil))) == .invalidAppAppleId)
        #expect(await reason(sandbox, try notification(kind)) == .invalidEnvironment)
        let stranger = try SigningCertificateAuthority()
        #expect(await reason(production, try notification(kind, signer: stranger.signer)) == .untrustedRoot)
        // A genuine payload with its app identity swapped after signing.
        var parts = try notification(kind).split(separator: ".").map(String.init)
        parts[1] = try notification(kind, Claim(bundleId: "com.other.app")).split(separator: ".").map(String.init)[1]
        #expect(await reason(production, parts.joined(separator: ".")) == .invalidSignature)
    }

    @Test func aNotificationNamingNoAppIsRejected() async throws {
        let payload = ResponseBodyV2DecodedPayload(notificationType: .rescindConsent, notificationUUID: UUID().uuidString, signedDate: now)
        #expect(await reason(production, try authority.signer.sign(payload)) == .invalidBundleId)
    }

    @Test func theNestedAppTransactionVerifiesAgainstTheApp() async throws {
        let genuine = try await production.verifyAndDecodeAppTransaction(try authority.signer.sign(appTransaction(Claim())))
        #expect(genuine.appTransactionId == "704289572311236578")
        _ = try await sandbox.verifyAndDecodeAppTransaction(try authority.signer.sign(appTransaction(Claim(appAppleId: nil, environment: .sandbox))))
        for (claim, expected) in [
            (Claim(bundleId: "com.other.app"), VerificationError.Reason.invalidBundleId),
            (Claim(appAppleId: 42), .invalidAppAppleId), (Claim(environment: .sandbox), .invalidEnvironment),
        ] {
            let error = await #expect(throws: VerificationError.self) {
                _ = try await production.verifyAndDecodeAppTransaction(try authority.signer.sign(appTransaction(claim)))
            }
            #expect(error?.reason == expected)
        }
        let stranger = try SigningCertificateAuthority()
        let foreign = await #expect(throws: VerificationError.self) {
            _ = try await production.verifyAndDecodeAppTransaction(try stranger.signer.sign(appTransaction(Claim())))
        }
        #expect(foreign?.reason == .untrustedRoot)
    }

    /// Every field of APPSTORE_API.md section 6 decodes from Apple's JSON, unknown enum values and
    /// `advancedCommerceInfo` kept as sent.
    @Test func everyDocumentedFieldDecodesAndReencodes() async throws {
        let transactionJSON = """
            {"originalTransactionId":"1","transactionId":"2","bundleId":"\(Self.bundleId)","environment":"Production",
             "signedDate":\(now),"appTransactionId":"704289572311236578","offerPeriod":"P1M","revocationType":"REFUND_PRORATED",
             "revocationPercentage":50000,"billingPlanType":"MONTHLY","previousOriginalTransactionId":"0",
             "commitmentInfo":{"billingPeriodNumber":2,"commitmentExpiresDate":1812447660000,"commitmentPrice":131880,"totalBillingPeriods":12},
             "advancedCommerceInfo":{"requestReferenceId":"r-1","items":[{"SKU":"a","price":1990,"details":null}],"taxRate":0.19,"ok":true}}
            """
        let transaction = try await production.verifyAndDecodeTransaction(try authority.signer.sign(payloadJSON: Data(transactionJSON.utf8)))
        #expect(transaction.appTransactionId == "704289572311236578" && transaction.offerPeriod == "P1M")
        #expect(transaction.revocationType == .refundProrated && transaction.revocationPercentage == 50_000)
        #expect(transaction.billingPlanType == .monthly && transaction.previousOriginalTransactionId == "0")
        #expect(
            transaction.commitmentInfo
                == TransactionCommitmentInfo(
                    billingPeriodNumber: 2, commitmentExpiresDate: 1_812_447_660_000,
                    commitmentPrice: 131_880, totalBillingPeriods: 12))
        #expect(transaction.advancedCommerceInfo?["requestReferenceId"] == .string("r-1"))
        #expect(
            transaction.advancedCommerceInfo?.jsonString
                == #"{"items":[{"SKU":"a","details":null,"price":1990}],"ok":true,"requestReferenceId":"r-1","taxRate":0.19}"#)
        let reencoded = try JSONDecoder().decode(JWSTransactionDecodedPayload.self, from: try JSONEncoder().encode(transaction))
        #expect(reencoded == transaction)

        let renewalJSON = """
            {"originalTransactionId":"1","environment":"Production","signedDate":\(now),"renewalPrice":9990,"currency":"EUR",
             "eligibleWinBackOfferIds":["w1","w2"],"appAccountToken":"7e3fb20b-4cdb-47cc-936d-99d65f608138",
             "appTransactionId":"704289572311236578","offerPeriod":"P1W","renewalBillingPlanType":"SOMETHING_NEW",
             "commitmentInfo":{"commitmentAutoRenewProductId":"p.annual","commitmentAutoRenewStatus":0,
                               "commitmentRenewalBillingPlanType":"BILLED_UPFRONT","commitmentRenewalDate":1812447660000,
                               "commitmentRenewalPrice":10990},
             "advancedCommerceInfo":{"period":"P1M"}}
            """
        let renewal = try await production.verifyAndDecodeRenewalInfo(try authority.signer.sign(payloadJSON: Data(renewalJSON.utf8)))
        #expect(renewal.renewalPrice == 9990 && renewal.currency == "EUR" && renewal.eligibleWinBackOfferIds == ["w1", "w2"])
        #expect(renewal.appAccountToken == "7e3fb20b-4cdb-47cc-936d-99d65f608138" && renewal.appTransactionId == "704289572311236578")
        #expect(renewal.offerPeriod == "P1W")
        #expect(renewal.renewalBillingPlanType?.rawValue == "SOMETHING_NEW" && renewal.renewalBillingPlanType?.isKnown == false)
        #expect(renewal.commitmentInfo?.commitmentAutoRenewStatus == .off)
        #expect(renewal.commitmentInfo?.commitmentRenewalBillingPlanType == .billedUpfront)
        #expect(renewal.commitmentInfo?.commitmentRenewalPrice == 10_990)
        #expect(renewal.advancedCommerceInfo == .object(["period": .string("P1M")]))

        let token = try JSONDecoder().decode(
            ExternalPurchaseToken.self,
            from: Data(
                """
                {"externalPurchaseId":"SANDBOX_1","tokenCreationDate":1,"appAppleId":2,"bundleId":"b","tokenType":"SERVICES","tokenExpirationDate":3}
                """.utf8))
        #expect(token.tokenType == "SERVICES" && token.tokenExpirationDate == 3)
    }
}
