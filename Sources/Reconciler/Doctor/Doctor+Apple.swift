package import AppStoreServer
package import Foundation
package import ReconcilerDomain
import ReconcilerShared

extension Doctor {
    /// One app and environment's cheap request to Apple with its key: how it came out.
    package struct AppleProbe: Sendable {
        package var app: AppTarget
        /// The key's ID: the rules compare apps that share a key.
        package var keyId: String
        /// `nil`: Apple answered 2xx.
        package var error: AppStoreServerAPIError?
        /// The last response's timing, when one came (a 401 has it too).
        package var timing: AppStoreServerAPIClient.ResponseTiming?

        package init(app: AppTarget, keyId: String, error: AppStoreServerAPIError?, timing: AppStoreServerAPIClient.ResponseTiming?) {
            self.app = app
            self.keyId = keyId
            self.error = error
            self.timing = timing
        }

        var refused: Bool { error?.refusesTheCredentials == true }
    }

    /// A clock further off than this from Apple's warns.
    package static let clockWarning: Double = 60
    /// A clock further off than this fails: tokens, the 7-day replay rule and time rows depend on it.
    package static let clockFailure: Double = 300

    /// `apple-auth` for each probe, a 401's fix naming its likely cause by what the others saw;
    /// then one `clock` line from the responses' `Date` headers.
    package static func appleChecks(_ probes: [AppleProbe]) -> [DoctorResult] {
        probes.map { auth($0, among: probes) } + (clock(probes).map { [$0] } ?? [])
    }

    static func auth(_ probe: AppleProbe, among probes: [AppleProbe]) -> DoctorResult {
        let app = probe.app.bundleId
        let environment = probe.app.environment
        guard let error = probe.error else {
            return .ok(.appleAuth, app: app, environment: environment, "key \(probe.keyId) is accepted")
        }
        guard probe.refused else {
            let failure = ReconcilerError(apple: error)
            let transient = failure.code.exitClass == .retryable
            return DoctorResult(
                .appleAuth, app: app, environment: environment, status: .fail, detail: "\(error)",
                fix: transient
                    ? "Run doctor again: Apple did not answer this time."
                    : "Read Apple's answer above; the request was Get Notification History over one second.",
                transient: transient)
        }
        let sameKey = probes.filter { $0.keyId == probe.keyId }
        let fix: String
        if probe.app.environment == .production,
            probes.contains(where: { $0.app.bundleId == probe.app.bundleId && $0.app.environment == .sandbox && $0.error == nil })
        {
            fix = "Likely the app has no production release yet (Apple answers 401 in production until then), or its bundle ID is wrong."
        } else if sameKey.contains(where: { $0.app.bundleId != probe.app.bundleId && $0.error == nil }) {
            fix = "Likely key \(probe.keyId) does not cover \(app) (another app passes with it), or the bundle ID is wrong."
        } else {
            fix = "Likely the key ID, the issuer ID or the .p8 file of key \(probe.keyId) is wrong (every app is refused with it)."
        }
        return DoctorResult(
            .appleAuth, app: app, environment: environment, status: .fail, detail: "Apple answered 401 (the JWT is invalid) to key \(probe.keyId)",
            fix: fix)
    }

    /// This host's clock against Apple's: the responses' `Date` against each request's midpoint,
    /// the furthest off of them (a `Date` has whole seconds).
    static func clock(_ probes: [AppleProbe]) -> DoctorResult? {
        // A `Date` has whole seconds: the instant it names is half a second, on average, before the answer's.
        let offsets = probes.compactMap { probe in
            probe.timing.flatMap { timing in timing.serverDate.map { $0.timeIntervalSince(timing.midpoint) + 0.5 } }
        }
        guard let offset = offsets.max(by: { abs($0) < abs($1) }) else {
            return probes.isEmpty
                ? nil
                : DoctorResult(
                    .clock, status: .warn, detail: "no Apple response carried a Date header",
                    fix: "Keep this host's clock synchronised (NTP); doctor could not compare it.")
        }
        let seconds = Int(offset.rounded())
        let detail = abs(offset) < 1 ? "within a second of Apple's" : "\(abs(seconds)) s \(seconds > 0 ? "behind" : "ahead of") Apple's"
        let fix = "Synchronise this host's clock (NTP, chrony): the API tokens, the 7-day replay rule and the time rows depend on it."
        if abs(offset) > clockFailure { return DoctorResult(.clock, status: .fail, detail: detail, fix: fix) }
        if abs(offset) > clockWarning { return DoctorResult(.clock, status: .warn, detail: detail, fix: fix) }
        return .ok(.clock, detail)
    }
}

extension Doctor {
    /// `test-notification` for one app and environment (`doctor --send-test`): Apple's TEST
    /// notification came round, as `check-webhook` reports it (`outcome` is its line), or why not.
    package static func testNotification(_ app: AppTarget, outcome: Result<String, any Error>) -> DoctorResult {
        let environment = app.environment
        switch outcome {
        case .success(let line):
            let detail = line.hasPrefix("SUCCESS: ") ? String(line.dropFirst("SUCCESS: ".count)) : line
            return .ok(.testNotification, app: app.bundleId, environment: environment, detail)
        case .failure(let error):
            let failure = ReconcilerError(endingCommandWith: error) ?? .configuration("\(error)")
            let refused = failure.code == .credentialsRefused
            return DoctorResult(
                .testNotification, app: app.bundleId, environment: environment, status: .fail,
                detail: failure.description.hasPrefix("FAILED: ") ? String(failure.description.dropFirst("FAILED: ".count)) : failure.description,
                fix: refused
                    ? "Apple refused the key: see apple-auth."
                    : "Make `reconciler serve` reachable at the URL App Store Connect has for this environment (notification-urls), then run doctor --send-test again.",
                transient: failure.code == .interrupted)
        }
    }
}
