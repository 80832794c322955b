import AppStoreServer
package import ReconcilerDomain
import ReconcilerStore

extension ReconcilerError {
    /// The one place where an error that ends a command becomes its message and exit code (the
    /// README's table): the reconciler's own errors keep their code, and with it their class;
    /// Apple's, a signature that does not verify, a cancellation and a database failure are classed
    /// here. `nil` leaves the error to ArgumentParser (usage errors, `--help`).
    ///
    /// ```swift
    /// if let failure = ReconcilerError(endingCommandWith: error) { exit(failure.exitCode) }
    /// ```
    package init?(endingCommandWith error: any Error) {
        switch error {
        case let error as ReconcilerError:
            self = error
        case let error as AppStoreServerAPIError:
            if case .unauthorized = error {
                // Commands that call Apple name the settings to check (``naming(_:in:)``); this is the fallback.
                self = .configuration(error.description)
            } else {
                self = .partial("stopped: \(error); rerun the same command to resume")
            }
        case let error as VerificationError:
            self = .rejected("rejected: \(error.reason.rawValue): \(error.detail)")
        case is CancellationError:
            self = ReconcilerError(.interrupted, "interrupted: rerun the same command to resume")
        case let error where Database.isDatabaseFailure(error):
            self = .partial("the database failed (\(Database.operatorDescription(of: error))); rerun the same command to resume")
        default:
            return nil
        }
    }

    /// What the operator reads: the description, then the remedy where the code has one the
    /// description does not already give.
    package var operatorMessage: String {
        guard let remedy, !description.contains(remedy) else { return description }
        return "\(description); \(remedy)"
    }
}
