package import AppStoreServer
import Foundation
package import Logging
package import ReconcilerDomain
import ReconcilerShared
package import ReconcilerStore

/// Answers to consumption requests (`reconciler consumption send`): Apple's rules for Send
/// Consumption Information (V2) checked before any request, the app and environment taken from the
/// stored `CONSUMPTION_REQUEST`, the answer written `sending` first (`consumption_answers`), sent
/// with no transaction open, and completed with what Apple said.
///
/// ```swift
/// let prepared = try await ConsumptionAnswers.prepare(input, apps: nil, database: database)   // bad input: throws, nothing sent
/// try await ConsumptionAnswers.send(prepared, client: client, origins: target.origins, database: database)
/// ```
package enum ConsumptionAnswers {
    /// An answer as the operator typed it.
    package struct Input: Sendable {
        package var transactionId: String
        package var customerConsented: Bool
        package var deliveryStatus: String
        package var sampleContentProvided: String
        package var refundPreference: String?
        package var consumptionPercentage: Int?

        package init(
            transactionId: String, customerConsented: Bool, deliveryStatus: String, sampleContentProvided: String,
            refundPreference: String? = nil, consumptionPercentage: Int? = nil
        ) {
            self.transactionId = transactionId
            self.customerConsented = customerConsented
            self.deliveryStatus = deliveryStatus
            self.sampleContentProvided = sampleContentProvided
            self.refundPreference = refundPreference
            self.consumptionPercentage = consumptionPercentage
        }
    }

    /// The consumption percentage's bounds, in milliunits (100000 is all of it).
    package static let percentageRange: ClosedRange<Int> = 0...100_000

    /// Apple's rules that need only the answer: consent, the transaction ID's form, the known
    /// delivery statuses and refund preferences, a Boolean sample flag, the percentage's range and
    /// a percentage of 0 when the purchase was not delivered.
    /// - Throws: ``ReconcilerError/Code/invalidAnswer``, naming the field and Apple's rule.
    package static func body(of input: Input) throws -> ConsumptionRequest {
        guard input.customerConsented else {
            throw invalid(
                "the customer's consent is required: Apple refuses an answer without it (InvalidCustomerConsentedError 4000035), "
                    + "and without the customer's consent Apple asks that you do not answer; pass --customer-consented only when the customer consented"
            )
        }
        try checkTransactionId(input.transactionId)
        let deliveryStatus = DeliveryStatus(rawValue: input.deliveryStatus.uppercased())
        guard deliveryStatus.isKnown else {
            throw invalid(
                "--delivery-status \(input.deliveryStatus) is not one of Apple's: \(DeliveryStatus.knownValues.map(\.rawValue).joined(separator: ", ")) (InvalidDeliveryStatusError 4000036)"
            )
        }
        let sampleContentProvided: Bool
        switch input.sampleContentProvided.lowercased() {
        case "true": sampleContentProvided = true
        case "false": sampleContentProvided = false
        default:
            throw invalid("--sample-content-provided \(input.sampleContentProvided) is not true or false (InvalidSampleContentProvidedError 4000041)")
        }
        let refundPreference = try input.refundPreference.map { text in
            let preference = RefundPreference(rawValue: text.uppercased())
            guard preference.isKnown else {
                throw invalid(
                    "--refund-preference \(text) is not one of Apple's: \(RefundPreference.knownValues.map(\.rawValue).joined(separator: ", ")) (InvalidRefundPreferenceError 4000044)"
                )
            }
            return preference
        }
        if let percentage = input.consumptionPercentage {
            guard percentageRange.contains(percentage) else {
                throw invalid(
                    "--consumption-percentage \(percentage) is outside 0...100000 (milliunits: 100000 is all of it, 25000 a quarter; ConsumptionPercentageOutOfRangeError)"
                )
            }
            guard deliveryStatus == .delivered || percentage == 0 else {
                throw invalid(
                    "--consumption-percentage must be 0 when --delivery-status is not DELIVERED (UndeliveredConsumptionPercentageNonZeroError)")
            }
        }
        return ConsumptionRequest(
            customerConsented: true, deliveryStatus: deliveryStatus, sampleContentProvided: sampleContentProvided,
            consumptionPercentage: input.consumptionPercentage.map(Int32.init), refundPreference: refundPreference)
    }

    /// Apple's rules that depend on the purchase: no answer for a Family Sharing transaction, no
    /// percentage for an auto-renewable subscription (Apple computes it), and with `GRANT_PRORATED`
    /// a percentage above 0 and below 100000 for the other product types. Unknown facts (`nil`)
    /// are left to Apple.
    package static func check(_ body: ConsumptionRequest, productType: ProductType?, ownership: InAppOwnershipType?) throws {
        if ownership == .familyShared {
            throw invalid(
                "the transaction was shared through Family Sharing: Apple takes no consumption information for it (FamilyTransactionNotSupportedError 4000185)"
            )
        }
        guard let productType else { return }
        if productType == .autoRenewableSubscription {
            if body.consumptionPercentage != nil {
                throw invalid(
                    "an auto-renewable subscription takes no --consumption-percentage: Apple computes it from the time elapsed (ConsumptionPercentageAutoRenewableSubscriptionError 4000209)"
                )
            }
        } else if body.refundPreference == .grantProrated {
            guard let percentage = body.consumptionPercentage, percentage > 0, percentage < 100_000 else {
                throw invalid(
                    "--refund-preference GRANT_PRORATED for a \(productType.rawValue.lowercased()) needs a --consumption-percentage above 0 and below 100000 (ConsumptionPercentageOutOfRangeError)"
                )
            }
        }
    }

    /// A transaction ID as Apple writes them: digits.
    /// - Throws: ``ReconcilerError/Code/invalidAnswer``.
    package static func checkTransactionId(_ transactionId: String) throws {
        guard !transactionId.isEmpty, transactionId.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw invalid(
                "--transaction-id \(transactionId) is not a transaction ID (digits, as the CONSUMPTION_REQUEST's transactionId; InvalidTransactionIdError 4000006)"
            )
        }
    }

    /// The stored requests for `transactionId` in `apps` (`nil`: every app and environment
    /// stored), which must all be of one app and environment: the newest first (the one an answer goes to).
    /// - Throws: ``ReconcilerError/Code/unknownConsumptionRequest`` for none, or
    ///   ``ReconcilerError/Code/invalidInput`` when they are in several apps or environments.
    package static func requests(
        forTransaction transactionId: String, apps: [AppTarget]?, on transaction: DatabaseTransaction, logger: Logger
    ) async throws -> [ConsumptionRequests.Request] {
        let found = try await ConsumptionRequests(logger: logger).requests(forTransaction: transactionId, apps: apps, on: transaction)
        guard !found.isEmpty else {
            throw ReconcilerError(
                .unknownConsumptionRequest,
                "no CONSUMPTION_REQUEST is stored for transaction \(transactionId)"
                    + (apps.map { " in \($0.map(\.description).joined(separator: ", "))" } ?? "")
                    + ": check the ID (the request's transactionId, as `reconciler consumption list` shows it); a request the webhook missed is recovered by `reconciler run`"
            )
        }
        let places = found.reduce(into: [AppTarget]()) { places, request in
            let place = request.app
            if !places.contains(place) { places.append(place) }
        }
        guard places.count == 1 else {
            throw ReconcilerError.configuration(
                "consumption requests for transaction \(transactionId) are stored for several apps or environments ("
                    + places.map(\.description).joined(separator: ", ") + "): choose one with " + AppTarget.choices(places))
        }
        return found
    }

    /// A checked answer and the stored request it answers (whose app and environment it goes to).
    package struct Prepared: Sendable {
        package var request: ConsumptionRequests.Request
        package var target: AppTarget
        package var transactionId: String
        package var body: ConsumptionRequest
    }

    /// Checks the answer, finds the newest stored request for its transaction in `apps` (`nil`:
    /// every app and environment stored) and checks the rules that depend on the purchase. Writes nothing.
    /// - Throws: ``ReconcilerError/Code/invalidAnswer``, ``ReconcilerError/Code/unknownConsumptionRequest``,
    ///   or ``ReconcilerError/Code/invalidInput`` when the transaction's requests are in several apps.
    package static func prepare(_ input: Input, apps: [AppTarget]?, database: Database) async throws -> Prepared {
        let body = try body(of: input)
        let transactionId = input.transactionId
        let (request, facts) = try await database.transaction { [logger = database.logger] transaction in
            let request = try await requests(forTransaction: transactionId, apps: apps, on: transaction, logger: logger)[0]
            let target = request.app
            return (request, try await ConsumptionRequests(logger: logger).transactionFacts(transactionId, of: target, on: transaction))
        }
        let target = request.app
        try check(body, productType: facts?.productType, ownership: facts?.ownership)
        return Prepared(request: request, target: target, transactionId: transactionId, body: body)
    }

    /// Sends the answer: written `sending` in a short transaction of its own (refused when the
    /// request is answered, acked or being sent, unless `again`), sent with no transaction open
    /// (through `client`'s rate limiter, the app's shared budget), then completed with what Apple
    /// said in another short transaction.
    /// - Throws: ``ReconcilerError/Code/consumptionRequestSettled`` (exit 1, nothing sent) for a
    ///   request answered, acked or being sent; ``ReconcilerError/Code/appleRefused`` (exit 1) for
    ///   a 4xx, with Apple's code; ``ReconcilerError/Code/notRecovered`` (exit 2) for a 429, a 5xx
    ///   or no answer after the client's retries: send it again;
    ///   ``ReconcilerError/Code/answerNotRecorded`` (exit 4) when Apple accepted it and the database
    ///   could not record that: it must not be sent again. A 401 is ``ReconcilerError/Code/credentialsRefused``
    ///   (exit 1), naming the settings to check where they were set (`origins`).
    package static func send(
        _ prepared: Prepared, again: Bool = false, answeredBy: ConsumptionAnsweredBy = .command, client: AppStoreServerAPIClient,
        origins: SettingOrigins, database: Database
    ) async throws {
        let answer = ConsumptionRequests.Answer(
            target: prepared.target, transactionId: prepared.transactionId, notificationUUID: prepared.request.notificationUUID,
            body: prepared.body, answeredBy: answeredBy)
        switch try await deliver(answer, again: again, client: client, origins: origins, database: database) {
        case .settled(let settled): throw refusal(settled, transactionId: prepared.transactionId)
        case .replied(_, let failure?): throw failure
        case .replied(_, nil): return
        }
    }

    /// What became of one answer ``deliver(_:again:client:origins:database:afterApple:)`` was given.
    package enum Delivery: Sendable {
        /// Not sent: the request was answered, acked or being sent (nothing written).
        case settled(ConsumptionRequests.Settled)
        /// Sent, and Apple's reply recorded; `failure` unless Apple accepted it: ``ReconcilerError/Code/appleRefused``
        /// for a 4xx, ``ReconcilerError/Code/notRecovered`` for a 429, 5xx or no answer, Apple's 401 as
        /// ``ReconcilerError/Code/credentialsRefused``.
        case replied(ConsumptionRequests.Reply, failure: ReconcilerError?)
    }

    /// One answer: written `sending` in a short transaction of its own (not written, and
    /// returned settled, when the request is answered, acked or being sent, unless `again`), sent
    /// with no transaction open, then completed with what Apple said in another. `afterApple` runs
    /// once Apple answered and before that is recorded (tests stop the work there).
    /// - Throws: ``ReconcilerError/Code/answerNotRecorded`` when Apple accepted it and the database
    ///   could not record that (it must not be sent again); the database's errors before Apple is called.
    package static func deliver(
        _ answer: ConsumptionRequests.Answer, again: Bool, client: AppStoreServerAPIClient, origins: SettingOrigins, database: Database,
        afterApple: (@Sendable () async throws -> Void)? = nil
    ) async throws -> Delivery {
        let requests = ConsumptionRequests(logger: database.logger)
        let transactionId = answer.transactionId
        if let settled = try await database.transaction({ try await requests.beginAnswer(answer, again: again, on: $0) }) {
            return .settled(settled)
        }
        var reply = ConsumptionRequests.Reply(outcome: .accepted)
        var failure: ReconcilerError?
        do {
            try await client.sendConsumptionInformation(transactionId: transactionId, answer.body)
        } catch let error as AppStoreServerAPIError {
            let details = error.details
            (reply.httpStatus, reply.errorCode, reply.errorMessage) = (details.httpStatusCode, details.errorCode?.rawValue, details.errorMessage)
            switch error {
            case .badRequest, .notFound,
                .unexpectedStatus where (400..<500).contains(details.httpStatusCode ?? 0):
                reply.outcome = .refused
                failure = ReconcilerError(.appleRefused, "Apple refused the consumption information: \(details)")
            case _ where error.refusesTheCredentials:
                reply.outcome = .refused
                failure = ReconcilerError(apple: error).naming(origins)
            default:
                reply.outcome = .failed
                failure = .partial("the consumption information was not delivered: \(error); send it again")
            }
        }
        try await afterApple?()
        let completed = reply
        do {
            try await database.transaction { try await requests.completeAnswer(answer.sendId, with: completed, on: $0) }
        } catch {
            let why = Database.operatorDescription(of: error)
            guard let failure else {
                throw ReconcilerError(
                    .answerNotRecorded,
                    "Apple accepted the consumption information for transaction \(transactionId) (202), but the database could not record it (\(why)): "
                        + "do not send it again; once the database is back, record that the request needs nothing more with "
                        + "`reconciler consumption ack --transaction-id \(transactionId) --note \"accepted by Apple, not recorded\"`")
            }
            return .replied(
                reply,
                failure: ReconcilerError(
                    failure.code,
                    "\(failure.description); the database could not record Apple's answer (\(why)), so the request stays marked as being sent: "
                        + "the next answer needs --again"))
        }
        return .replied(reply, failure: failure)
    }

    /// Why `send` refuses a request, and what the operator can do (who answered or acked it, and
    /// when, are stored data: in the details, for the log).
    private static func refusal(_ settled: ConsumptionRequests.Settled, transactionId: String) -> ReconcilerError {
        let (message, details): (String, String?)
        switch settled {
        case .answered(let request):
            message =
                "the consumption request for transaction \(transactionId) (\(request.bundleId), \(request.environment)) was answered: Apple accepted an answer"
            details = "sent at \(request.answeredAt.map { Timestamp($0).description } ?? "?") by \(request.answeredBy?.rawValue ?? "?")"
        case .acked(let request):
            message =
                "the consumption request for transaction \(transactionId) (\(request.bundleId), \(request.environment)) was acked: "
                + "it needs nothing more from the reconciler (`consumption list` shows who acked it)"
            details = "acked at \(request.ackedAt.map { Timestamp($0).description } ?? "?") by \(request.ackedBy ?? "?")"
        case .sending(let request):
            message =
                "an answer to the consumption request for transaction \(transactionId) (\(request.bundleId), \(request.environment)) is being sent, "
                + "or was and what Apple said was never recorded (the command stopped, or the database could not record it): Apple may have it"
            details = nil
        }
        return ReconcilerError(.consumptionRequestSettled, message + "; nothing was sent: pass --again to send this answer anyway", details: details)
    }

    private static func invalid(_ message: String) -> ReconcilerError {
        ReconcilerError(.invalidAnswer, message)
    }
}
