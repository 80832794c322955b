package import ReconcilerDomain

extension ExitClass {
    /// What a run's stored status says of it: a run that stopped short is retried, one that
    /// finished with rejections or was lost to retention needs a person.
    package init(runStatus: RunStatus) {
        switch runStatus {
        case .partial, .interrupted, .failed: self = .retryable
        case .succeededWithRejections, .lost: self = .attention
        case .succeeded, .running: self = .recovered
        }
    }
}
