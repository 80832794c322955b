import AppStoreServer
import Reconciler
import ReconcilerDomain
import Testing

/// The exit-code table of docs/reference.md, from every error a command can end with: each code of
/// ``ReconcilerError`` keeps its code until the one mapping (``ReconcilerError/init(endingCommandWith:)``),
/// so an interrupted or partial command exits 2 wherever it stops, a configuration error 1.
@Suite struct ExitCodeTableTests {
    /// Every code and how a command that ends with it exits. A new code needs its row here.
    static let table: [String: Int32] = [
        "invalidInput": 1, "unreadable": 1, "invalidYAML": 1, "unknownKey": 1, "missingKey": 1, "invalidValue": 1, "duplicateApp": 1,
        "noSuchApp": 1, "appMismatch": 1, "untrustedChains": 1, "textfile": 1, "invalidDatabaseURL": 1, "databaseRefused": 1,
        "databaseUnavailable": 2, "schemaNotCurrent": 1, "unknownStoredValue": 1, "missingApp": 1, "lockOrder": 2, "missingRow": 2,
        "payloadUnavailable": 1, "leaseHeld": 1, "leaseLost": 2, "checkpointConflict": 2, "checkpointAlreadyCommitted": 2,
        "invalidWindow": 1, "cannotJoin": 1, "feedPositionPruned": 1, "appNotConfigured": 1, "routingUnavailable": 2, "stopping": 2,
        "overloaded": 2, "selector": 1, "malformedSelector": 1, "unknownOrderId": 1, "unknownTransactionId": 1,
        "unknownAppAccountToken": 1, "appleRefused": 1, "window": 1, "notGenuine": 4, "invalidAnswer": 1,
        "unknownConsumptionRequest": 1, "notRecovered": 2, "interrupted": 2, "needsAttention": 4, "rejected": 3,
        "storedPayloadNotGenuine": 3, "consumptionRequestSettled": 1, "answerNotRecorded": 4,
    ]

    @Test func everyCodeEndsACommandWithItsExitCode() throws {
        let codes = ReconcilerError.Code.allCases
        #expect(Set(codes.map(\.description)) == Set(Self.table.keys), "the table and the codes differ")
        for code in codes {
            let ending = try #require(ReconcilerError(endingCommandWith: ReconcilerError(code, "x")))
            #expect(ending.code == code, "\(code) keeps its code to the end")
            #expect(ending.exitCode == Self.table[code.description], "\(code)")
        }
    }

    /// Errors that are not the reconciler's own are classed in the same place.
    @Test func applesErrorsASignatureAndACancellationAreClassedOnce() throws {
        func exitCode(_ error: any Error) throws -> Int32 { try #require(ReconcilerError(endingCommandWith: error)).exitCode }
        #expect(try exitCode(AppStoreServerAPIError.unauthorized(.init(endpoint: .getNotificationHistory, attempts: 1))) == 1)
        #expect(try exitCode(AppStoreServerAPIError.serverError(.init(endpoint: .getNotificationHistory, httpStatusCode: 503, attempts: 3))) == 2)
        #expect(try exitCode(VerificationError(.untrustedRoot, "x")) == 3)
        #expect(try exitCode(CancellationError()) == 2)
        #expect(ReconcilerError(endingCommandWith: UsageError()) == nil, "usage errors stay ArgumentParser's")
    }

    struct UsageError: Error {}
}
