package import AppStoreServer
package import ReconcilerDomain
package import ReconcilerStore

/// The app's own answer to a consumption request, sent at once as `app`: what the app API's
/// `POST /v1/consumption/{transactionId}?bundleId=B&environment=E` calls (the endpoint belongs to
/// the app API's server), one typed outcome per HTTP answer it gives.
///
/// ```swift
/// switch await ConsumptionAppAnswer.answer(input, app: target, client: client, origins: origins, database: database) {
/// case .accepted: 202
/// case .refused(let appleCode, _): 400
/// case .alreadyAnswered: 409
/// case .unreachable: 503
/// case .unknownRequest: 404
/// }
/// ```
package enum ConsumptionAppAnswer: Sendable, Equatable {
    /// 202: Apple accepted it, and it is recorded as the app's.
    case accepted
    /// 400: Apple's rules or Apple refused it (Apple's error code when Apple did); nothing recorded
    /// as answered.
    case refused(appleErrorCode: Int64?, detail: String)
    /// 409: the request was answered, acked, or has an answer being sent; nothing sent.
    case alreadyAnswered(detail: String)
    /// 404: no consumption request is stored for the transaction in that app and environment.
    case unknownRequest(detail: String)
    /// 503: Apple could not be reached (429, 5xx, no answer) or the database failed: retry.
    case unreachable(detail: String)

    /// The HTTP status the app API answers with.
    package var httpStatus: Int {
        switch self {
        case .accepted: 202
        case .refused: 400
        case .alreadyAnswered: 409
        case .unknownRequest: 404
        case .unreachable: 503
        }
    }

    /// Checks and sends the app's answer for its request in `app` now, as `app` (`answeredBy`).
    package static func answer(
        _ input: ConsumptionAnswers.Input, app: AppTarget, client: AppStoreServerAPIClient, origins: SettingOrigins, database: Database
    ) async -> ConsumptionAppAnswer {
        do {
            let prepared = try await ConsumptionAnswers.prepare(input, apps: [app], database: database)
            let answer = ConsumptionRequests.Answer(
                target: prepared.target, transactionId: prepared.transactionId, notificationUUID: prepared.request.notificationUUID,
                body: prepared.body, answeredBy: .app)
            switch try await ConsumptionAnswers.deliver(answer, again: false, client: client, origins: origins, database: database) {
            case .settled: return .alreadyAnswered(detail: "the consumption request for transaction \(input.transactionId) was answered or acked")
            case .replied(_, nil): return .accepted
            case .replied(let reply, let failure?):
                return failure.code == .appleRefused
                    ? .refused(appleErrorCode: reply.errorCode, detail: failure.description) : .unreachable(detail: failure.description)
            }
        } catch let error as ReconcilerError {
            switch error.code {
            case .invalidAnswer, .invalidInput: return .refused(appleErrorCode: nil, detail: error.description)
            case .unknownConsumptionRequest: return .unknownRequest(detail: error.description)
            default: return .unreachable(detail: error.description)
            }
        } catch {
            return .unreachable(detail: "the answer could not be recorded or sent; retry")
        }
    }
}
