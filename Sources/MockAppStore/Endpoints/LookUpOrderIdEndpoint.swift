import AppStoreServer
import NIOHTTP1

/// Look Up Order ID: the order's transactions (newest version of each, signed now, as Apple's
/// are) with status 0, or status 1 and no transactions for an order ID the app does not know.
/// Apple documents no 400 for a malformed order ID, so it gets the same 200 with status 1; the
/// match is exact (no case folding), and an invalid answer omits `signedTransactions`, the most
/// conservative reading of a field Apple does not say is always present. With `--forged`, the
/// orders `FORGED0000`... answer with a transaction signed by a stranger's CA.
extension MockAppStore {
    func lookUpOrderId(_ orderId: String, in app: AppWorld) -> MockHTTPResponse {
        let snapshot = app.snapshot(forOrder: orderId)
        if let forged = snapshot.forgedOrders[orderId] {
            return .json(.ok, OrderLookupResponse(status: .valid, signedTransactions: [forged.signedTransaction]))
        }
        guard let transactionIds = snapshot.world.orders[orderId], !transactionIds.isEmpty else {
            statistics.update(app.key) { $0.unknownOrderIds += 1 }
            noteCrossApp(orderId: orderId, in: app)
            return .json(.ok, OrderLookupResponse(status: .invalid))
        }
        let signedAt = Self.nowMilliseconds
        do {
            let signed = try transactionIds.compactMap { snapshot.world.transactionVersions[$0]?.last?.payload }.map { transaction in
                var transaction = transaction
                transaction.signedDate = signedAt
                return try app.catalog.signer.sign(transaction)
            }
            return .json(.ok, OrderLookupResponse(status: .valid, signedTransactions: signed))
        } catch {
            return Self.apiError(.internalServerError, 5_000_000, "An unknown error occurred.")
        }
    }
}
