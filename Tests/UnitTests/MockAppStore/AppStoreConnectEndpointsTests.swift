import Foundation
import Testing

@testable import AppStoreServer
@testable import MockAppStore

/// The mock's App Store Connect endpoints keep Apple's token rules: the App Store Connect key's
/// token without `bid` passes; an In-App Purchase style token (with `bid`) and one of another key
/// are refused, each with its reason.
@Suite struct AppStoreConnectEndpointsTests {
    static let issuer = "57246542-96fe-1a63-e053-0824d011072a"

    @Test func onlyAnAppStoreConnectTokenWithoutABundleIdPasses() async throws {
        try await MockAppStore.withRunning(.init(scenario: .init(seed: 3, customers: 0))) { mock, baseURL in
            let client = AppStoreConnectClient(
                configuration: .init(baseURL: baseURL, privateKey: mock.appStoreConnectKey, keyId: "MOCKASC001", issuerId: Self.issuer))
            #expect(mock.checkConnectToken("Bearer " + (try client.token())) == nil)
            let withBundleId = APIAuthenticationTokens(
                configuration: .init(privateKey: mock.appStoreConnectKey, keyId: "MOCKASC001", issuerId: Self.issuer, bundleId: "com.example"))
            #expect(mock.checkConnectToken("Bearer " + (try withBundleId.token())) == "an App Store Connect token names no app (bid)")
            let inAppPurchaseKey = AppStoreConnectClient(
                configuration: .init(baseURL: baseURL, privateKey: mock.apiKey, keyId: "MOCKASC001", issuerId: Self.issuer))
            #expect(mock.checkConnectToken("Bearer " + (try inAppPurchaseKey.token())) == "bad signature")
            // Over HTTP: App Store Connect's error body.
            await #expect(throws: AppStoreConnectClient.Failure.self) { try await inAppPurchaseKey.app(bundleId: "com.example") }
            do {
                _ = try await inAppPurchaseKey.app(id: "1")
            } catch let failure as AppStoreConnectClient.Failure {
                #expect(failure.httpStatusCode == 401)
                #expect(failure.errors.first?.code == "NOT_AUTHORIZED")
            }
        }
    }
}
