import ArgumentParser
import Reconciler

/// `--give-up-after N` (env RECONCILER_GIVE_UP_AFTER): when a customer or shard that keeps failing is given up.
enum GiveUpOption {
    static func policy(_ option: Int?) throws -> GiveUpPolicy {
        if let option {
            guard option >= 1 else { throw ValidationError("--give-up-after must be at least 1") }
            return GiveUpPolicy(attempts: option)
        }
        guard let text = Env.value("RECONCILER_GIVE_UP_AFTER") else { return GiveUpPolicy() }
        guard let attempts = Int(text), attempts >= 1 else {
            throw ValidationError("RECONCILER_GIVE_UP_AFTER: \(text) is not a number of attempts of at least 1")
        }
        return GiveUpPolicy(attempts: attempts)
    }
}
