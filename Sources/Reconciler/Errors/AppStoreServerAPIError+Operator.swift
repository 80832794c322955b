package import AppStoreServer
package import ReconcilerDomain

extension AppStoreServerAPIError {
    /// The description for an operator of this command line: after a 401 it names the settings
    /// to check where they were set (`origins`: the configuration file's keys, or the variables
    /// and flags), which the API client cannot know.
    package func operatorDescription(checking origins: SettingOrigins) -> String {
        guard case .unauthorized = self else { return description }
        return description + ": check " + origins.credentials
    }
}

extension ReconcilerError {
    /// This error with the settings its hint asks to check named where they were set: the key
    /// and bundle ID for Apple's 401 (``AppStoreServerAPIError/operatorDescription(checking:)``),
    /// the app's identity for signed data of another app, the trusted roots for chains that fail,
    /// the environment for an ID Apple does not know there.
    package func naming(_ origins: SettingOrigins) -> ReconcilerError {
        var error = self
        switch code {
        case .appMismatch: error.description += " (\(origins.app))"
        case .untrustedChains: error.description += " (\(origins.rootCertificates))"
        case .unknownTransactionId: error.description += "; the environment is set by \(origins.environment)"
        default: break
        }
        return error
    }

    /// `error` as it ends a command that called Apple as one app and environment, naming the
    /// settings a hint asks to check where they were set; other errors unchanged.
    package static func naming(_ origins: SettingOrigins, in error: any Error) -> any Error {
        switch error {
        case let error as AppStoreServerAPIError:
            guard case .unauthorized = error else { return error }
            return ReconcilerError.configuration(error.operatorDescription(checking: origins))
        case let error as ReconcilerError: return error.naming(origins)
        default: return error
        }
    }
}
