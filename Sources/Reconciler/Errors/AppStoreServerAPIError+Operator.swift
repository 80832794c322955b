package import AppStoreServer

extension AppStoreServerAPIError {
    /// The description for an operator of this command line: after a 401 it names the settings
    /// to check (the API client does not know the command line's words).
    package var operatorDescription: String {
        guard case .unauthorized = self else { return description }
        return description + ": check APP_STORE_KEY_ID, APP_STORE_ISSUER_ID, APP_STORE_PRIVATE_KEY_PATH and APP_STORE_BUNDLE_ID"
    }
}
