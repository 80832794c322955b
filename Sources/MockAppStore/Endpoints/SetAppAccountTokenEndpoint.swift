import AppStoreServer
import Foundation
import NIOFoundationCompat
import NIOHTTP1

/// Set App Account Token, `PUT /inApps/v1/transactions/{originalTransactionId}/appAccountToken`,
/// with Apple's rules: 200 with no body; the token goes on the purchase's latest transaction (a
/// new version, so transaction history returns it again) and its renewal info, not on past
/// transactions. 400 for a malformed transaction ID (4000006), a token that is not a UUID
/// (4000183), an app transaction ID in the path (4000048), a Family Sharing purchase (4000185), a
/// transaction ID that is not the original one (4000187); 404 4040005 for an original transaction
/// ID the app does not have. A body that is not a JSON object is "malformed": 400 without a code.
/// A scale world (`--scale-notifications`) answers 501: it keeps no changes.
extension MockAppStore {
    func setAppAccountToken(_ request: MockHTTPRequest, originalTransactionId: String, in app: AppWorld) -> MockHTTPResponse {
        guard !originalTransactionId.isEmpty, originalTransactionId.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            return Self.apiError(.badRequest, 4_000_006, "Invalid transaction id.")
        }
        guard let body = try? JSONDecoder().decode([String: RawJSON].self, from: Data(buffer: request.body)) else {
            return .text(.badRequest, "Bad Request")
        }
        guard let token = body["appAccountToken"]?.string, UUID(uuidString: token) != nil else {
            return Self.apiError(.badRequest, 4_000_183, "Invalid request. The app account token field must be a valid UUID.")
        }
        let snapshot = app.snapshot(forTransaction: originalTransactionId)
        guard let transaction = snapshot.world.transactionVersions[originalTransactionId]?.last?.payload else {
            if snapshot.world.transactionVersions.values.contains(where: { $0.last?.payload.appTransactionId == originalTransactionId }) {
                return Self.apiError(.badRequest, 4_000_048, "Invalid request. The endpoint doesn't support an app transaction ID.")
            }
            noteCrossApp(transactionId: originalTransactionId, in: app)
            return Self.apiError(.notFound, 4_040_005, "Original transaction id not found.")
        }
        if transaction.inAppOwnershipType == .familyShared {
            return Self.apiError(.badRequest, 4_000_185, "Invalid request. Family transactions are not supported by this endpoint.")
        }
        if let original = transaction.originalTransactionId, original != originalTransactionId {
            return Self.apiError(
                .badRequest, 4_000_187, "Invalid request. The transaction ID provided is not an original transaction ID.")
        }
        // A scale world (the benchmarks) computes its customers on demand and keeps no changes.
        guard app.scale == nil else { return .text(.notImplemented, "Set App Account Token is not served by a scale world") }
        guard app.catalog.setAppAccountToken(token, originalTransactionId: originalTransactionId, at: request.arrivedAt) else {
            return Self.apiError(.notFound, 4_040_005, "Original transaction id not found.")
        }
        return MockHTTPResponse(status: .ok)
    }
}
