/// A customer whose transaction history phase 2 could not read in a run, and why.
package struct FailedCustomer: Sendable, Codable, Hashable {
    package var anchorTransactionId: String
    package var kind: FailureKind
    package var error: String

    package init(anchorTransactionId: String, kind: FailureKind, error: String) {
        self.anchorTransactionId = anchorTransactionId
        self.kind = kind
        self.error = error
    }
}
