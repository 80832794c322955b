import AppStoreServer
import Foundation
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore
import Testing

@testable import Reconciler

/// The report's text says what changed in words an on-call engineer can act on.
@Suite struct RunReportTests {
    /// Every field `changedFields` can name shows its value before and after, never a placeholder.
    @Test func everyChangedFieldShowsItsValues() {
        let before = PurchaseState(
            originalTransactionId: "1000", latestTransactionId: "1000", productId: "monthly", environment: .production,
            purchaseDate: 1_795_000_000_000, expiresDate: 1_795_100_000_000, autoRenewStatus: 1, lastSignedDate: 1_795_000_000_000,
            status: 1, entitled: true)
        let after = PurchaseState(
            originalTransactionId: "1000", latestTransactionId: "1001", productId: "yearly", environment: .sandbox,
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

    /// A report of one of everything says it in the singular: "1 request", never "1 requests".
    @Test func oneOfAThingIsSingular() {
        var report = Self.report(changes: 1)
        report.pages = 1
        report.shardsTotal = 1
        report.transactionsFetched = 1
        report.api.requests = 1
        report.api.retries = 1
        report.api.transportErrors = 1
        let text = report.humanSummary()
        for singular in ["1 page ", "1 shard,", "1 transaction ", "1 request,", "1 retry,", "1 connection error", "1 purchase"] {
            #expect(text.contains(singular), "\(singular): \(text)")
        }
        let plurals = try! Regex(#"\b1 (pages|shards|transactions|requests|retries|connection errors|purchases)\b"#)
        #expect(text.firstMatch(of: plurals) == nil, "\(text)")
    }

    /// The line under a cut list names a command that shows the rest after the run: the feed's rows
    /// of a real run; a dry run's own report (its copies are gone), as `status` shows it.
    @Test func theHintUnderTheChangesNamesACommandThatWorksAfterTheRun() {
        let real = Self.report(changes: 25).humanSummary()
        #expect(real.contains("    … 15 more: `reconciler changes --run-id 7 --kind purchase`"), "\(real)")
        #expect(!real.contains("--report-json"), "\(real)")
        var dry = Self.report(changes: 25)
        dry.dryRun = true
        #expect(dry.humanSummary().contains("    … 15 more: `reconciler status --run 7`"), "\(dry.humanSummary())")
        var large = Self.report(changes: 150)
        large.dryRun = true
        #expect(large.humanSummary(maximumChanges: RunReport.detailedChangesLimit).contains("    … 50 more: `reconciler status --run 7 --json`"))
    }

    /// Purchases whose `entitled` is unknown are counted in the report with the setting that decides it.
    @Test func unknownEntitlementsAreSaidWithTheirSetting() {
        var report = Self.report(changes: 0)
        #expect(!report.humanSummary().contains("  entitled "))
        report.unknownEntitlement = UnknownEntitlement(purchases: 0, products: [], setting: "RECONCILER_NON_RENEWING_TERMS")
        #expect(!report.humanSummary().contains("  entitled "))
        report.unknownEntitlement = UnknownEntitlement(
            purchases: 3, products: ["com.example.pass.season"], setting: "nonRenewingTerms in /etc/reconciler/reconciler.yaml")
        #expect(
            report.humanSummary().contains(
                "  entitled     3 purchases with entitled unknown (null in export): non-renewing product com.example.pass.season without a term; "
                    + "set how long each lasts in nonRenewingTerms in /etc/reconciler/reconciler.yaml"), "\(report.humanSummary())")
    }

    /// A finished run's report that changed `changes` purchases (all listed).
    static func report(changes: Int) -> RunReport {
        let end = Int64(Date().timeIntervalSince1970 * 1000)
        let changed = (0..<changes).map { index in
            RunReport.Change(
                originalTransactionId: "\(1000 + index)", fields: ["status"],
                before: PurchaseState(originalTransactionId: "\(1000 + index)", status: 1),
                after: PurchaseState(originalTransactionId: "\(1000 + index)", status: 2))
        }
        return RunReport(
            runId: 7, kind: .manual, environment: .production, bundleId: "com.example.app",
            windowStart: .init(millisecondsSince1970: end - 3_600_000), windowEnd: .init(millisecondsSince1970: end),
            dryRun: false, status: .succeeded, failure: nil, startedAt: Date(), finishedAt: Date(), durationSeconds: 1.5, replaySeconds: nil,
            urgentRecoverySeconds: nil, notifications: .init(seen: 3, applied: 3), notificationsByType: [:], shardsTotal: 2, shardsFailed: [],
            pages: 2, paginationRestarts: 0, customersChecked: 1, customersFailed: [], transactionsFetched: 4, revisionResets: [],
            changes: changed, changesTotal: changes, rejections: [], api: .zero)
    }
}
