package import AppStoreServer
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
            self.init(apple: error)
        case let error as VerificationError:
            self = .rejected("rejected: \(error.reason.rawValue): \(error.detail)")
        case is CancellationError:
            self = .interruption
        case let error where Database.isDatabaseFailure(error):
            // What the store retries (a connection gone, a conflict) and still failed passes: a rerun
            // resumes. Anything else the server refused (a permission, a full disk) fails again.
            let description = Database.operatorDescription(of: error)
            self =
                Database.isRetried(error)
                ? ReconcilerError(.databaseUnavailable, "the database failed (\(description)); rerun the same command to resume")
                : ReconcilerError(.databaseRefused, "the database refused the work: \(description)")
        default:
            return nil
        }
    }

    /// Apple's error as the reconciler's: a 401 is ``Code/credentialsRefused`` (the one rule:
    /// ``AppStoreServerAPIError/refusesTheCredentials``); anything else Apple kept answering badly
    /// after the client's retries stopped the work, and a rerun resumes it.
    package init(apple error: AppStoreServerAPIError) {
        if error.refusesTheCredentials {
            self.init(.credentialsRefused, error.description)
        } else {
            self = .partial("stopped: \(error); rerun the same command to resume")
        }
    }

    /// SIGINT or SIGTERM stopped the work (at a checkpoint).
    package static let interruption = ReconcilerError(.interrupted, "interrupted: rerun the same command to resume")

    /// What the operator reads: the description, then the remedy where the code has one the
    /// description does not already give.
    package var operatorMessage: String {
        guard let remedy, !description.contains(remedy) else { return description }
        return "\(description); \(remedy)"
    }
}
