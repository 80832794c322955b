import AppStoreServer
import Reconciler
import ReconcilerDomain
import Testing

/// `set-app-account-token` before and after Apple: what it refuses without asking, and Apple's
/// answers as the one exit table classes them, each message naming Apple's code.
@Suite struct AppAccountTokenSetterTests {
    @Test func malformedInputIsRefusedBeforeAnyRequest() throws {
        for (id, token, why) in [
            ("2000000123456789", "not-a-uuid", "is not a UUID"), ("2000000123456789", "", "is not a UUID"),
            ("20000001x", "7e3fb20b-4cdb-47cc-936d-99d65f608138", "is not a transaction ID"),
        ] {
            let error = #expect(throws: ReconcilerError.self) { try AppAccountTokenSetter.parse(originalTransactionId: id, appAccountToken: token) }
            #expect(error?.exitCode == 1 && error?.description.contains(why) == true, "\(String(describing: error))")
        }
        let parsed = try AppAccountTokenSetter.parse(
            originalTransactionId: " 2000000123456789", appAccountToken: "7E3FB20B-4CDB-47CC-936D-99D65F608138")
        #expect(parsed.id == "2000000123456789" && parsed.token == "7e3fb20b-4cdb-47cc-936d-99d65f608138")
    }

    @Test(arguments: [
        (400, 4_000_006, "InvalidTransactionIdError"), (400, 4_000_183, "InvalidAppAccountTokenUUIDError"),
        (400, 4_000_185, "FamilyTransactionNotSupportedError"), (400, 4_000_187, "TransactionIdIsNotOriginalTransactionIdError"),
        (400, 4_000_048, "AppTransactionIdNotSupportedError"), (404, 4_040_005, "OriginalTransactionIdNotFoundError"),
    ])
    func applesRefusalsExitOneNamingTheCode(_ status: Int, _ code: Int64, _ name: String) {
        let details = AppStoreServerAPIError.Details(
            endpoint: .setAppAccountToken, httpStatusCode: status, errorCode: APIErrorCode(rawValue: code), attempts: 1)
        let error = AppAccountTokenSetter.failure(status == 404 ? .notFound(details) : .badRequest(details), originalTransactionId: "1000")
        #expect(error.exitCode == 1)
        #expect(error.description.contains("\(code) \(name)"), "\(error.description)")
    }

    @Test func rateLimitsAndServerErrorsExitTwo() {
        for error in [
            AppStoreServerAPIError.rateLimited(.init(endpoint: .setAppAccountToken, httpStatusCode: 429, errorCode: .rateLimitExceeded, attempts: 5)),
            .serverError(.init(endpoint: .setAppAccountToken, httpStatusCode: 500, errorCode: .generalInternal, attempts: 5)),
            .notFound(.init(endpoint: .setAppAccountToken, httpStatusCode: 404, errorCode: .originalTransactionIdNotFoundRetryable, attempts: 5)),
        ] {
            let failure = AppAccountTokenSetter.failure(error, originalTransactionId: "1000")
            #expect(failure.exitCode == 2, "\(failure.description)")
            #expect(failure.description.contains("run the same command again"))
        }
    }
}
