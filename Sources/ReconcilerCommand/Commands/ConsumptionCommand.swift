import AppStoreServer
import ArgumentParser
import Foundation
import Logging
import Reconciler
import ReconcilerConfiguration
import ReconcilerDomain
import ReconcilerShared
import ReconcilerStore

/// `reconciler consumption`: the consumption requests (a customer asked Apple for a refund, and
/// Apple asks the app for consumption data within 12 hours) and the answers to them.
struct ConsumptionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "consumption",
        abstract: "Consumption requests: list them with their deadlines, send Apple the answers, ack those that need nothing more.",
        discussion: """
            A CONSUMPTION_REQUEST notification says a customer asked Apple for a refund; Apple wants the app's \
            consumption data within 12 hours of its first send attempt (Send Consumption Information). The \
            reconciler stores each request with that deadline (respondBy), fixed when it is first recorded: 12 \
            hours after the earliest send attempt in Apple's history (12 hours after its signedDate for one the \
            live webhook received). Runs query them first and forward the open ones first. A request is open \
            until an answer Apple accepted is sent (`send`), it is acked (`ack`: the app answered it itself, or \
            it is deliberately not answered), or its deadline passes; open requests are what the gauges and \
            the alert count. With `consumption: {liveRequests: ignore}` in the configuration file (or \
            RECONCILER_CONSUMPTION_LIVE_REQUESTS=ignore without one), the requests the live webhook received \
            are the app's to answer and only those a run recovered count.

              reconciler consumption list --open
              reconciler consumption send --transaction-id 2000000100000317 \\
                  --customer-consented --delivery-status DELIVERED \\
                  --sample-content-provided false --refund-preference GRANT_PRORATED \\
                  --consumption-percentage 25000
              reconciler consumption ack --transaction-id 2000000100000318 \\
                  --note "answered by the app"
            """,
        subcommands: [ListCommand.self, SendCommand.self, AckCommand.self, RespondCommand.self])

    struct ListCommand: AsyncParsableCommand, UsesAppsOptions {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List the stored consumption requests, soonest deadline first, with whether an answer was sent.",
            discussion: """
                Each request: its transaction (what `consumption send --transaction-id` names), original \
                transaction, app and environment, the customer's reason, when Apple first sent it, its \
                deadline and the time left (open), or expired, or answered (an answer Apple accepted was sent), \
                or acked (`consumption ack`: it needs nothing more). --open lists only the requests neither \
                answered nor acked nor past their deadline (with liveRequests: ignore, only those a run \
                recovered). --json prints a JSON array with the same fields (times in UNIX milliseconds), and \
                who answered (answeredBy: command for `consumption send`) or acked it (ackedAt, ackedBy, \
                ackNote). It covers every app and environment of the configuration file, or the one app of the \
                APP_STORE_* variables; --app and --environment narrow it.

                  reconciler consumption list --open
                  reconciler consumption list --json
                """)

        @Flag(help: "Only requests without an answer or an ack and before their deadline.") var open = false
        @Flag(help: "Print a JSON array instead of a table.") var json = false
        @Option(help: ArgumentHelp("List at most this many.", valueName: "n")) var limit: Int = 1000

        @OptionGroup var options: StoredDataOptions

        func validate() throws {
            guard limit >= 1 else { throw ValidationError("--limit must be at least 1") }
        }

        /// One request as `--json` prints it.
        struct Entry: Encodable {
            var request: ConsumptionRequests.Request
            var state: ConsumptionRequestDeadline.State

            private enum CodingKeys: String, CodingKey {
                case notificationUUID, bundleId, environment, transactionId, originalTransactionId, reason, signedDate, firstSentAt, respondBy,
                    state, answeredAt, answeredBy, ackedAt, ackedBy, ackNote, runId
            }

            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(request.notificationUUID, forKey: .notificationUUID)
                try container.encode(request.bundleId, forKey: .bundleId)
                try container.encode(request.environment, forKey: .environment)
                try container.encode(request.transactionId, forKey: .transactionId)
                try container.encode(request.originalTransactionId, forKey: .originalTransactionId)
                try container.encode(request.reason, forKey: .reason)
                try container.encode(request.signedDate, forKey: .signedDate)
                try container.encode(request.firstSentAt, forKey: .firstSentAt)
                try container.encode(request.respondBy, forKey: .respondBy)
                try container.encode(state, forKey: .state)
                try container.encode(request.answeredAt.map(Timestamp.init), forKey: .answeredAt)
                try container.encode(request.answeredBy, forKey: .answeredBy)
                try container.encode(request.ackedAt.map(Timestamp.init), forKey: .ackedAt)
                try container.encode(request.ackedBy, forKey: .ackedBy)
                try container.encode(request.ackNote, forKey: .ackNote)
                try container.encode(request.runId, forKey: .runId)
            }
        }

        func run() async throws {
            let logger = logging.makeLogger()
            let scope = try app.storedScope()
            let apps = try scope.appsOnly()
            let watchingLive = try ConsumptionCommand.watchingLive(scope)
            let now = Timestamp.now
            let requests = try await database.withCurrentSchema(logger: logger) { database in
                let store = ConsumptionRequests(logger: logger)
                return try await database.transaction { [open, limit] in
                    try await store.list(apps: apps, openAt: open ? now : nil, watchingLive: watchingLive, limit: limit, on: $0)
                }
            }
            if json {
                try StandardOutput.printJSON(
                    requests.map { Entry(request: $0, state: $0.state(at: now)) }, escapingSlashes: false, dates: .deferredToDate)
                return
            }
            guard !requests.isEmpty else {
                print(open ? "no consumption request waits for an answer" : "no consumption request is stored")
                return
            }
            let several = Set(requests.map { "\($0.bundleId) \($0.environment)" }).count > 1
            let header = ["TRANSACTION", "ORIGINAL", "RESPOND BY", "STATE", "REASON", "FIRST SENT"] + (several ? ["APP"] : [])
            let widths = [18, 18, 25, 21, 26, 25, 0]
            func line(_ fields: [String]) -> String {
                zip(fields, widths).map { Self.column($0, $1) }.joined(separator: " ").trimmingCharacters(in: .whitespaces)
            }
            print(line(header))
            for request in requests {
                let state: String
                switch request.state(at: now) {
                case .answered: state = "answered"
                case .acked: state = "acked"
                case .expired: state = "EXPIRED"
                case .open: state = "open, " + Self.timeLeft(request.respondBy - now) + " left"
                }
                print(
                    line(
                        [
                            request.transactionId ?? "-", request.originalTransactionId ?? "-",
                            request.respondBy.description, state,
                            request.reason ?? "-", request.firstSentAt.map(\.description) ?? "(live)",
                        ] + (several ? ["\(request.bundleId) (\(request.environment))"] : [])))
            }
        }

        static func column(_ text: String, _ width: Int) -> String {
            text.count >= width ? text : text.padding(toLength: width, withPad: " ", startingAt: 0)
        }

        /// `11h 58m`, `45m`.
        static func timeLeft(_ left: Duration) -> String {
            let minutes = max(left.milliseconds / 60_000, 0)
            return minutes >= 60 ? "\(minutes / 60)h \(minutes % 60)m" : "\(minutes)m"
        }
    }

    struct SendCommand: AsyncParsableCommand, UsesAppsOptions {
        static let configuration = CommandConfiguration(
            commandName: "send",
            abstract: "Send Apple the answer to a consumption request (Send Consumption Information V2) and record it.",
            discussion: """
                The answer goes to the app and environment of the stored CONSUMPTION_REQUEST for the transaction \
                (with requests of several apps for it, choose with --app and --environment), through the app's \
                request budget shared with its other processes. Every field is checked against Apple's rules \
                before anything is sent: the customer's consent (without it, do not answer), the delivery \
                statuses (DELIVERED, UNDELIVERED_QUALITY_ISSUE, UNDELIVERED_WRONG_ITEM, UNDELIVERED_SERVER_OUTAGE, \
                UNDELIVERED_OTHER), the refund preferences (DECLINE, GRANT_FULL, GRANT_PRORATED), the \
                percentage in milliunits (0 to 100000; 0 when not DELIVERED; none for an auto-renewable \
                subscription, whose Apple computes; above 0 and below 100000 with GRANT_PRORATED for the other \
                product types), and no answer for a Family Sharing transaction. The answer is recorded as being \
                sent before Apple is called, and completed with Apple's reply after; `consumption list` then \
                shows the request answered. A request already answered, acked, or with an answer being sent (or \
                one whose reply was never recorded) is refused, nothing sent, unless --again.

                Exit codes: 0 Apple accepted it (202); 1 bad input (nothing sent), no stored request for the \
                transaction, a request answered, acked or being sent without --again (nothing sent), or Apple \
                refused it (a 4xx; Apple's error code is shown); 2 rate limited (429), an App Store server error \
                (5xx) or no answer: send it again; 4 Apple accepted it but the database could not record that: \
                do not send it again, ack it once the database is back.

                  reconciler consumption send --transaction-id 2000000100000317 \\
                      --customer-consented --delivery-status DELIVERED \\
                      --sample-content-provided false --consumption-percentage 100000
                """)

        @Option(help: ArgumentHelp("The CONSUMPTION_REQUEST's transactionId (`consumption list` shows it).", valueName: "id"))
        var transactionId: String
        @Flag(help: "The customer consented to share consumption data with Apple (required: without consent, do not answer).")
        var customerConsented = false
        @Option(
            help: ArgumentHelp(
                "DELIVERED, UNDELIVERED_QUALITY_ISSUE, UNDELIVERED_WRONG_ITEM, UNDELIVERED_SERVER_OUTAGE or UNDELIVERED_OTHER.", valueName: "status"))
        var deliveryStatus: String
        @Option(
            help: ArgumentHelp("Whether the app offered a free sample, trial or description before the purchase: true or false.", valueName: "bool"))
        var sampleContentProvided: String
        @Option(help: ArgumentHelp("DECLINE, GRANT_FULL or GRANT_PRORATED.", valueName: "pref")) var refundPreference: String?
        @Option(help: ArgumentHelp("The share consumed, in milliunits: 0 to 100000 (100000 is all of it).", valueName: "n"))
        var consumptionPercentage: Int?
        @Flag(help: "Send even when the request was answered, acked, or has an answer being sent (or one whose reply was never recorded).")
        var again = false

        @OptionGroup var options: AppleOptions

        func run() async throws {
            let logger = logging.makeLogger()
            let input = ConsumptionAnswers.Input(
                transactionId: transactionId, customerConsented: customerConsented, deliveryStatus: deliveryStatus,
                sampleContentProvided: sampleContentProvided, refundPreference: refundPreference, consumptionPercentage: consumptionPercentage)
            // What needs no database and no configuration first: bad input is refused before anything else.
            _ = try ConsumptionAnswers.body(of: input)
            let targets = try app.loadTargets(api: api).targets
            let prepared = try await database.withCurrentSchema(logger: logger) { database in
                return try await ConsumptionAnswers.prepare(input, apps: targets.map(\.app), database: database)
            }
            guard
                let target = targets.first(where: {
                    $0.app.bundleId == prepared.target.bundleId && $0.app.environment == prepared.target.environment
                })
            else {
                throw ReconcilerError.configuration("\(prepared.target) is not configured: no key to send its answer with")
            }
            let now = Timestamp.now
            switch prepared.request.state(at: now) {
            case .expired:
                logger.warning(
                    "the request's deadline has passed; sending the answer anyway",
                    metadata: ["respondBy": "\(prepared.request.respondBy)"])
            case .answered, .acked:
                if again { logger.notice("the request was \(prepared.request.state(at: now).rawValue); sending this answer too (--again)") }
            case .open: break
            }
            let interrupted = ReconcilerError(
                .interrupted,
                "interrupted: the answer may or may not have reached Apple; send it again (with --again if `send` says an answer "
                    + "is being sent: the interrupted one stays marked so), or ack the request if Apple has it")
            try await database.runWork(logger: logger, sharing: [target.sharing([.sendConsumptionInformation])], interrupted: interrupted) {
                [again] database in
                try await ConsumptionAnswers.send(prepared, again: again, client: target.client, origins: target.origins, database: database)
            }
            let left = prepared.request.respondBy - now
            print(
                "accepted: Apple received the consumption information for transaction \(prepared.transactionId) "
                    + "(\(prepared.target.bundleId), \(prepared.target.environment.rawValue); request \(prepared.request.notificationUUID), "
                    + (left > .zero
                        ? "answered \(ListCommand.timeLeft(left)) before its deadline \(prepared.request.respondBy))"
                        : "answered after its deadline \(prepared.request.respondBy))"))
        }
    }

    /// The apps whose live requests count as waiting for an answer (`nil`: every app's), for `list --open`.
    static func watchingLive(_ scope: StoredScope) throws -> [AppTarget]? {
        guard let targets = scope.targets else { return try ConsumptionOptions.settings().liveRequests == .watch ? nil : [] }
        return targets.filter { $0.consumption.liveRequests == .watch }.map(\.app)
    }

    struct AckCommand: AsyncParsableCommand, UsesAppsOptions {
        static let configuration = CommandConfiguration(
            commandName: "ack",
            abstract: "Record that a consumption request needs nothing more from the reconciler.",
            discussion: """
                For a request the app answered itself (it gets the requests forwarded), or one deliberately not \
                answered (the customer did not consent): it leaves `consumption list --open`, the gauges and the \
                ReconcilerConsumptionRequestDeadline alert, and `consumption list` shows it acked, with who acked \
                it (--by, default $USER) and the note. Every stored request for the transaction is acked (with \
                requests of several apps for it, choose with --app and --environment). Nothing is sent to Apple. \
                A request acked before keeps its first ack.

                Exit codes: 0 acked, or acked before (the first ack is kept and shown); 1 no stored request for the \
                transaction, requests for it in several apps or environments, or bad input (nothing written).

                  reconciler consumption ack --transaction-id 2000000100000317 \\
                      --note "answered by the app"
                """)

        @Option(help: ArgumentHelp("The CONSUMPTION_REQUEST's transactionId (`consumption list` shows it).", valueName: "id"))
        var transactionId: String
        @Option(help: ArgumentHelp("Why it needs nothing more (stored and shown by `consumption list --json`).", valueName: "text"))
        var note: String?
        @Option(help: ArgumentHelp("Who acks it (default $USER, else unknown).", valueName: "name"))
        var by: String?

        @OptionGroup var options: StoredDataOptions

        func run() async throws {
            let logger = logging.makeLogger()
            let apps = try app.storedScope().appsOnly()
            let by = self.by ?? Env.value("USER") ?? "unknown"
            let outcome = try await database.withCurrentSchema(logger: logger) { [transactionId, note] database in
                return try await ConsumptionAcks.ack(transactionId: transactionId, apps: apps, by: by, note: note, database: database)
            }
            for request in outcome.requests {
                let what =
                    "the consumption request for transaction \(transactionId) (\(outcome.target.bundleId), \(outcome.target.environment.rawValue); request \(request.notificationUUID))"
                let ack =
                    (request.ackedBy.map { "by \($0)" } ?? "") + (request.ackedAt.map { " at \(Timestamp($0))" } ?? "")
                    + (request.ackNote.map { ": \($0)" } ?? "")
                if outcome.newlyAcked.contains(request.notificationUUID) {
                    print("acked: \(what) needs nothing more from the reconciler (\(ack))")
                } else {
                    print("already acked: \(what), \(ack); the first ack is kept")
                }
            }
        }
    }

    struct RespondCommand: AsyncParsableCommand, UsesAppsOptions {
        static let configuration = CommandConfiguration(
            commandName: "respond",
            abstract: "Answer every open consumption request now by the configuration's consumption policy.",
            discussion: """
                Every open request (neither answered nor acked nor past its deadline) of the apps whose \
                configuration file section `consumption:` gives a policy is answered now by it, soonest deadline \
                first, through each app's request budget shared with its other processes; answerAfter does not \
                apply (the operator chose to answer). Each answer is recorded as being sent before Apple is called \
                (answeredBy: policy), so a rerun sends nothing again; a request whose answer was never recorded is \
                not sent again (`consumption send --again` or `consumption ack` settle it). A request the policy \
                would answer against Apple's rules for its purchase (a percentage for a subscription, \
                GRANT_PRORATED without one for a consumable, Family Sharing) is listed, not sent. --dry-run prints \
                the answers it would send, one JSON object a line, and sends nothing; without it each answer sent \
                is printed the same way, with its outcome.

                Exit codes: 0 every answer planned was accepted (or there was none); 1 bad usage, no policy, a \
                policy without customerConsented: true, or one that breaks Apple's rules for a request; 2 a 429, \
                5xx or no answer left some unsent: run it again; 4 Apple refused an answer, or an answer's \
                outcome was never recorded.

                  reconciler consumption respond --dry-run
                  reconciler consumption respond --app com.example.one --environment production
                """)

        @Flag(help: "Print the answers it would send, and send nothing.") var dryRun = false

        @OptionGroup var options: AppleOptions

        /// One answer as printed: the request, where it goes, and the body Apple is sent.
        struct Line: Encodable {
            var bundleId: String
            var environment: AppStoreEnvironment
            var transactionId: String
            var notificationUUID: String
            var productId: String?
            var respondBy: Timestamp
            var answer: ConsumptionRequest
            var outcome: String?

            init(_ planned: ConsumptionResponder.Planned, outcome: String? = nil) {
                (bundleId, environment, transactionId, notificationUUID) = (
                    planned.target.bundleId, planned.target.environment, planned.transactionId, planned.request.notificationUUID
                )
                (productId, respondBy, answer, self.outcome) = (planned.productId, planned.request.respondBy, planned.body, outcome)
            }

            var text: String {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? ""
            }
        }

        func run() async throws {
            let logger = logging.makeLogger()
            let loaded = try app.loadTargets(api: api)
            let targets = loaded.targets.compactMap { target in
                ConsumptionResponder.Target(
                    app: target.app, settings: target.configuration.consumption, client: target.client, origins: target.origins)
            }
            guard !targets.isEmpty else {
                throw ReconcilerError.configuration(
                    "no consumption policy is configured for \(loaded.targets.map(\.app.description).joined(separator: ", ")): add a consumption "
                        + "section (customerConsented, deliveryStatus, sampleContentProvided, ...) to the configuration file")
            }
            let commandTargets = loaded.targets.filter { target in targets.contains { $0.app == target.app } }
            let dryRun = self.dryRun
            let outcome = try await database.runWork(
                logger: logger, sharing: dryRun ? [] : commandTargets.map { $0.sharing([.sendConsumptionInformation]) }
            ) { database in
                let plan = try await ConsumptionResponder.plan(targets, at: .now, database: database)
                if dryRun { return ConsumptionResponder.Outcome(plan: plan) }
                return try await ConsumptionResponder.respond(plan, targets: targets, answeredBy: .policy, database: database)
            }
            let plan = outcome.plan
            if dryRun {
                for planned in plan.planned { print(Line(planned).text) }
            } else {
                for planned in outcome.accepted { print(Line(planned, outcome: "accepted").text) }
                for (planned, error) in outcome.failed { print(Line(planned, outcome: "failed: \(error.description)").text) }
                for planned in outcome.settled { print(Line(planned, outcome: "not sent: answered or acked meanwhile").text) }
                for planned in outcome.expired { print(Line(planned, outcome: "not sent: its deadline passed").text) }
            }
            for unanswerable in plan.unanswerable {
                FileHandle.standardError.write(
                    Data(
                        "not answered by policy: transaction \(unanswerable.request.transactionId ?? "-") (\(unanswerable.request.bundleId), \(unanswerable.request.environment)): \(unanswerable.why)\n"
                            .utf8))
            }
            let sent = dryRun ? "would send" : "sent"
            let count = dryRun ? plan.planned.count : outcome.accepted.count + outcome.failed.count
            FileHandle.standardError.write(
                Data(
                    "\(sent) \(Plural.count(count, "answer")); \(plan.unanswerable.count) against Apple's rules, \(plan.outcomeUnknown.count) with an unrecorded outcome, \(outcome.settled.count + outcome.expired.count) settled or expired meanwhile\n"
                        .utf8))
            if let ending = outcome.ending { throw ending }
        }
    }
}
