import AppStoreServer
import ArgumentParser
import Foundation
import Reconciler

struct RejectionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rejections",
        abstract: "List the quarantine: signed values from Apple that failed verification, never applied.",
        discussion: """
            A run quarantines a payload the first time it meets it (and exits 4), reports it again on every run \
            that meets it, and never lets it hold the schedule back. Look at each one (`reconciler inspect` shows \
            why it failed: `reconciler rejections --show HASH | reconciler inspect -`), then acknowledge it so \
            alerts on unacknowledged payloads clear. An acknowledged payload stays quarantined.

              reconciler rejections                     # unacknowledged ones
              reconciler rejections --all --json
              reconciler rejections --ack 3f2a9c1d --note "forged test payload from the security drill"
            """)

    @Flag(help: "Also list acknowledged payloads.") var all = false
    @Flag(help: "Print JSON instead of a table.") var json = false
    @Option(
        help: ArgumentHelp(
            "Acknowledge one payload, by notificationUUID or the first 8 or more characters of its SHA-256.",
            valueName: "uuid-or-hash"))
    var ack: String?
    @Option(help: ArgumentHelp("A note stored with --ack.", valueName: "text")) var note: String?
    @Option(help: ArgumentHelp("Print the signed value of one payload (by SHA-256) for `reconciler inspect -`.", valueName: "hash"))
    var show: String?

    @OptionGroup var app: AppOptions
    @OptionGroup var database: DatabaseOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        if note != nil, ack == nil { throw ValidationError("--note goes with --ack") }
        if ack != nil, show != nil { throw ValidationError("give --ack or --show, not both") }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        guard let bundleId = app.resolvedBundleId else {
            throw CommandError.configuration("no bundle id: set APP_STORE_BUNDLE_ID or --bundle-id")
        }
        let environment = try app.resolvedEnvironment.rawValue
        try await database.withDatabase(logger: logger) { database in
            do { try await Migrator().requireCurrent(database.client, logger: logger) } catch let error as Migrator.MigrationError {
                throw CommandError.configuration(error.description)
            }
            let ledger = RunLedger(database: database)
            if let show {
                guard let payload = try await ledger.quarantinedSignedPayload(sha256: show.lowercased()) else {
                    throw CommandError.configuration("no quarantined payload has the SHA-256 \(show) (give the whole hash)")
                }
                print(payload)
                return
            }
            if let ack {
                switch try await ledger.acknowledge(ack, note: note, environment: environment, bundleId: bundleId) {
                case .acknowledged(let hash): print("acknowledged \(hash)")
                case .notFound:
                    throw CommandError.configuration(
                        "no quarantined payload of \(bundleId) (\(environment)) matches \(ack): give its notificationUUID or at least 8 characters of its hash"
                    )
                case .ambiguous(let count):
                    throw CommandError.configuration("\(ack) matches \(count) quarantined payloads: give more of the hash")
                }
                return
            }
            let payloads = try await ledger.quarantinedPayloads(environment: environment, bundleId: bundleId, all: all)
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                encoder.dateEncodingStrategy = .iso8601
                print(String(decoding: try encoder.encode(payloads), as: UTF8.self))
                return
            }
            guard !payloads.isEmpty else {
                print(all ? "the quarantine is empty" : "no unacknowledged quarantined payloads")
                return
            }
            let iso = ISO8601DateFormatter()
            print(
                "sha256            first seen            last seen             seen  source                name                                   reason"
            )
            for payload in payloads {
                let name = payload.notificationUUID ?? payload.typeAndSubtype ?? "-"
                let acknowledged =
                    payload.acknowledgedAt.map { "  (acknowledged \(iso.string(from: $0))\(payload.acknowledgedNote.map { ": \($0)" } ?? ""))" } ?? ""
                print(
                    "\(payload.payloadSHA256.prefix(16))  \(iso.string(from: payload.firstSeenAt))  \(iso.string(from: payload.lastSeenAt))  "
                        + String(format: "%4d", payload.timesSeen) + "  \(pad(payload.source.rawValue, 20))  \(pad(name, 38))  "
                        + "\(payload.reason.rawValue): \(payload.detail)\(acknowledged)")
            }
        }
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
