import AppStoreServer
import ArgumentParser
import Foundation
import Reconciler
import ReconcilerDomain
import ReconcilerShared

struct DetectOutageCommand: AsyncParsableCommand, UsesAppsOptions {
    static let configuration = CommandConfiguration(
        commandName: "detect-outage",
        abstract: "Find webhook outages: notifications that did not reach the webhook, grouped into windows.",
        discussion: """
            Calls Get Notification History with onlyFailures=true over the last --since, groups the failed first \
            send attempts into windows, and prints each with its count per sendAttemptResult and how many Apple is \
            still retrying (production retries for about 6.5 days; the sandbox never retries). \
            `reconciler run --detected` recovers the windows found.

            It looks at every app and environment of the configuration file (--config, RECONCILER_CONFIG), or the \
            one app of the APP_STORE_* variables; --app and --environment narrow it. With several, the text has a \
            `== bundle (Environment)` section for each, and --json prints {"targets": [...]}: each the one-app \
            object (since, until, environment, windows) with its bundleId, or, where Apple could not be asked, \
            bundleId, environment, error and exitCode. One app's failure does not stop the others; the exit code \
            is the worst: 1 a configuration error (a key Apple refuses), 2 Apple unavailable, else 0.

              reconciler detect-outage --since 7d
              reconciler detect-outage --since 2d --json
              reconciler detect-outage --since 2d --app com.example.two
            """)

    @Option(help: ArgumentHelp("How far back to look (at most 180d, 30d in the sandbox).", valueName: "duration")) var since: Duration =
        .days(7)
    @Option(help: ArgumentHelp("Failures closer than this form one window.", valueName: "duration")) var mergeGap: Duration = .minutes(
        30)
    @Flag(help: "Print JSON.") var json = false

    @OptionGroup var options: AppleOptions

    func run() async throws {
        let logger = logging.makeLogger()
        let targets = try app.commandTargets(api: api)
        guard since > .zero else { throw ReconcilerError.configuration("--since: give a duration longer than 0, such as 7d") }
        let span = TimeWindow(start: .now - since, end: .now)
        // With a database, each app's requests come out of the budget its other processes share.
        let sharing = targets.map { $0.sharing([.getNotificationHistory]) }
        let outcomes = try await database.sharingBudgetIfConfigured(logger: logger, sharing: sharing) {
            var outcomes: [Outcome] = []
            // One app and environment after the other: a 401 or an outage of one does not stop the others.
            for target in targets {
                do {
                    let detection = try await OutageDetector(client: target.client, mergeGap: mergeGap).detect(in: span)
                    outcomes.append(Outcome(app: target.app, detection: detection))
                } catch let error as AppStoreServerAPIError {
                    // A key Apple refuses (exit 1, naming where it was set) or a request it refuses is this app's configuration.
                    let failure: ReconcilerError =
                        if error.refusesTheCredentials {
                            ReconcilerError(apple: error).naming(target.origins)
                        } else if case .badRequest = error {
                            .configuration(error.description)
                        } else {
                            .partial(error.description)
                        }
                    outcomes.append(Outcome(app: target.app, error: failure))
                }
            }
            return outcomes
        }
        let several = outcomes.count > 1
        if json {
            if several {
                try StandardOutput.printJSON(["targets": outcomes], dates: .deferredToDate)
            } else if let detection = outcomes.first?.detection {
                try StandardOutput.printJSON(detection, dates: .deferredToDate)
            }
        } else {
            for outcome in outcomes {
                if several { print("== \(outcome.app)") }
                if let detection = outcome.detection {
                    printText(detection, app: several ? outcome.app : nil)
                } else if several, let error = outcome.error {
                    print("not checked: \(error.description)")
                }
                if several { print("") }
            }
        }
        // The worst of the apps and environments decides the exit code (``ExitClass/mostPressing(_:)``).
        let failures = outcomes.compactMap { outcome in outcome.error.map { (app: outcome.app, error: $0) } }
        if let worst = ReconcilerError.worst(of: failures, several: several) { throw worst }
    }

    /// What the detection found for one app and environment, or why it could not look.
    struct Outcome: Encodable {
        var app: AppTarget
        var detection: OutageDetector.Detection?
        var error: ReconcilerError?

        init(app: AppTarget, detection: OutageDetector.Detection? = nil, error: ReconcilerError? = nil) {
            self.app = app
            self.detection = detection
            self.error = error
        }

        private enum CodingKeys: String, CodingKey { case bundleId, environment, error, exitCode }

        /// The detection's own keys (`since`, `until`, `environment`, `windows`) with `bundleId`;
        /// where it could not look, `environment`, `error` and `exitCode`.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(app.bundleId, forKey: .bundleId)
            if let detection {
                try detection.encode(to: encoder)
            } else {
                try container.encode(app.environment.rawValue, forKey: .environment)
                try container.encode(error?.description, forKey: .error)
                try container.encode(error?.exitCode, forKey: .exitCode)
            }
        }
    }

    /// One app and environment's windows; `app` names it in the command that recovers them (with several).
    private func printText(_ detection: OutageDetector.Detection, app: AppTarget?) {
        let scope = "since \(detection.since) (\(detection.environment))"
        guard !detection.windows.isEmpty else {
            print("no failed deliveries \(scope)")
            return
        }
        let select = app.map { " --app \($0.bundleId) --environment \($0.environment.rawValue.lowercased())" } ?? ""
        print("failed deliveries \(scope): \(detection.windows.count) window\(detection.windows.count == 1 ? "" : "s")")
        for window in detection.windows {
            let retrying =
                detection.environment == .production
                ? "Apple is still retrying \(window.stillRetrying) of them"
                : "the sandbox does not retry"
            print(
                "  \(window.start) → \(window.end): \(Plural.count(window.notifications, "notification")) not delivered; \(retrying)"
            )
            print("    attempts: " + window.attemptsByResult.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
            print("    recover:  reconciler run --start \(window.start) --end \(window.end)\(select)")
        }
    }
}
