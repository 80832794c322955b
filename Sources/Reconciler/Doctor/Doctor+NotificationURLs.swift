package import AppStoreServer
import Foundation
package import ReconcilerDomain
import ReconcilerShared

extension Doctor {
    /// One app's notification settings as App Store Connect has them, and what the configuration says.
    package struct NotificationSettings: Sendable {
        package var bundleId: String
        /// The environments the configuration lists for the app.
        package var environments: [AppStoreEnvironment]
        /// The URL Apple should call (`notificationURL`); `nil`: the app's own handler stays Apple's URL.
        package var notificationURL: String?
        /// Where the app's environments are set, for the fix that adds `sandbox`.
        package var environmentsSetting: String
        /// App Store Connect's app (`nil`: it lists none with the bundle ID), or why it could not be
        /// read (an ``AppStoreConnectClient/Failure``, or what else stopped the request).
        package var lookup: Result<AppStoreConnectApp?, any Error>

        package init(
            bundleId: String, environments: [AppStoreEnvironment], notificationURL: String?, environmentsSetting: String,
            lookup: Result<AppStoreConnectApp?, any Error>
        ) {
            self.bundleId = bundleId
            self.environments = environments
            self.notificationURL = notificationURL
            self.environmentsSetting = environmentsSetting
            self.lookup = lookup
        }
    }

    static let fixURLs =
        "Run `reconciler doctor --fix-notification-urls` (or set it in App Store Connect: the app's App Information, App Store Server Notifications)."

    /// `notification-urls` for each app: a line for production and one for the sandbox.
    package static func notificationURLChecks(_ apps: [NotificationSettings]) -> [DoctorResult] {
        apps.flatMap(notificationURLs)
    }

    static func notificationURLs(_ settings: NotificationSettings) -> [DoctorResult] {
        let app = settings.bundleId
        let found: AppStoreConnectApp
        switch settings.lookup {
        case .failure(let error):
            guard let failure = error as? AppStoreConnectClient.Failure else {
                return [
                    DoctorResult(
                        .notificationURLs, app: app, status: .fail, detail: "App Store Connect could not be asked: \(error)",
                        fix: "Run doctor again.", transient: true)
                ]
            }
            let fix: String
            switch failure.httpStatusCode {
            case 401:
                fix =
                    "Check appStoreConnect.id, issuer and privateKeyPath: an App Store Connect API key (Users and Access, Integrations, Team Keys), not the In-App Purchase key."
            case 403: fix = "Give the App Store Connect API key the App Manager or Admin role."
            case 404: fix = "Check the app's appAppleId: App Store Connect has no app with it for this key's team."
            default: fix = failure.isTransient ? "Run doctor again: App Store Connect did not answer this time." : "Read App Store Connect's answer."
            }
            return [DoctorResult(.notificationURLs, app: app, status: .fail, detail: failure.description, fix: fix, transient: failure.isTransient)]
        case .success(nil):
            return [
                DoctorResult(
                    .notificationURLs, app: app, status: .fail, detail: "App Store Connect lists no app with bundle ID \(app)",
                    fix: "Check the bundle ID, and that the App Store Connect API key belongs to the app's team.")
            ]
        case .success(let app?): found = app
        }
        return [production(found, settings), sandbox(found, settings)]
    }

    /// `https://host/path`, without credentials or query: what a line shows of a URL.
    package static func shown(_ url: String?) -> String {
        guard let url, !url.isEmpty else { return "none" }
        guard var components = URLComponents(string: url), components.host != nil else { return "a URL that does not parse" }
        components.user = nil
        components.password = nil
        components.query = nil
        components.fragment = nil
        return components.string ?? "a URL"
    }

    static func version(_ version: String?) -> String {
        switch version?.uppercased() {
        case "V1": "Version 1"
        case "V2": "Version 2"
        default: "no version"
        }
    }

    static func production(_ found: AppStoreConnectApp, _ settings: NotificationSettings) -> DoctorResult {
        let environment = AppStoreEnvironment.production
        let url = found.attributes.subscriptionStatusUrl ?? ""
        let seen = "production URL \(shown(url)), \(version(found.attributes.subscriptionStatusUrlVersion))"
        func result(_ status: DoctorStatus, _ detail: String, _ fix: String?) -> DoctorResult {
            DoctorResult(.notificationURLs, app: settings.bundleId, environment: environment, status: status, detail: detail, fix: fix)
        }
        guard let wanted = settings.notificationURL else {
            if url.isEmpty {
                return result(
                    .warn, "no production URL is set: Apple sends this app no notifications",
                    "Set one in App Store Connect, or configure notificationURL and run `reconciler doctor --fix-notification-urls`.")
            }
            if found.attributes.subscriptionStatusUrlVersion?.uppercased() == "V1" {
                return result(.warn, seen, "Switch it to Version 2 in App Store Connect: the reconciler reads only Version 2 notifications.")
            }
            return .ok(.notificationURLs, app: settings.bundleId, environment: environment, seen + " (no notificationURL configured to compare)")
        }
        guard url == wanted, found.attributes.subscriptionStatusUrlVersion?.uppercased() == "V2" else {
            return result(.fail, seen + "; notificationURL is \(shown(wanted)), Version 2", fixURLs)
        }
        return .ok(.notificationURLs, app: settings.bundleId, environment: environment, seen + ": notificationURL")
    }

    static func sandbox(_ found: AppStoreConnectApp, _ settings: NotificationSettings) -> DoctorResult {
        let environment = AppStoreEnvironment.sandbox
        let url = found.attributes.subscriptionStatusUrlForSandbox ?? ""
        let seen = "sandbox URL \(shown(url)), \(version(found.attributes.subscriptionStatusUrlVersionForSandbox))"
        func result(_ status: DoctorStatus, _ detail: String, _ fix: String?) -> DoctorResult {
            DoctorResult(.notificationURLs, app: settings.bundleId, environment: environment, status: status, detail: detail, fix: fix)
        }
        if url.isEmpty {
            let detail = "no sandbox URL: Apple sends sandbox notifications (TestFlight, App Review) to the production URL"
            guard settings.notificationURL == nil || settings.environments.contains(.sandbox) else {
                return result(
                    .warn, detail + ", and the app does not list sandbox",
                    "Add sandbox to \(settings.environmentsSetting), or serve answers them 503.")
            }
            return .ok(.notificationURLs, app: settings.bundleId, environment: environment, detail)
        }
        guard let wanted = settings.notificationURL else {
            if found.attributes.subscriptionStatusUrlVersionForSandbox?.uppercased() == "V1" {
                return result(.warn, seen, "Switch it to Version 2 in App Store Connect: the reconciler reads only Version 2 notifications.")
            }
            return .ok(.notificationURLs, app: settings.bundleId, environment: environment, seen + " (no notificationURL configured to compare)")
        }
        guard url == wanted, found.attributes.subscriptionStatusUrlVersionForSandbox?.uppercased() == "V2" else {
            return result(.fail, seen + "; notificationURL is \(shown(wanted)), Version 2 (or leave it empty)", fixURLs)
        }
        return .ok(.notificationURLs, app: settings.bundleId, environment: environment, seen + ": notificationURL")
    }

    /// What `--fix-notification-urls` changes of `found` so that it passes: exactly the wrong
    /// values (a production URL or version that is not `notificationURL`, Version 2; a sandbox
    /// URL set to another URL or version; an empty sandbox URL stays empty). `nil`: nothing to change.
    package static func notificationURLFix(_ found: AppStoreConnectApp, notificationURL wanted: String) -> AppStoreConnectApp.Attributes? {
        var change = AppStoreConnectApp.Attributes()
        if found.attributes.subscriptionStatusUrl != wanted { change.subscriptionStatusUrl = wanted }
        if found.attributes.subscriptionStatusUrlVersion?.uppercased() != "V2" { change.subscriptionStatusUrlVersion = "V2" }
        if let sandbox = found.attributes.subscriptionStatusUrlForSandbox, !sandbox.isEmpty {
            if sandbox != wanted { change.subscriptionStatusUrlForSandbox = wanted }
            if found.attributes.subscriptionStatusUrlVersionForSandbox?.uppercased() != "V2" { change.subscriptionStatusUrlVersionForSandbox = "V2" }
        }
        return change == AppStoreConnectApp.Attributes() ? nil : change
    }

    /// The lines `--fix-notification-urls` prints for a change: each field's old and new value.
    package static func changeLines(_ bundleId: String, from found: AppStoreConnectApp, to change: AppStoreConnectApp.Attributes) -> [String] {
        let fields: [(String, String?, String?, Bool)] = [
            ("subscriptionStatusUrl", found.attributes.subscriptionStatusUrl, change.subscriptionStatusUrl, true),
            ("subscriptionStatusUrlVersion", found.attributes.subscriptionStatusUrlVersion, change.subscriptionStatusUrlVersion, false),
            ("subscriptionStatusUrlForSandbox", found.attributes.subscriptionStatusUrlForSandbox, change.subscriptionStatusUrlForSandbox, true),
            (
                "subscriptionStatusUrlVersionForSandbox", found.attributes.subscriptionStatusUrlVersionForSandbox,
                change.subscriptionStatusUrlVersionForSandbox,
                false
            ),
        ]
        return fields.compactMap { name, old, new, isURL in
            guard let new else { return nil }
            return "\(bundleId): \(name) \(isURL ? shown(old) : (old ?? "none")) → \(isURL ? shown(new) : new)"
        }
    }

    /// `serve-health`: `<origin of notificationURL>/health` answered `status`, or did not answer.
    /// Unreachable only warns: a proxy may route Apple's path and not this one.
    package static func serveHealth(url: String, app: String?, answered status: Int?, error: String?) -> DoctorResult {
        if status == 200 { return .ok(.serveHealth, app: app, "\(shown(url)) answers 200") }
        let detail = status.map { "\(shown(url)) answers \($0)" } ?? "\(shown(url)) does not answer (\(error ?? "no answer"))"
        return DoctorResult(
            .serveHealth, app: app, status: .warn, detail: detail,
            fix:
                "Check that `reconciler serve` runs behind notificationURL and its database answers (a proxy that routes only Apple's path may hide /health)."
        )
    }
}
