package import AppStoreServer
package import ReconcilerDomain

extension AppStoreServerAPIError {
    /// Apple's 401, the one rule of it: the key, key ID, issuer ID or bundle ID is wrong, so every
    /// request of the app fails alike. The work stops at once (a run, a repair, a worker do not
    /// fail one shard or customer after another), and the command ends with
    /// ``ReconcilerError/Code/credentialsRefused`` (exit 1), naming where those settings were set.
    package var refusesTheCredentials: Bool {
        if case .unauthorized = self { true } else { false }
    }
}

extension ReconcilerError {
    /// This error with the settings its hint asks to check named where they were set (`origins`:
    /// the configuration file's keys, or the variables and flags, which the API client cannot know):
    /// the key and bundle ID for Apple's 401, the app's identity for signed data of another app, the
    /// trusted roots for chains that fail, the environment for an ID Apple does not know there.
    package func naming(_ origins: SettingOrigins) -> ReconcilerError {
        let hint =
            switch code {
            case .credentialsRefused: ": check " + origins.credentials
            case .appMismatch: " (\(origins.app))"
            case .untrustedChains: " (\(origins.rootCertificates))"
            case .unknownTransactionId: "; the environment is set by \(origins.environment)"
            default: ""
            }
        var error = self
        error.description += hint
        error.debugDescription = error.description + debugDescription.dropFirst(description.count)
        return error
    }

    /// `error` as it ends a command that called Apple as one app and environment, naming the
    /// settings a hint asks to check where they were set; errors the entry point leaves to
    /// ArgumentParser unchanged.
    package static func naming(_ origins: SettingOrigins, in error: any Error) -> any Error {
        switch error {
        case let error as ReconcilerError: error.naming(origins)
        case let error as AppStoreServerAPIError where error.refusesTheCredentials: ReconcilerError(apple: error).naming(origins)
        default: error
        }
    }
}
