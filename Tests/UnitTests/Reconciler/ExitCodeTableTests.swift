import AppStoreServer
import Reconciler
import ReconcilerDomain
import Testing

/// The exit-code table of docs/reference.md and the webhook's answers, from every error a command or the
/// webhook can end with: each code of ``ReconcilerError`` keeps its code until one of the two
/// mappings (``ReconcilerError/init(endingCommandWith:)``, ``WebhookAnswer/init(failure:)``), so an
/// interrupted or partial command exits 2 wherever it stops, a configuration error 1, and the
/// webhook answers 503 wherever Apple should deliver the notification again.
@Suite struct ExitCodeTableTests {
    /// How a command that ends with a code exits, and how the webhook answers a notification it did
    /// not store for it.
    struct Row: Equatable, CustomStringConvertible {
        var exit: Int32
        var http: Int
        var webhook: String

        init(_ exit: Int32, _ http: Int = 503, _ webhook: String = "STORE_UNAVAILABLE") {
            (self.exit, self.http, self.webhook) = (exit, http, webhook)
        }

        var description: String { "exit \(exit), HTTP \(http) \(webhook)" }
    }

    /// Every code: its exit code, its HTTP status and the webhook's `error`. A new code needs its row here.
    static let table: [String: Row] = [
        "invalidInput": Row(1), "unreadable": Row(1), "invalidYAML": Row(1), "unknownKey": Row(1), "missingKey": Row(1),
        "invalidValue": Row(1), "duplicateApp": Row(1), "noSuchApp": Row(1), "appMismatch": Row(1), "untrustedChains": Row(1),
        "textfile": Row(1), "invalidDatabaseURL": Row(1), "databaseRefused": Row(1), "databaseUnavailable": Row(2),
        "schemaNotCurrent": Row(1), "unknownStoredValue": Row(1), "missingApp": Row(1), "lockOrder": Row(2), "missingRow": Row(2),
        "payloadUnavailable": Row(1), "leaseHeld": Row(1), "leaseLost": Row(2), "checkpointConflict": Row(2),
        "checkpointAlreadyCommitted": Row(2), "invalidWindow": Row(1), "cannotJoin": Row(1), "feedPositionPruned": Row(1),
        "appNotConfigured": Row(1, 503, "APP_NOT_CONFIGURED"), "routingUnavailable": Row(2), "stopping": Row(2, 503, "STOPPING"),
        "overloaded": Row(2, 503, "OVERLOADED"), "selector": Row(1), "malformedSelector": Row(1), "unknownOrderId": Row(1),
        "unknownTransactionId": Row(1), "unknownAppAccountToken": Row(1), "appleRefused": Row(1), "window": Row(1), "notGenuine": Row(4),
        "invalidAnswer": Row(1), "unknownConsumptionRequest": Row(1), "notRecovered": Row(2), "interrupted": Row(2),
        "needsAttention": Row(4), "rejected": Row(3), "storedPayloadNotGenuine": Row(3), "consumptionRequestSettled": Row(1),
        "answerNotRecorded": Row(4), "credentialsRefused": Row(1), "bodyTooLarge": Row(1, 413, "BODY_TOO_LARGE"),
        "malformedBody": Row(1, 400, "MALFORMED_BODY"), "notificationTooOld": Row(1, 400, "NOTIFICATION_TOO_OLD"),
        "unauthorized": Row(1, 401, "UNAUTHORIZED"), "invalidQuery": Row(1, 400, "INVALID_QUERY"),
        "unknownAppUserId": Row(1),
    ]

    @Test func everyCodeEndsACommandWithItsExitCodeAndAnswersTheWebhookWithItsStatus() throws {
        let codes = ReconcilerError.Code.allCases
        #expect(Set(codes.map(\.description)) == Set(Self.table.keys), "the table and the codes differ")
        for code in codes {
            let ending = try #require(ReconcilerError(endingCommandWith: ReconcilerError(code, "x")))
            #expect(ending.code == code, "\(code) keeps its code to the end")
            let answer = WebhookAnswer(failure: ReconcilerError(code, "x"))
            #expect(Row(ending.exitCode, answer.status, answer.error) == Self.table[code.description], "\(code)")
        }
    }

    /// Apple must deliver again whatever the webhook did not store for a reason that is no verdict
    /// on the notification (503), and each reason has its own code: an overloaded webhook is told
    /// from one that is stopping, and from a database that is away.
    @Test func everyNotStoredAnswerIsA503WithItsOwnCode() {
        let answers = [ReconcilerError.Code.overloaded, .stopping, .databaseUnavailable].map { WebhookAnswer(failure: ReconcilerError($0, "x")) }
        #expect(answers.allSatisfy { $0.status == 503 && !$0.refusesTheNotification })
        #expect(Set(answers.map(\.error)) == ["OVERLOADED", "STOPPING", "STORE_UNAVAILABLE"])
        // The store's own words stay in the log: the sender reads only that it was not stored.
        #expect(WebhookAnswer(failure: ReconcilerError(.databaseUnavailable, "db.internal:5432 refused")).detail.contains("db.internal") == false)
        #expect(WebhookAnswer(failure: ReconcilerError(.overloaded, "too many wait")).detail == "too many wait")
    }

    /// Errors that are not the reconciler's own are classed in the same place.
    @Test func applesErrorsASignatureAndACancellationAreClassedOnce() throws {
        func ending(_ error: any Error) throws -> ReconcilerError { try #require(ReconcilerError(endingCommandWith: error)) }
        let unauthorized = AppStoreServerAPIError.unauthorized(.init(endpoint: .getNotificationHistory, attempts: 1))
        #expect(try ending(unauthorized).exitCode == 1)
        #expect(try ending(unauthorized).code == .credentialsRefused)
        #expect(
            try ending(AppStoreServerAPIError.serverError(.init(endpoint: .getNotificationHistory, httpStatusCode: 503, attempts: 3))).exitCode == 2)
        #expect(try ending(VerificationError(.untrustedRoot, "x")).exitCode == 3)
        #expect(try ending(CancellationError()).exitCode == 2)
        #expect(ReconcilerError(endingCommandWith: UsageError()) == nil, "usage errors stay ArgumentParser's")

        let refused = WebhookAnswer(failure: VerificationError(.untrustedRoot, "the chain ends elsewhere"))
        #expect(refused.error == VerificationError.Reason.untrustedRoot.rawValue && refused.refusesTheNotification)
        #expect(WebhookAnswer(failure: UsageError()).status == 503, "an error of no verdict makes Apple deliver it again")
        #expect(WebhookAnswer(failure: CancellationError()).error == "STORE_UNAVAILABLE")
    }

    /// Apple's 401 is one rule: a configuration error (exit 1) that names where the key and the
    /// bundle ID were set, wherever it stops the work.
    @Test func applesUnauthorizedNamesTheSettingsToCheckOnce() throws {
        let unauthorized = AppStoreServerAPIError.unauthorized(.init(endpoint: .getNotificationHistory, httpStatusCode: 401, attempts: 1))
        #expect(unauthorized.refusesTheCredentials)
        #expect(!AppStoreServerAPIError.serverError(.init(endpoint: .getNotificationHistory, attempts: 1)).refusesTheCredentials)
        let origins = SettingOrigins(
            bundleId: .named("APP_STORE_BUNDLE_ID"), appAppleId: .named("APP_STORE_APP_APPLE_ID"),
            environment: .named("APP_STORE_ENVIRONMENT"), keyId: .named("APP_STORE_KEY_ID"), issuerId: .named("APP_STORE_ISSUER_ID"),
            privateKeyPath: .named("APP_STORE_PRIVATE_KEY_PATH"), rootCertificates: .named("APP_STORE_ROOT_CERTIFICATES"))
        let named = try #require(ReconcilerError.naming(origins, in: unauthorized) as? ReconcilerError)
        #expect(named.code == .credentialsRefused && named.exitCode == 1)
        #expect(named.description.hasPrefix(unauthorized.description + ": check "), "\(named)")
        #expect(named.description.contains("APP_STORE_KEY_ID") && named.description.contains("APP_STORE_BUNDLE_ID"), "\(named)")
        #expect(ReconcilerError(endingCommandWith: named)?.description == named.description, "named once, kept to the end")
    }

    struct UsageError: Error {}
}
