import AppStoreServer
import Foundation
import NIOFoundationCompat
import NIOHTTP1
import Synchronization

/// Send Consumption Information (V2), `PUT /inApps/v2/transactions/consumption/{transactionId}`,
/// with Apple's validation and errors: 202 Accepted with no body; 400 for a malformed transaction
/// ID (4000006), consent other than `true` (4000035), an unknown delivery status (4000036), a
/// sample flag that is not a Boolean (4000041), an unknown refund preference (4000044), an app
/// transaction ID in the path (4000048), a Family Sharing transaction (4000185), a percentage for an
/// auto-renewable subscription (4000209), a percentage outside 0...100000, a non-zero percentage
/// when the delivery status is not `DELIVERED`, and `GRANT_PRORATED` for another product type
/// without a percentage above 0 and below 100000; 404 4040010 for a transaction the app does not
/// have. A body that is not a JSON object is "malformed": 400 without an error code.
///
/// Apple documents ConsumptionPercentageOutOfRangeError and UndeliveredConsumptionPercentageNonZeroError
/// without publishing their `errorCode` values (none of Apple's four libraries defines them): the
/// mock answers them with 4000000 GeneralBadRequestError and the error's name in `errorMessage`,
/// rather than invent a code.
///
/// Every answer it accepts is kept (`GET /mock/consumption`), so a test can check what reached "Apple".
extension MockAppStore {
    /// An answer the mock accepted, as `GET /mock/consumption` lists it (JSON lines).
    package struct ReceivedConsumptionAnswer: Codable, Hashable, Sendable {
        package var bundleId: String
        package var environment: String
        package var transactionId: String
        package var customerConsented: Bool
        package var deliveryStatus: String
        package var sampleContentProvided: Bool
        package var refundPreference: String?
        package var consumptionPercentage: Int64?
        /// When it arrived, UNIX ms.
        package var receivedAt: Int64
    }

    func sendConsumptionInformation(_ request: MockHTTPRequest, transactionId: String, in app: AppWorld) -> MockHTTPResponse {
        guard !transactionId.isEmpty, transactionId.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            return Self.apiError(.badRequest, 4_000_006, "Invalid transaction id.")
        }
        guard let body = try? JSONDecoder().decode([String: RawJSON].self, from: Data(buffer: request.body)) else {
            return .text(.badRequest, "Bad Request")
        }
        guard case .bool(true) = body["customerConsented"] else {
            return Self.apiError(
                .badRequest, 4_000_035, "Invalid request. The customer consented field is required and must indicate the customer consented.")
        }
        guard let deliveryStatus = body["deliveryStatus"]?.string, DeliveryStatus(rawValue: deliveryStatus).isKnown else {
            return Self.apiError(.badRequest, 4_000_036, "Invalid request. The delivery status field is invalid.")
        }
        guard case .bool(let sampleContentProvided) = body["sampleContentProvided"] else {
            return Self.apiError(.badRequest, 4_000_041, "Invalid request. The sample content provided field is invalid.")
        }
        var refundPreference: String?
        if let value = body["refundPreference"], value != .null {
            guard let preference = value.string, RefundPreference(rawValue: preference).isKnown else {
                return Self.apiError(.badRequest, 4_000_044, "Invalid request. The refund preference field is invalid.")
            }
            refundPreference = preference
        }
        var percentage: Int64?
        if let value = body["consumptionPercentage"], value != .null {
            guard let number = value.integer, (0...100_000).contains(number) else { return Self.percentageOutOfRange }
            percentage = number
        }
        let snapshot = app.snapshot(forTransaction: transactionId)
        guard let transaction = snapshot.world.transactionVersions[transactionId]?.last?.payload else {
            if snapshot.world.transactionVersions.values.contains(where: { $0.last?.payload.appTransactionId == transactionId }) {
                return Self.apiError(.badRequest, 4_000_048, "Invalid request. The endpoint doesn't support an app transaction ID.")
            }
            noteCrossApp(transactionId: transactionId, in: app)
            return Self.apiError(.notFound, 4_040_010, "Transaction id not found.")
        }
        if transaction.inAppOwnershipType == .familyShared {
            return Self.apiError(.badRequest, 4_000_185, "Invalid request. Family transactions are not supported by this endpoint.")
        }
        if transaction.type == .autoRenewableSubscription {
            if percentage != nil {
                return Self.apiError(
                    .badRequest, 4_000_209,
                    "Invalid request. The consumption percentage field is not supported for auto-renewable subscription transactions.")
            }
        } else if refundPreference == RefundPreference.grantProrated.rawValue, !(1..<100_000).contains(percentage ?? 0) {
            return Self.percentageOutOfRange
        }
        if deliveryStatus != DeliveryStatus.delivered.rawValue, let percentage, percentage != 0 {
            return Self.apiError(
                .badRequest, 4_000_000,
                "UndeliveredConsumptionPercentageNonZeroError: the consumption percentage must be zero for the provided delivery status.")
        }
        let received = ReceivedConsumptionAnswer(
            bundleId: app.scenario.bundleId, environment: app.scenario.environment.rawValue, transactionId: transactionId,
            customerConsented: true, deliveryStatus: deliveryStatus, sampleContentProvided: sampleContentProvided,
            refundPreference: refundPreference, consumptionPercentage: percentage, receivedAt: request.arrivedAt)
        app.consumptionAnswers.withLock { $0.append(received) }
        return MockHTTPResponse(status: .accepted)
    }

    private static var percentageOutOfRange: MockHTTPResponse {
        apiError(.badRequest, 4_000_000, "ConsumptionPercentageOutOfRangeError: the consumption percentage is outside the valid range.")
    }

    /// Every answer accepted, of every app and environment, in the order they arrived (`GET /mock/consumption`).
    func consumptionAnswerLines() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return worlds.flatMap { $0.consumptionAnswers.withLock { $0 } }.sorted { $0.receivedAt < $1.receivedAt }
            .compactMap { try? encoder.encode($0) }.map { String(decoding: $0, as: UTF8.self) + "\n" }.joined()
    }
}
