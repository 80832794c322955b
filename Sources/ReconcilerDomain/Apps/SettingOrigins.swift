/// Where each setting of one app in one environment that a hint may name came from.
package struct SettingOrigins: Sendable, Hashable {
    package var bundleId: SettingOrigin
    package var appAppleId: SettingOrigin
    package var environment: SettingOrigin
    /// The In-App Purchase key's id, issuer and `.p8` file.
    package var keyId: SettingOrigin
    package var issuerId: SettingOrigin
    package var privateKeyPath: SettingOrigin
    /// The trusted root certificates.
    package var rootCertificates: SettingOrigin

    package init(
        bundleId: SettingOrigin, appAppleId: SettingOrigin, environment: SettingOrigin, keyId: SettingOrigin, issuerId: SettingOrigin,
        privateKeyPath: SettingOrigin, rootCertificates: SettingOrigin
    ) {
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environment = environment
        self.keyId = keyId
        self.issuerId = issuerId
        self.privateKeyPath = privateKeyPath
        self.rootCertificates = rootCertificates
    }

    /// What Apple's 401 says is wrong: the key and the bundle ID its tokens name.
    package var credentials: String { SettingOrigin.list([keyId, issuerId, privateKeyPath, bundleId]) }
    /// What signed data of another app or environment says is wrong.
    package var app: String { SettingOrigin.list([bundleId, appAppleId, environment]) }
}
