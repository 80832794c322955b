import Foundation
import ReconcilerShared
import Testing

@testable import Reconciler

/// The report's text says what changed in words an on-call engineer can act on.
@Suite struct RunReportTests {
    /// Every field `changedFields` can name shows its value before and after, never a placeholder.
    @Test func everyChangedFieldShowsItsValues() {
        let before = PurchaseState(
            originalTransactionId: "1000", latestTransactionId: "1000", productId: "monthly", environment: "Production",
            purchaseDate: 1_795_000_000_000, expiresDate: 1_795_100_000_000, autoRenewStatus: 1, lastSignedDate: 1_795_000_000_000,
            status: 1, entitled: true)
        let after = PurchaseState(
            originalTransactionId: "1000", latestTransactionId: "1001", productId: "yearly", environment: "Sandbox",
            purchaseDate: 1_795_100_000_000, expiresDate: 1_795_200_000_000, revocationDate: 1_795_150_000_000, autoRenewStatus: 0,
            lastSignedDate: 1_795_150_000_000, appAccountToken: "7e3fb20b-4cdb-47cc-936d-99d65f608138", status: 5, entitled: false,
            appTransactionId: "705678901234567890", revocationType: "REFUND_PRORATED", revocationPercentage: 50_000, offerType: 4,
            offerIdentifier: "com.example.winback.premium")
        let fields = after.changedFields(from: before)
        #expect(fields.count == 16)
        for field in fields {
            #expect(RunReport.value(field, before) != "∅", "\(field)")
            #expect(RunReport.value(field, after) != RunReport.value(field, before), "\(field)")
        }
        #expect(RunReport.value("entitled", after) == "false")
        #expect(RunReport.value("status", after) == "5")
        #expect(RunReport.value("appAccountToken", before) == "null")
        #expect(RunReport.value("revocationPercentage", after) == "50000")
        #expect(RunReport.value("offerIdentifier", after) == "com.example.winback.premium")
    }

    /// The export's new fields are always in a state's JSON, `null` when unknown, and a state
    /// written before they existed reads them as unknown.
    @Test func theNewExportFieldsAreAlwaysPresent() throws {
        let state = PurchaseState(originalTransactionId: "1000", revocationType: "REFUND_FULL")
        let line = try state.jsonLine()
        for key in ["appTransactionId", "revocationType", "revocationPercentage", "offerType", "offerIdentifier"] {
            #expect(line.contains("\"\(key)\":"), "\(key)")
        }
        #expect(line.contains("\"offerIdentifier\":null"))
        let old = try JSONDecoder().decode(PurchaseState.self, from: Data(#"{"originalTransactionId":"1000","entitled":true}"#.utf8))
        #expect(old.appTransactionId == nil && old.revocationPercentage == nil && old.entitled == true)
    }
}
