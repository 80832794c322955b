package import ReconcilerDomain

/// Every result of one `reconciler doctor`, in the order the checks ran, and how the command exits.
package struct DoctorReport: Sendable, Encodable {
    package var results: [DoctorResult]

    package init(results: [DoctorResult]) {
        self.results = results
    }

    /// By the one table's precedence 1 > 2 > 4 > 0: a failure a person must fix; failures that are
    /// all transient (run it again); a warning; all well.
    package var exitClass: ExitClass {
        let failures = results.filter { $0.status == .fail }
        if failures.contains(where: { !$0.transient }) { return .configuration }
        if !failures.isEmpty { return .retryable }
        if results.contains(where: { $0.status == .warn }) { return .attention }
        return .recovered
    }

    /// One line per check.
    package var lines: [String] { results.map(\.line) }

    /// The last line: how many checks came out how.
    package var summary: String {
        let count = { (status: DoctorStatus) in self.results.filter { $0.status == status }.count }
        return "\(count(.ok)) ok, \(count(.warn)) warn, \(count(.fail)) failed"
    }

    /// The error the command ends with when not all is well (its exit code by ``exitClass``); `nil`
    /// when every check passed.
    package var ending: ReconcilerError? {
        switch exitClass {
        case .recovered, .rejected: nil
        case .configuration: .configuration("doctor: \(summary): fix each FAIL line")
        case .retryable: .partial("doctor: \(summary): the failures may pass on their own; run it again")
        case .attention: .attention("doctor: \(summary)")
        }
    }

    package func encode(to encoder: any Encoder) throws {
        try results.encode(to: encoder)
    }
}
