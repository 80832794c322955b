import AppStoreServer
import ArgumentParser
import Foundation
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerStore

struct RejectionsCommand: AsyncParsableCommand, UsesAppsOptions {
    static let configuration = CommandConfiguration(
        commandName: "rejections",
        abstract:
            "List the quarantine (signed values that failed verification) and the customers and shards runs gave up on; apply a quarantined notification again.",
        discussion: """
            A run quarantines a payload the first time it meets it (and exits 4), reports it again on every run \
            that meets it, and never lets it hold the schedule back. Look at each one (`reconciler inspect` shows \
            why it failed: `reconciler rejections --show HASH | reconciler inspect -`), then acknowledge it so \
            alerts on unacknowledged payloads clear. An acknowledged payload stays quarantined.

            The webhook quarantines an authentic notification (signature and chain verified) that this release \
            cannot decode (INVALID_PAYLOAD, MISSING_SIGNED_DATE: a field Apple added or changed) with its exact \
            bytes, source `webhook`, and answers Apple 200 so it is not lost; it is filed under the app and \
            environment it names, or under `(app unreadable)` when even they cannot be read. After upgrading, \
            `--retry` handles it again through the webhook's verified handler: when it decodes it is applied (to \
            the purchase and the change feed, as a live notification; not forwarded) and leaves the quarantine; \
            otherwise it stays, with the new reason, and the command exits 4.

            A customer whose transaction history, or a shard of the notification history, that Apple refused or \
            that failed in --give-up-after attempts of its run in a row is given up (the run exits 4) so its window \
            can finish: it is listed here with the last error. Check it by hand (`reconciler repair \
            --transaction-id ID` for a customer; `reconciler run --start --end` over a shard's range), then \
            acknowledge it by its transaction id or its whole shard name.

              reconciler rejections                     # unacknowledged ones
              reconciler rejections --all --json
              reconciler rejections --ack 3f2a9c1d --note "forged in the security drill"
              reconciler rejections --ack 2000000100000123 --note "repaired by hand"
              reconciler rejections --ack 2000000100000123 --app com.example.two \\
                  --environment production
              reconciler rejections --retry 7b0c5e9e-2f41-4a8e-9d57-1c2a3b4d5e6f

            It lists every app and environment of the configuration file (--config, RECONCILER_CONFIG), each \
            under its own `== bundle (Environment)` header, or the one app of the APP_STORE_* variables; --app \
            and --environment narrow it. --json items carry their bundleId and environment. --ack acknowledges \
            in the one app and environment where the value matches; where it matches in several (a transaction \
            id given up in two apps), it acknowledges nothing and asks for --app (and --environment).
            """)

    @Flag(help: "Also list acknowledged payloads.") var all = false
    @Flag(help: "Print JSON instead of a table.") var json = false
    @Option(
        help: ArgumentHelp(
            "Acknowledge one payload (by notificationUUID or the first 8 or more characters of its SHA-256), or a customer or shard given up (by its transaction id or shard name).",
            valueName: "uuid-or-hash"))
    var ack: String?
    @Option(help: ArgumentHelp("A note stored with --ack.", valueName: "text")) var note: String?
    @Option(help: ArgumentHelp("Print the signed value of one payload (by SHA-256) for `reconciler inspect -`.", valueName: "hash"))
    var show: String?
    @Option(
        help: ArgumentHelp(
            "Handle a notification the webhook quarantined again (by notificationUUID or the first 8 or more characters of its SHA-256): applied and removed from the quarantine when it now decodes.",
            valueName: "uuid-or-hash"))
    var retry: String?

    @OptionGroup var options: StoredDataOptions

    func validate() throws {
        if note != nil, ack == nil { throw ValidationError("--note goes with --ack") }
        if [ack, show, retry].compactMap(\.self).count > 1 { throw ValidationError("give one of --ack, --show and --retry") }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        guard let targets = try app.storedScope().apps else {
            throw ReconcilerError.configuration(
                "no app: give a configuration file (--config, RECONCILER_CONFIG), or set APP_STORE_BUNDLE_ID (or --bundle-id)")
        }
        try await database.withCurrentSchema(logger: logger) { database in
            let ledger = RunLedger(database: database)
            if let show {
                guard let payload = try await ledger.quarantinedSignedPayload(sha256: show.lowercased()) else {
                    throw ReconcilerError.configuration("no quarantined payload has the SHA-256 \(show) (give the whole hash)")
                }
                print(payload)
                return
            }
            if let ack {
                try await acknowledge(ack, in: try await owner(of: ack, among: targets, ledger: ledger), ledger: ledger)
                return
            }
            if let retry {
                try await self.retry(retry, database: database, ledger: ledger)
                return
            }
            var sections: [(app: AppTarget, payloads: [RunLedger.QuarantinedPayload], givenUp: [RunLedger.GivenUp])] = []
            for target in targets {
                sections.append(
                    (target, try await ledger.quarantinedPayloads(app: target, all: all), try await ledger.givenUp(app: target, all: all)))
            }
            // Notifications the webhook quarantined without being able to read their app.
            let unattributed = try await ledger.unattributedQuarantinedPayloads(all: all)
            if json {
                try StandardOutput.printJSON(
                    sections.flatMap { section in
                        section.payloads.map { Entry(app: section.app, item: .payload($0)) }
                            + section.givenUp.map { Entry(app: section.app, item: .givenUp($0)) }
                    } + unattributed.map { Entry(app: nil, item: .payload($0)) })
                return
            }
            for section in sections {
                if sections.count > 1 { print("== \(section.app)") }
                printGivenUp(section.givenUp)
                printPayloads(section.payloads)
                if sections.count > 1 { print("") }
            }
            if !unattributed.isEmpty {
                print("== (app unreadable): notifications the webhook quarantined")
                printPayloads(unattributed)
            }
        }
    }

    /// The one app and environment where `selector` names something: with several, the one it
    /// matches in, or an error that asks for --app when it matches in more than one.
    private func owner(of selector: String, among targets: [AppTarget], ledger: RunLedger) async throws -> AppTarget {
        guard targets.count > 1 else { return targets[0] }
        var matching: [AppTarget] = []
        for target in targets {
            let payloads = try await ledger.quarantinedPayloads(matching: selector, app: target)
            let givenUp = try await ledger.givenUpCount(matching: selector, app: target)
            if !payloads.isEmpty || givenUp > 0 { matching.append(target) }
        }
        guard matching.count <= 1 else {
            throw ReconcilerError.configuration(
                "\(selector) matches in \(matching.map(\.description).joined(separator: " and ")): choose one with \(AppTarget.choices(matching)); nothing was acknowledged"
            )
        }
        guard let owner = matching.first else {
            throw ReconcilerError.configuration(
                "nothing of \(targets.map(\.description).joined(separator: ", ")) matches \(selector): give a payload's notificationUUID or at least 8 characters of its hash, "
                    + "or a given-up customer's transaction id or shard name")
        }
        return owner
    }

    /// `--ack` in one app and environment: a quarantined payload, else the customers or shards given up under that name.
    private func acknowledge(_ selector: String, in target: AppTarget, ledger: RunLedger) async throws {
        switch try await ledger.acknowledge(selector, note: note, app: target) {
        case .acknowledged(let hash): print("acknowledged \(hash) (\(target))")
        case .notFound:
            let givenUp = try await ledger.acknowledgeGivenUp(selector, note: note, app: target)
            guard givenUp == 0 else {
                print("acknowledged \(selector) (given up by \(givenUp) run\(givenUp == 1 ? "" : "s"); \(target))")
                return
            }
            throw ReconcilerError.configuration(
                "nothing of \(target.bundleId) (\(target.environment)) matches \(selector): give a payload's notificationUUID or at least 8 characters of its hash, "
                    + "or a given-up customer's transaction id or shard name")
        case .ambiguous(let count):
            throw ReconcilerError.configuration("\(selector) matches \(count) quarantined payloads: give more of the hash")
        }
    }

    /// `--retry`: the notification the webhook quarantined that `selector` names (in any app),
    /// handled again by the configured apps' verified handlers.
    private func retry(_ selector: String, database: Database, ledger: RunLedger) async throws {
        let matches = try await ledger.quarantinedNotifications(matching: selector)
        guard matches.count == 1, let quarantined = matches.first else {
            throw ReconcilerError.configuration(
                matches.isEmpty
                    ? "no notification the webhook quarantined matches \(selector): give its notificationUUID or at least 8 characters of its hash"
                    : "\(selector) matches \(matches.count) quarantined notifications: give more of the hash")
        }
        let (configuration, targets, verifiers) = try app.verifyingTargets()
        let handlers = zip(targets, verifiers).map { target, verifier in
            NotificationHandler(scope: target.scope, verifier: verifier, database: database)
        }
        let router = try NotificationRouter(handlers: handlers, knownApps: configuration.knownBundleIds)
        let name = quarantined.notificationUUID ?? String(quarantined.payloadSHA256.prefix(16))
        switch try await router.retry(quarantined) {
        case .applied(let result, let target):
            print(
                "applied \(result.notificationUUID) (\(result.typeAndSubtype), \(result.outcome.rawValue)) to \(target); "
                    + "\(quarantined.payloadSHA256.prefix(16)) left the quarantine")
        case .stillUndecodable(let error):
            throw ReconcilerError(
                .needsAttention, "\(name) still does not decode (\(error.reason.rawValue): \(error.detail)); it stays quarantined")
        case .notConfigured(let unconfigured):
            throw ReconcilerError(.needsAttention, "\(name) decodes, but is \(unconfigured.description); it stays quarantined")
        }
    }

    /// One item of `--json`: a quarantined payload (`kind` "payload") or a customer or shard given up
    /// (`kind` "customer" or "shard"), with its app's `bundleId` and `environment`.
    struct Entry: Encodable {
        enum Item {
            case payload(RunLedger.QuarantinedPayload)
            case givenUp(RunLedger.GivenUp)
        }

        /// `nil`: a notification the webhook quarantined without being able to read its app
        /// (printed with an empty `bundleId` and `environment`).
        var app: AppTarget?
        var item: Item

        private enum CodingKeys: String, CodingKey { case kind, bundleId, environment }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(app?.bundleId ?? "", forKey: .bundleId)
            try container.encode(app?.environment.rawValue ?? "", forKey: .environment)
            switch item {
            case .payload(let payload):
                try container.encode("payload", forKey: .kind)
                try payload.encode(to: encoder)
            case .givenUp(let given):
                try container.encode(given.kind.rawValue, forKey: .kind)
                try given.encode(to: encoder)
            }
        }
    }

    private func printPayloads(_ payloads: [RunLedger.QuarantinedPayload]) {
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

    private func printGivenUp(_ items: [RunLedger.GivenUp]) {
        guard !items.isEmpty else {
            print(all ? "no customer or shard was given up" : "no unacknowledged customer or shard given up")
            print("")
            return
        }
        let iso = ISO8601DateFormatter()
        print("given up              run  kind      failures  subject                                           reason")
        for item in items {
            let acknowledged =
                item.acknowledgedAt.map { "  (acknowledged \(iso.string(from: $0))\(item.acknowledgedNote.map { ": \($0)" } ?? ""))" } ?? ""
            let failures = item.failureKind == .permanent ? "refused" : "\(item.failures) in a row"
            print(
                "\(iso.string(from: item.givenUpAt))  \(String(format: "%5lld", item.runId))  \(pad(item.kind.rawValue, 8))  \(pad(failures, 8))  "
                    + "\(pad(item.subject, 48))  \(item.reason)\(acknowledged)")
        }
        print("")
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
