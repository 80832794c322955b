import Foundation
import ReconcilerDomain
import Testing

@testable import AppStoreServer
@testable import Reconciler

/// The rules of `reconciler doctor`'s Apple checks, on what Apple answered: a 401's likely cause
/// by what the other apps and environments saw, the clock, the notification URLs and their fix.
@Suite struct DoctorRulesTests {
    static func probe(
        _ bundleId: String, _ environment: AppStoreEnvironment, key: String = "KEY", refused: Bool = false, skew: Double = 0
    ) -> Doctor.AppleProbe {
        let sent = Date(timeIntervalSince1970: 1_800_000_000)
        let timing = AppStoreServerAPIClient.ResponseTiming(sentAt: sent, receivedAt: sent + 2, serverDate: sent + 1 + skew)
        let error: AppStoreServerAPIError? = refused ? .unauthorized(.init(endpoint: .getNotificationHistory, httpStatusCode: 401, attempts: 1)) : nil
        return Doctor.AppleProbe(
            app: AppTarget(bundleId: bundleId, environment: environment, appAppleId: 1), keyId: key, error: error, timing: timing)
    }

    static func fixes(_ probes: [Doctor.AppleProbe]) -> [String?] {
        Doctor.appleChecks(probes).filter { $0.check == .appleAuth && $0.status == .fail }.map(\.fix)
    }

    @Test func aRefusalOfEveryAppNamesTheKey() {
        let fixes = Self.fixes([Self.probe("one", .production, refused: true), Self.probe("two", .production, refused: true)])
        #expect(fixes.count == 2)
        #expect(fixes.allSatisfy { $0?.hasPrefix("Likely the key ID, the issuer ID or the .p8 file of key KEY") == true })
    }

    @Test func aRefusalOfOneAppWhileAnotherPassesNamesTheApp() {
        let fixes = Self.fixes([Self.probe("one", .production), Self.probe("two", .production, refused: true)])
        #expect(fixes == ["Likely key KEY does not cover two (another app passes with it), or the bundle ID is wrong."])
        // Another key passing says nothing of this one.
        let other = Self.fixes([Self.probe("one", .production, key: "OTHER"), Self.probe("two", .production, refused: true)])
        #expect(other.first??.contains("every app is refused") == true)
    }

    @Test func productionRefusedWhileTheSandboxAnswersIsLikelyNoReleaseYet() {
        let fixes = Self.fixes([Self.probe("one", .production, refused: true), Self.probe("one", .sandbox), Self.probe("two", .production)])
        #expect(fixes.count == 1)
        #expect(fixes.first??.hasPrefix("Likely the app has no production release yet") == true)
    }

    @Test func theClockWarnsAboveAMinuteAndFailsAboveFive() {
        func clock(_ skew: Double) -> DoctorResult? { Doctor.appleChecks([Self.probe("one", .production, skew: skew)]).first { $0.check == .clock } }
        #expect(clock(0)?.status == .ok)
        #expect(clock(0)?.detail == "within a second of Apple's")
        #expect(clock(59)?.status == .ok)
        #expect(clock(61)?.status == .warn)
        #expect(clock(-61)?.detail == "61 s ahead of Apple's")
        #expect(clock(299)?.status == .warn)
        #expect(clock(301)?.status == .fail)
        #expect(clock(-400)?.status == .fail)
    }

    static let url = "https://reconciler.example.com/notifications"

    static func settings(
        _ app: AppStoreConnectApp?, url: String? = Self.url, environments: [AppStoreEnvironment] = [.production, .sandbox]
    ) -> Doctor.NotificationSettings {
        Doctor.NotificationSettings(
            bundleId: "one", environments: environments, notificationURL: url, environmentsSetting: "apps[0].environments", lookup: .success(app))
    }

    static func app(_ production: String?, _ version: String?, sandbox: String? = nil, _ sandboxVersion: String? = nil) -> AppStoreConnectApp {
        AppStoreConnectApp(
            id: "1",
            attributes: .init(
                bundleId: "one", subscriptionStatusUrl: production, subscriptionStatusUrlVersion: version,
                subscriptionStatusUrlForSandbox: sandbox, subscriptionStatusUrlVersionForSandbox: sandboxVersion))
    }

    static func statuses(_ settings: Doctor.NotificationSettings) -> [DoctorStatus] { Doctor.notificationURLChecks([settings]).map(\.status) }

    @Test func theProductionURLMustBeNotificationURLInVersion2() {
        #expect(Self.statuses(Self.settings(Self.app(Self.url, "V2"))) == [.ok, .ok])
        #expect(Self.statuses(Self.settings(Self.app("https://old.example.com/hook", "V2"))) == [.fail, .ok])
        #expect(Self.statuses(Self.settings(Self.app(Self.url, "V1"))) == [.fail, .ok])
        let line = Doctor.notificationURLChecks([Self.settings(Self.app("https://user:pw@old.example.com/hook?token=s3cret", "V1"))])[0]
        #expect(
            line.detail
                == "production URL https://old.example.com/hook, Version 1; notificationURL is https://reconciler.example.com/notifications, Version 2"
        )
        #expect(line.fix?.contains("--fix-notification-urls") == true)
    }

    @Test func anEmptySandboxURLIsFineOnlyWhenTheAppListsTheSandbox() {
        #expect(Self.statuses(Self.settings(Self.app(Self.url, "V2"), environments: [.production, .sandbox])) == [.ok, .ok])
        let warned = Doctor.notificationURLChecks([Self.settings(Self.app(Self.url, "V2"), environments: [.production])])[1]
        #expect(warned.status == .warn)
        #expect(warned.fix == "Add sandbox to apps[0].environments, or serve answers them 503.")
        #expect(Self.statuses(Self.settings(Self.app(Self.url, "V2", sandbox: "https://elsewhere.example.com", "V2"))) == [.ok, .fail])
        #expect(Self.statuses(Self.settings(Self.app(Self.url, "V2", sandbox: Self.url, "V1"))) == [.ok, .fail])
    }

    /// Without notificationURL (the app's own handler stays Apple's URL) only Version 1 warns.
    @Test func withoutNotificationURLOnlyVersion1Warns() {
        #expect(Self.statuses(Self.settings(Self.app("https://app.example.com/apple", "V2"), url: nil, environments: [.production])) == [.ok, .ok])
        #expect(
            Self.statuses(Self.settings(Self.app("https://app.example.com/apple", "V1", sandbox: "https://app.example.com/s", "V1"), url: nil)) == [
                .warn, .warn,
            ])
    }

    @Test func theFixChangesExactlyTheWrongValues() {
        #expect(Doctor.notificationURLFix(Self.app(Self.url, "V2"), notificationURL: Self.url) == nil)
        let version = Doctor.notificationURLFix(Self.app(Self.url, "V1"), notificationURL: Self.url)
        #expect(version == AppStoreConnectApp.Attributes(subscriptionStatusUrlVersion: "V2"))
        let both = Doctor.notificationURLFix(
            Self.app("https://old.example.com", "V2", sandbox: "https://old.example.com", "V1"), notificationURL: Self.url)
        #expect(
            both
                == AppStoreConnectApp.Attributes(
                    subscriptionStatusUrl: Self.url, subscriptionStatusUrlForSandbox: Self.url, subscriptionStatusUrlVersionForSandbox: "V2"))
        // An empty sandbox URL stays empty: Apple then sends the sandbox's to production's.
        #expect(Doctor.notificationURLFix(Self.app(Self.url, "V2", sandbox: "", nil), notificationURL: Self.url) == nil)
        let lines = Doctor.changeLines(
            "one", from: Self.app("https://old.example.com/x?k=secret", "V1"),
            to: .init(subscriptionStatusUrl: Self.url, subscriptionStatusUrlVersion: "V2"))
        #expect(lines == ["one: subscriptionStatusUrl https://old.example.com/x → \(Self.url)", "one: subscriptionStatusUrlVersion V1 → V2"])
    }

    @Test func anAppStoreConnectRefusalNamesItsKey() {
        let failure = AppStoreConnectClient.Failure(
            httpStatusCode: 401, errors: [.init(status: "401", code: "NOT_AUTHORIZED", title: "t", detail: nil)], transport: nil)
        let settings = Doctor.NotificationSettings(
            bundleId: "one", environments: [.production], notificationURL: Self.url, environmentsSetting: "", lookup: .failure(failure))
        let results = Doctor.notificationURLChecks([settings])
        #expect(results.map(\.status) == [.fail])
        #expect(results.first?.fix?.contains("appStoreConnect.id") == true)
        #expect(results.first?.transient == false)
    }

    /// An Apple 5xx is transient: alone it makes the exit 2, not 1.
    @Test func anAppleServerErrorIsTransient() {
        var probe = Self.probe("one", .production)
        probe.error = .serverError(.init(endpoint: .getNotificationHistory, httpStatusCode: 503, attempts: 6))
        let results = Doctor.appleChecks([probe])
        #expect(results.first { $0.check == .appleAuth }?.transient == true)
        #expect(DoctorReport(results: results).exitClass == .retryable)
    }

    /// serve's /health: 200 is ok; anything else, or no answer, only warns (a proxy may not route it).
    @Test func serveHealthWarnsWhenItDoesNotAnswer200() {
        let url = "https://user:pw@reconciler.example.com/health"
        #expect(Doctor.serveHealth(url: url, app: nil, answered: 200, error: nil).status == .ok)
        let down = Doctor.serveHealth(url: url, app: nil, answered: nil, error: "connect refused")
        #expect(down.status == .warn)
        #expect(down.detail == "https://reconciler.example.com/health does not answer (connect refused)")
        #expect(Doctor.serveHealth(url: url, app: nil, answered: 503, error: nil).status == .warn)
    }
}
