import AppStoreServer
import Foundation
import ReconcilerShared
import Testing

@testable import Reconciler

/// The app API's purchase object is written in one encoding (the read path writes one per
/// purchase of every read): the same bytes as the export line's fields with `checkedAt` and
/// `fresh` added and the keys sorted, as the first version built it.
@Suite struct AppPurchaseJSONTests {
    /// The first version's encoding: the export line decoded into fields, the two added, sorted, written one by one.
    func formerJSONObject(_ purchase: AppPurchase) throws -> String {
        var row = try ExportRow(sortedJSONObject: try purchase.state.jsonLine())
        row.fields += [("checkedAt", ExportRow.Value(purchase.checkedAt?.millisecondsSince1970)), ("fresh", .bool(purchase.fresh))]
        row.fields.sort { $0.key < $1.key }
        return try row.jsonLine()
    }

    @Test(arguments: [
        AppPurchase(state: PurchaseState(originalTransactionId: "2000000100000212"), checkedAt: nil, fresh: false),
        AppPurchase(
            state: PurchaseState(
                originalTransactionId: "2000000100000212", latestTransactionId: "2000000100000987", productId: "com.example.pro/monthly",
                bundleId: "com.example.app", environment: .production, purchaseDate: 1_764_000_000_000, expiresDate: 1_766_592_000_000,
                revocationDate: nil, autoRenewStatus: 1, lastSignedDate: 1_764_000_000_123, appAccountToken: "7e3fb20b-4cdb-47cc-936d-99d65f608138",
                status: 1, entitled: true, appTransactionId: "704287643520133", revocationType: nil, revocationPercentage: nil, offerType: 2,
                offerIdentifier: "winter \"50%\" \\ off\tnow\u{1}", appUserId: "usér-42 ✓ \u{2028}"),
            checkedAt: Timestamp(millisecondsSince1970: 1_764_000_005_000), fresh: true),
        AppPurchase(
            state: PurchaseState(
                originalTransactionId: "7300", environment: .sandbox, revocationDate: 1_764_000_000_000, entitled: nil, revocationType: "REFUND_FULL",
                revocationPercentage: 100_000),
            checkedAt: Timestamp(millisecondsSince1970: 0), fresh: false),
    ])
    func theObjectIsTheExportLineWithCheckedAtAndFreshItsKeysSorted(_ purchase: AppPurchase) throws {
        let written = try purchase.jsonObject()
        #expect(written == (try formerJSONObject(purchase)))
        let keys = try #require(try JSONSerialization.jsonObject(with: Data(written.utf8)) as? [String: Any]).keys
        #expect(keys.count == 21)
        #expect(keys.contains("checkedAt") && keys.contains("fresh"))
    }
}
