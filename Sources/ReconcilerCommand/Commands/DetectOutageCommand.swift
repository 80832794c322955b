import AppStoreServer
import ArgumentParser
import Foundation
import Reconciler
import ReconcilerShared

struct DetectOutageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "detect-outage",
        abstract: "Find webhook outages: notifications that did not reach the webhook, grouped into windows.",
        discussion: """
            Calls Get Notification History with onlyFailures=true over the last --since, groups the failed first \
            send attempts into windows, and prints each with its count per sendAttemptResult and how many Apple is \
            still retrying (production retries for about 6.5 days; the sandbox never retries). \
            `reconciler run --detected` recovers the windows found.

              reconciler detect-outage --since 7d
              reconciler detect-outage --since 2d --json
            """)

    @Option(help: ArgumentHelp("How far back to look (default 7d; at most 180d, 30d in the sandbox).", valueName: "duration")) var since: String =
        "7d"
    @Option(help: ArgumentHelp("Failures closer than this form one window (default 30m).", valueName: "duration")) var mergeGap: String = "30m"
    @Flag(help: "Print JSON.") var json = false

    @OptionGroup var app: AppOptions
    @OptionGroup var api: APIOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.makeLogger()
        let target = try app.commandTarget(api: api)
        let client = target.client
        guard let back = TimeArgument.duration(since), back > 0 else {
            throw CommandError.configuration("--since: \(since) is not a duration such as 7d")
        }
        guard let gap = TimeArgument.duration(mergeGap) else { throw CommandError.configuration("--merge-gap: \(mergeGap) is not a duration") }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let detection: OutageDetector.Detection
        do {
            // With a database, the requests come out of the budget the app's other processes share.
            let sharing = [target.sharing([.getNotificationHistory])]
            detection = try await database.sharingBudgetIfConfigured(logger: logger, sharing: sharing) {
                try await OutageDetector(client: client, mergeGap: gap).detect(since: now - back, until: now)
            }
        } catch let error as AppStoreServerAPIError {
            switch error {
            case .unauthorized, .badRequest: throw CommandError.configuration(error.operatorDescription)
            default: throw CommandError.partial(error.description)
            }
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(detection), as: UTF8.self))
            return
        }
        let scope = "since \(TimeArgument.iso8601(detection.since)) (\(detection.environment))"
        guard !detection.windows.isEmpty else {
            print("no failed deliveries \(scope)")
            return
        }
        print("failed deliveries \(scope): \(detection.windows.count) window\(detection.windows.count == 1 ? "" : "s")")
        for window in detection.windows {
            let retrying =
                detection.environment == "Production"
                ? "Apple is still retrying \(window.stillRetrying) of them"
                : "the sandbox does not retry"
            print(
                "  \(TimeArgument.iso8601(window.start)) → \(TimeArgument.iso8601(window.end)): \(window.notifications) notifications not delivered; \(retrying)"
            )
            print("    attempts: " + window.attemptsByResult.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
            print("    recover:  reconciler run --start \(TimeArgument.iso8601(window.start)) --end \(TimeArgument.iso8601(window.end))")
        }
    }
}
