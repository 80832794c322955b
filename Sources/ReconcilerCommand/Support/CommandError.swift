import AppStoreServer
import ArgumentParser

/// An error that ends a command with a message for the operator and a documented exit code.
struct CommandError: Error, CustomStringConvertible {
    var description: String
    var exitCode: Int32

    /// Exit 1: the command line or configuration must change.
    static func configuration(_ message: String) -> CommandError {
        CommandError(description: message, exitCode: 1)
    }

    /// Exit 2: the work ran but something was not recovered.
    static func partial(_ message: String) -> CommandError {
        CommandError(description: message, exitCode: 2)
    }

    /// Exit 4: done, but something needs a person (payloads quarantined for the first time, requests
    /// Apple refused, a window lost to retention); not a retry.
    static func attention(_ message: String) -> CommandError {
        CommandError(description: message, exitCode: 4)
    }

    /// Exit 3: a signed value is not genuine.
    static func rejected(_ message: String) -> CommandError {
        CommandError(description: message, exitCode: 3)
    }
}

extension AppStoreServerAPIError {
    /// The description for an operator of this command line: after a 401 it names the settings
    /// to check (the API client does not know the command line's words).
    var operatorDescription: String {
        guard case .unauthorized = self else { return description }
        return description + ": check APP_STORE_KEY_ID, APP_STORE_ISSUER_ID, APP_STORE_PRIVATE_KEY_PATH and APP_STORE_BUNDLE_ID"
    }
}
