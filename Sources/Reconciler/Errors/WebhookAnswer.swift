package import AppStoreServer
package import ReconcilerDomain

/// How the webhook answers a notification it did not store, as Hummingbird's `HTTPResponseError`
/// answers: the error says its own status. The one place where a failure to take a notification
/// becomes an HTTP answer: a reconciler error answers with its code's ``ReconcilerError/Code/httpStatus``
/// and ``ReconcilerError/Code/webhookCode``; a payload that does not verify is refused with its reason
/// (400: Apple's retry would fail again); anything else is no verdict on the notification (the
/// store away, a shutdown), so 503 makes Apple deliver it again.
///
/// ```swift
/// let answer = WebhookAnswer(failure: error)
/// return Response(status: .init(code: answer.status), body: answer.body)
/// ```
package struct WebhookAnswer: Hashable, Sendable {
    /// The HTTP status.
    package var status: Int
    /// The body's `error`: a ``ReconcilerError/Code/webhookCode`` or Apple's verification reason.
    package var error: String
    /// The body's `detail`, for whoever posted: never the store's own words.
    package var detail: String

    package init(failure: any Error) {
        if let failure = failure as? VerificationError {
            (status, error, detail) = (400, failure.reason.rawValue, failure.detail)
            return
        }
        // Classed as a command's end is: a database failure, a cancellation, Apple's errors.
        let classed = ReconcilerError(endingCommandWith: failure) ?? .partial("the notification was not stored")
        (status, error) = (classed.httpStatus, classed.code.webhookCode)
        detail = error == Self.notStored ? "the notification was not stored; retry later" : classed.description
    }

    /// The answer's `error` when the failure is the store's, not the notification's.
    static let notStored = "STORE_UNAVAILABLE"

    /// Whether the notification itself was refused (a 4xx: counted as a rejection), not left for
    /// Apple to deliver again.
    package var refusesTheNotification: Bool { (400..<500).contains(status) }
}
