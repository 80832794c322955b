import ArgumentParser
import Reconciler
import ReconcilerStore

/// `--give-up-after N` (env RECONCILER_GIVE_UP_AFTER): when a customer or shard that keeps failing is given up.
enum GiveUpOption {
    /// `--give-up-after`, else `RECONCILER_GIVE_UP_AFTER`, else the configuration file's `giveUpAfter`, else 6.
    static func policy(_ option: Int?, file: Int? = nil) throws -> GiveUpPolicy {
        if let option {
            guard option >= 1 else { throw ValidationError("--give-up-after must be at least 1") }
            return GiveUpPolicy(attempts: option)
        }
        guard let text = Env.value("RECONCILER_GIVE_UP_AFTER") else { return file.map { GiveUpPolicy(attempts: $0) } ?? GiveUpPolicy() }
        guard let attempts = Int(text), attempts >= 1 else {
            throw ValidationError("RECONCILER_GIVE_UP_AFTER: \(text) is not a number of attempts of at least 1")
        }
        return GiveUpPolicy(attempts: attempts)
    }
}
