import AppStoreServer
import ReconcilerDomain

/// What Apple sent says this configuration is wrong, not that a payload is bad: signed data for
/// another app or environment, or a window where most signed values fail their chain (the wrong
/// root certificates). The run stops, nothing is quarantined, and `--since-last` does not move.
enum RunConfigurationCheck {
    /// The configuration error a verification failure means, if it means one.
    static func appMismatch(_ error: VerificationError) -> ReconcilerError? {
        switch error.reason {
        case .invalidBundleId, .invalidAppAppleId, .invalidEnvironment:
            ReconcilerError(
                .appMismatch,

                "Apple's signed data does not belong to the configured app and environment (\(error)); check the bundle id, the app's Apple ID and the environment"
            )
        default: nil
        }
    }
}

/// Counts a run's verified values and chain failures, to tell a forged payload (quarantine it)
/// from a wrong trust configuration (stop): the run stops once at least `minimum` values failed
/// their chain and they outnumber the values that verified.
final class VerificationTally: Sendable {
    let minimum: Int
    private let counts = Locked((verified: 0, chainFailures: 0))

    init(minimum: Int = 5) {
        self.minimum = minimum
    }

    static let chainReasons: Set<VerificationError.Reason> = [
        .untrustedRoot, .invalidChain, .missingLeafOID, .missingIntermediateOID, .invalidChainLength, .invalidCertificate,
    ]

    /// Adds a batch (before any of it is quarantined); throws when the configuration is wrong.
    func record(verified: Int, failures: [VerificationError]) throws {
        if let mismatch = failures.lazy.compactMap(RunConfigurationCheck.appMismatch).first { throw mismatch }
        let chainFailures = failures.filter { Self.chainReasons.contains($0.reason) }.count
        let (total, good) = counts.withLock { counts in
            counts.verified += verified
            counts.chainFailures += chainFailures
            return (counts.chainFailures, counts.verified)
        }
        if chainFailures > 0, total >= minimum, total > good {
            throw ReconcilerError(
                .untrustedChains,

                "\(total) of \(total + good) signed values failed their certificate chain (e.g. \(failures.first { Self.chainReasons.contains($0.reason) }?.description ?? "")); check the configured root certificates"
            )
        }
    }
}
