import AppStoreServer
import Foundation
import PostgresNIO
import ReconcilerDomain
import ReconcilerMetrics
import ReconcilerShared
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// Consumption requests against a real PostgreSQL: the deadline fixed when a request is first
/// recorded, the feed's rows for notifications that change no purchase, the requests open or
/// expired at a moment the test fixes, and the checks of an answer that depend on the stored
/// purchase (nothing written when one fails).
@Suite struct ConsumptionRequestsTests: ChangeFeedTesting {
    let app: TestApp
    init() throws { app = try TestApp() }

    static let twelveHours: Int64 = 12 * 3_600_000

    func request(_ transaction: JWSTransactionDecodedPayload, uuid: String = UUID().uuidString.lowercased(), signedDate: Int64) throws -> String {
        try app.notification(
            .consumptionRequest, uuid: uuid, signedDate: signedDate, transaction: transaction, consumptionRequestReason: .fulfillmentIssue)
    }

    /// The stored deadline and first send attempt of a notification.
    func deadline(_ uuid: String, in db: TestDatabase) async throws -> (respondBy: Int64?, firstSent: Int64?) {
        let rows = try await db.client.query(
            "SELECT respond_by_ms, first_send_attempt_ms FROM notifications WHERE notification_uuid = \(uuid)", logger: Self.logger)
        for try await row in rows.decode((Int64?, Int64?).self) { return row }
        return (nil, nil)
    }

    /// An answer Apple accepted, recorded as `consumption send` records it: written `sending`, then completed.
    static func answer(_ transactionId: String, _ notificationUUID: String, in db: TestDatabase) async throws {
        let requests = ConsumptionRequests(logger: Self.logger)
        let answer = ConsumptionRequests.Answer(
            target: AppTarget(bundleId: TestApp.bundleId, environment: .production), transactionId: transactionId, notificationUUID: notificationUUID,
            body: ConsumptionRequest(customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false))
        #expect(try await db.database.transaction { try await requests.beginAnswer(answer, again: false, on: $0) } == nil)
        try await db.database.transaction { try await requests.completeAnswer(answer.sendId, with: .init(outcome: .accepted), on: $0) }
    }

    /// Live: 12 hours after its signedDate (the webhook is not told of send attempts); replayed:
    /// 12 hours after the earliest send attempt in Apple's history. Recorded again later, with
    /// other attempts, it keeps the deadline it was first recorded with.
    @Test func aRequestsDeadlineIsFixedWhenItIsFirstRecorded() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let live = UUID().uuidString.lowercased()
            _ = try await handler.handle(
                signedPayload: try request(app.oneTime("5000", purchaseDate: t0 - 60_000, signedDate: t0), uuid: live, signedDate: t0),
                source: .webhook)
            #expect(try await deadline(live, in: db) == (t0 + Self.twelveHours, nil))
            #expect(
                try await db.strings("SELECT consumption_request_reason FROM notifications WHERE notification_uuid = \(live)") == [
                    "FULFILLMENT_ISSUE"
                ])

            let replayed = UUID().uuidString.lowercased()
            var recovered = try await handler.verify(
                signedPayload: try request(app.oneTime("5001", purchaseDate: t0 - 60_000, signedDate: t0), uuid: replayed, signedDate: t0))
            recovered.firstSendAttempt = t0 + 1_500
            _ = try await handler.record([recovered], source: .history(runId: 3))
            #expect(try await deadline(replayed, in: db) == (t0 + 1_500 + Self.twelveHours, t0 + 1_500))

            // The live one again, from a run's history with its first attempt: a duplicate, unchanged.
            var again = try await handler.verify(
                signedPayload: try request(app.oneTime("5000", purchaseDate: t0 - 60_000, signedDate: t0), uuid: live, signedDate: t0))
            again.firstSendAttempt = t0 - 3_600_000
            #expect(try await handler.record([again], source: .history(runId: 4)).map(\.outcome) == [.duplicate])
            #expect(try await deadline(live, in: db) == (t0 + Self.twelveHours, nil))
            // Only consumption requests have a deadline.
            #expect(try await db.count("SELECT count(*) FROM notifications WHERE respond_by_ms IS NOT NULL") == 2)
        }
    }

    /// Every notification recorded for the first time is in the feed once: the purchase row of the
    /// change it made, or a row of kind `notification` when it changed nothing but lastSignedDate
    /// (a consumption request, a stale renewal); one with a deadline always in a row of its own,
    /// also when a change of its purchase in the same page names another. A duplicate adds nothing.
    @Test func everyNotificationRecordedForTheFirstTimeIsInTheFeedOnce() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let token = UUID().uuidString.lowercased()
            var first = app.subscription(original: "6000", period: 0, signedDate: t0)
            first.appAccountToken = token
            let subscribed = try app.notification(.subscribed, .initialBuy, signedDate: t0, transaction: first, status: .active)
            _ = try await handler.handle(signedPayload: subscribed, source: .webhook)
            let consumption = UUID().uuidString.lowercased()
            let consumptionPayload = try request(first, uuid: consumption, signedDate: t0 + 60_000)
            _ = try await handler.handle(signedPayload: consumptionPayload, source: .webhook)
            _ = try await handler.handle(signedPayload: consumptionPayload, source: .history(runId: 5))
            // Older than what the purchase reflects: stale, nothing moves, yet it was recorded.
            let stale = UUID().uuidString.lowercased()
            _ = try await handler.handle(
                signedPayload: try app.notification(.didChangeRenewalStatus, .autoRenewEnabled, uuid: stale, signedDate: t0 - 1, transaction: first),
                source: .webhook)
            // One page: a renewal and a consumption request of the same purchase.
            var renewal = app.subscription(original: "6000", period: 1, signedDate: t0 + 120_000)
            renewal.appAccountToken = token
            let renewed = UUID().uuidString.lowercased(), asked = UUID().uuidString.lowercased()
            let page = [
                try await handler.verify(
                    signedPayload: try app.notification(.didRenew, uuid: renewed, signedDate: t0 + 120_000, transaction: renewal, status: .active)),
                try await handler.verify(signedPayload: try request(renewal, uuid: asked, signedDate: t0 + 180_000)),
            ]
            _ = try await handler.record(page, source: .history(runId: 6))

            // At least: a row written twice fails the exact checks below, not a timeout.
            try await eventually("the feed readable") { try await Self.feed(db).count >= 5 }
            let feed = try await Self.feed(db)
            #expect(feed.map(\.kind) == [.purchase, .notification, .notification, .purchase, .notification])
            #expect(feed.map(\.notificationUUID) == [feed[0].notificationUUID, consumption, stale, renewed, asked])
            let request = feed[1]
            #expect(request.notificationType == "CONSUMPTION_REQUEST" && request.subtype == nil && request.transactionId == "6000")
            #expect(request.originalTransactionId == "6000" && request.appAccountToken == token && request.source == .webhook)
            #expect(request.signedDate == t0 + 60_000 && request.respondBy == t0 + 60_000 + Self.twelveHours)
            #expect(request.before == nil && request.after == nil && request.runId == nil)
            #expect(feed[2].notificationType == "DID_CHANGE_RENEWAL_STATUS" && feed[2].subtype == "AUTO_RENEW_ENABLED" && feed[2].respondBy == nil)
            #expect(
                feed[3].after?.latestTransactionId == "6000-1" && feed[3].notificationType == "DID_RENEW" && feed[3].subtype == nil
                    && feed[3].runId == 6)
            #expect(feed[4].respondBy == t0 + 180_000 + Self.twelveHours && feed[4].runId == 6 && feed[4].source == .history)
            // The consumption request moved lastSignedDate, and nothing else: no purchase row for it.
            let stored = try await db.database.transaction { try await handler.store.purchaseStates(["6000"], on: $0)["6000"] }
            #expect(stored?.lastSignedDate == t0 + 180_000)

            // Every line has the union of keys, null where a kind has none.
            let lines = try feed.map { try $0.jsonLine() }
            for key in ["kind", "before", "after", "notificationType", "subtype", "transactionId", "signedDate", "respondBy", "notificationUUID"] {
                #expect(lines.allSatisfy { $0.contains("\"\(key)\":") }, "\(key)")
            }
            // A reader of one kind.
            let store = PurchaseStore(logger: Self.logger)
            let notifications = try await db.database.transaction { try await store.changes(after: .start, limit: 100, kind: .notification, on: $0) }
            #expect(notifications.changes.map(\.notificationUUID) == [consumption, stale, asked])
            let purchases = try await db.database.transaction { try await store.changes(after: .start, limit: 100, kind: .purchase, on: $0) }
            #expect(purchases.changes.count == 2 && purchases.changes.allSatisfy { $0.kind == .purchase })
        }
    }

    /// Open and expired are judged at the moment given; an answer Apple accepted closes a request.
    @Test func requestsAreOpenOrExpiredAtTheMomentGiven() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            var uuids: [String] = []
            for (index, signed) in [t0, t0 + 3_600_000, t0 + 7_200_000].enumerated() {
                var recovered = try await handler.verify(
                    signedPayload: try request(app.oneTime("700\(index)", purchaseDate: signed - 60_000, signedDate: signed), signedDate: signed))
                recovered.firstSendAttempt = signed + 1_000
                _ = try await handler.record([recovered], source: .history(runId: 8))
                uuids.append(recovered.notificationUUID)
            }
            let requests = ConsumptionRequests(logger: Self.logger)
            let target = AppTarget(bundleId: TestApp.bundleId, environment: .production)
            // Two hours after the second one's deadline: the first two expired, the third open.
            let now = Timestamp(millisecondsSince1970: t0 + 3_600_000 + 1_000 + Self.twelveHours + 1)
            let all = try await db.database.transaction { try await requests.list(apps: [target], on: $0) }
            #expect(all.map(\.notificationUUID) == uuids)
            #expect(all.map { $0.state(at: now) } == [.expired, .expired, .open])
            #expect(
                try await db.database.transaction { try await requests.list(apps: [target], openAt: now, on: $0) }.map(\.notificationUUID) == [
                    uuids[2]
                ])
            #expect(
                try await db.database.transaction {
                    try await requests.list(apps: [AppTarget(bundleId: "com.other", environment: .production)], on: $0)
                }.isEmpty)

            try await Self.answer("7002", uuids[2], in: db)
            let answered = try await db.database.transaction { try await requests.list(apps: [target], on: $0) }
            #expect(answered.map { $0.state(at: now) } == [.expired, .expired, .answered])
            #expect(try await db.database.transaction { try await requests.list(apps: nil, openAt: now, on: $0) }.isEmpty)
            let byRun = try await db.database.transaction { try await requests.recorded(byRun: 8, limit: 2, at: now, on: $0) }
            #expect(byRun.total == 3 && byRun.requests.map(\.notificationUUID) == Array(uuids.prefix(2)))
            #expect((byRun.open, byRun.expired, byRun.answered, byRun.acked) == (0, 2, 1, 0))
            // The counts cover every request, not only the listed ones: before any deadline, the
            // second request (not listed with a limit of 1) is open and the third answered.
            let early = Timestamp(millisecondsSince1970: t0 + 1_000)
            let first = try await db.database.transaction { try await requests.recorded(byRun: 8, limit: 1, at: early, on: $0) }
            #expect(first.requests.map(\.notificationUUID) == [uuids[0]])
            #expect((first.total, first.open, first.expired, first.answered) == (3, 2, 0, 1))
            // The gauges' view, an hour before the first deadline: by time left (under 2 h; 2 h to 6 h,
            // from exactly 2 h; over 6 h), and the soonest deadline. The answered request does not count.
            let moment = t0 + 1_000 + Self.twelveHours - 3_600_000
            let summary = try await db.database.transaction {
                try await requests.openSummary(of: target, at: moment, bounds: [7_200_000, 21_600_000], on: $0)
            }
            #expect(summary.counts == [1, 1, 0])
            #expect(summary.soonest == t0 + 1_000 + Self.twelveHours)
        }
    }

    /// An answer goes to the app of the stored request for its transaction; the rules that depend on
    /// the stored purchase refuse it before anything is sent, and a refusal writes nothing.
    @Test func anAnswerTakesItsAppFromTheStoredRequestAndItsRulesFromThePurchase() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let subscription = app.subscription(original: "8000", period: 0, signedDate: t0)
            _ = try await handler.handle(signedPayload: try request(subscription, signedDate: t0), source: .webhook)
            let shared = app.oneTime("8001", purchaseDate: t0 - 60_000, signedDate: t0, ownership: .familyShared)
            _ = try await handler.handle(signedPayload: try request(shared, signedDate: t0), source: .webhook)
            let coins = app.oneTime("8002", purchaseDate: t0 - 60_000, signedDate: t0)
            _ = try await handler.handle(signedPayload: try request(coins, signedDate: t0), source: .webhook)

            func prepared(_ transactionId: String, percentage: Int? = nil, preference: String? = nil) async throws -> ConsumptionAnswers.Prepared {
                try await ConsumptionAnswers.prepare(
                    .init(
                        transactionId: transactionId, customerConsented: true, deliveryStatus: "DELIVERED", sampleContentProvided: "false",
                        refundPreference: preference, consumptionPercentage: percentage), apps: nil, database: db.database)
            }
            func refusal(_ body: () async throws -> ConsumptionAnswers.Prepared) async -> ReconcilerError.Code? {
                do {
                    _ = try await body()
                    return nil
                } catch { return (error as? ReconcilerError)?.code }
            }
            let ok = try await prepared("8000")
            #expect(ok.target == AppTarget(bundleId: TestApp.bundleId, environment: .production))
            #expect(await refusal { try await prepared("8000", percentage: 10_000) } == .invalidAnswer)
            #expect(await refusal { try await prepared("8001") } == .invalidAnswer)
            #expect(await refusal { try await prepared("8002", preference: "GRANT_PRORATED") } == .invalidAnswer)
            #expect(try await prepared("8002", percentage: 30_000, preference: "GRANT_PRORATED").body.consumptionPercentage == 30_000)
            #expect(await refusal { try await prepared("8999") } == .unknownConsumptionRequest)
            #expect(try await db.count("SELECT count(*) FROM consumption_answers") == 0)
        }
    }
    /// What the error of `body` has for a code (`nil`: none was thrown).
    static func code(_ body: () async throws -> Void) async -> ReconcilerError.Code? {
        do {
            try await body()
            return nil
        } catch { return (error as? ReconcilerError)?.code }
    }

    /// `consumption ack`: every stored request of the transaction needs nothing more; it is acked,
    /// not open (nor in the gauges), and keeps its first ack; an unknown or malformed transaction,
    /// an empty name, or requests of several apps write nothing.
    @Test func anAckedRequestIsNoLongerOpenAndKeepsItsFirstAck() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            // The customer asked twice for one purchase, once for another.
            let coins = app.oneTime("9100", purchaseDate: t0 - 60_000, signedDate: t0)
            let (first, second) = (UUID().uuidString.lowercased(), UUID().uuidString.lowercased())
            _ = try await handler.handle(signedPayload: try request(coins, uuid: first, signedDate: t0), source: .webhook)
            _ = try await handler.handle(signedPayload: try request(coins, uuid: second, signedDate: t0 + 60_000), source: .webhook)
            let other = app.oneTime("9101", purchaseDate: t0 - 60_000, signedDate: t0)
            _ = try await handler.handle(signedPayload: try request(other, signedDate: t0), source: .webhook)
            let target = AppTarget(bundleId: TestApp.bundleId, environment: .production)
            let store = ConsumptionRequests(logger: Self.logger)
            let now = Timestamp(millisecondsSince1970: t0 + 120_000)
            func open() async throws -> [String?] {
                try await db.database.transaction { try await store.list(apps: nil, openAt: now, on: $0) }.map(\.transactionId)
            }
            func gauged() async throws -> Int {
                try await db.database.transaction {
                    try await store.openSummary(of: target, at: now.millisecondsSince1970, bounds: [7_200_000, 21_600_000], on: $0)
                }.counts.reduce(0, +)
            }
            #expect(try await open().sorted { ($0 ?? "") < ($1 ?? "") } == ["9100", "9100", "9101"])
            #expect(try await gauged() == 3)

            let acked = try await ConsumptionAcks.ack(
                transactionId: "9100", apps: nil, by: " alice ", note: "answered by the app", database: db.database)
            #expect(acked.target == target && acked.newlyAcked == [first, second])
            #expect(acked.requests.map(\.notificationUUID) == [second, first])
            #expect(
                acked.requests.allSatisfy {
                    $0.state(at: now) == .acked && $0.ackedBy == "alice" && $0.ackNote == "answered by the app" && $0.ackedAt != nil
                        && $0.answeredAt == nil && $0.answeredBy == nil
                })
            #expect(try await open() == ["9101"])
            #expect(try await gauged() == 1)

            // Again, by someone else: the first ack is kept.
            let again = try await ConsumptionAcks.ack(transactionId: "9100", apps: [target], by: "bob", note: nil, database: db.database)
            #expect(again.newlyAcked.isEmpty && again.requests.map(\.ackedBy) == ["alice", "alice"])
            #expect(again.requests.map(\.ackedAt) == acked.requests.map(\.ackedAt))

            // Refused, nothing written.
            #expect(
                await Self.code { _ = try await ConsumptionAcks.ack(transactionId: "9999", apps: nil, by: "a", note: nil, database: db.database) }
                    == .unknownConsumptionRequest)
            #expect(
                await Self.code { _ = try await ConsumptionAcks.ack(transactionId: "91OO", apps: nil, by: "a", note: nil, database: db.database) }
                    == .invalidAnswer)
            #expect(
                await Self.code { _ = try await ConsumptionAcks.ack(transactionId: "9101", apps: nil, by: " ", note: nil, database: db.database) }
                    == .invalidInput)
            // The other request stored in the sandbox too (as if the sandbox had the same ID): the app must be chosen.
            try await db.execute(
                """
                INSERT INTO notifications
                SELECT (jsonb_populate_record(n, jsonb_build_object('notification_uuid', gen_random_uuid()::text, 'environment', 'Sandbox'))).*
                FROM notifications n WHERE transaction_id = '9101'
                """)
            #expect(
                await Self.code { _ = try await ConsumptionAcks.ack(transactionId: "9101", apps: nil, by: "a", note: nil, database: db.database) }
                    == .invalidInput)
            #expect(try await db.count("SELECT count(*) FROM consumption_acks") == 2)
            let chosen = try await ConsumptionAcks.ack(transactionId: "9101", apps: [target], by: "carol", note: nil, database: db.database)
            #expect(chosen.target == target && chosen.newlyAcked.count == 1 && chosen.requests.map(\.environment) == [.production])
            // Only the sandbox's request is left open.
            #expect(try await open() == ["9101"])
            #expect(try await gauged() == 0)
        }
    }

    /// Whether requests the live webhook received count as open is the deployment's choice
    /// (`consumption.liveRequests`): ignored, `list --open` and the gauges count only those a run recovered.
    @Test func liveRequestsCountAsOpenOnlyWhenWatched() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let moment = t0 + 3_600_000
            _ = try await handler.handle(
                signedPayload: try request(app.oneTime("9200", purchaseDate: t0 - 60_000, signedDate: t0), signedDate: t0), source: .webhook)
            var recovered = try await handler.verify(
                signedPayload: try request(app.oneTime("9201", purchaseDate: t0 - 60_000, signedDate: t0), signedDate: t0))
            recovered.firstSendAttempt = t0 + 1_000
            _ = try await handler.record([recovered], source: .history(runId: 9))
            let target = AppTarget(bundleId: TestApp.bundleId, environment: .production)
            let store = ConsumptionRequests(logger: Self.logger)
            func open(watching: [AppTarget]?) async throws -> [String?] {
                try await db.database.transaction {
                    try await store.list(apps: nil, openAt: Timestamp(millisecondsSince1970: moment), watchingLive: watching, on: $0)
                }.map(\.transactionId)
            }
            #expect(try await open(watching: nil) == ["9200", "9201"])
            #expect(try await open(watching: [target]) == ["9200", "9201"])
            #expect(try await open(watching: []) == ["9201"])
            #expect(try await open(watching: [AppTarget(bundleId: TestApp.bundleId, environment: .sandbox)]) == ["9201"])

            for (live, expected) in [(ConsumptionSettings.LiveRequests.watch, 2.0), (.ignore, 1.0)] {
                let metrics = MetricsRegistry(app: AppTarget(bundleId: TestApp.bundleId, environment: .production))
                var ledgerMetrics = LedgerMetrics(
                    ledger: RunLedger(database: db.database), app: AppTarget(bundleId: TestApp.bundleId, environment: .production), registry: metrics,
                    liveConsumptionRequests: live)
                ledgerMetrics.now = { moment }
                try await ledgerMetrics.refresh()
                let parsed = try PrometheusText(parsing: metrics.exposition())
                let counted = ["under_2h", "2h_to_6h", "over_6h"].compactMap {
                    parsed.value("reconciler_consumption_requests_open", ["time_left": $0])
                }
                #expect(counted.reduce(0, +) == expected, "\(live)")
                let soonest = live == .watch ? t0 + Self.twelveHours : t0 + 1_000 + Self.twelveHours
                #expect(parsed.value("reconciler_consumption_request_next_deadline_timestamp_seconds") == Double(soonest) / 1000, "\(live)")
            }
        }
    }

    /// An answer is written `sending` before Apple is called and completed after; a request
    /// answered, acked or with an answer being sent takes no other unless sent again on purpose;
    /// the same attempt written twice (a lost commit run again) is one row.
    @Test func anAnswerIsWrittenSendingFirstAndASettledRequestTakesNoOtherUnlessAgain() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            var uuids: [String: String] = [:]
            for id in ["9300", "9301"] {
                let uuid = UUID().uuidString.lowercased()
                _ = try await handler.handle(
                    signedPayload: try request(app.oneTime(id, purchaseDate: t0 - 60_000, signedDate: t0), uuid: uuid, signedDate: t0),
                    source: .webhook)
                uuids[id] = uuid
            }
            let target = AppTarget(bundleId: TestApp.bundleId, environment: .production)
            let store = ConsumptionRequests(logger: Self.logger)
            let body = ConsumptionRequest(customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false)
            func answer(_ id: String) -> ConsumptionRequests.Answer {
                ConsumptionRequests.Answer(target: target, transactionId: id, notificationUUID: uuids[id]!, body: body)
            }
            func begin(_ answer: ConsumptionRequests.Answer, again: Bool = false) async throws -> ConsumptionRequests.Settled? {
                try await db.database.transaction { try await store.beginAnswer(answer, again: again, on: $0) }
            }
            func stored(_ id: String) async throws -> ConsumptionRequests.Request {
                try #require(try await db.database.transaction { try await store.requests(forTransaction: id, apps: nil, on: $0) }.first)
            }
            func outcomes(_ id: String) async throws -> [String] {
                try await db.strings("SELECT outcome FROM consumption_answers WHERE transaction_id = \(id) ORDER BY answer_id")
            }
            let now = Timestamp(millisecondsSince1970: t0 + 60_000)

            let sending = answer("9300")
            #expect(try await begin(sending) == nil)
            #expect(try await begin(sending) == nil)  // the same attempt again: one row
            #expect(try await outcomes("9300") == ["sending"])
            let beingSent = try await stored("9300")
            #expect(beingSent.sending && beingSent.state(at: now) == .open)
            #expect(try await begin(answer("9300")) == .sending(beingSent))
            try await db.database.transaction {
                try await store.completeAnswer(sending.sendId, with: .init(outcome: .accepted, httpStatus: 202), on: $0)
            }
            let answered = try await stored("9300")
            #expect(!answered.sending && answered.state(at: now) == .answered && answered.answeredBy == .command && answered.answeredAt != nil)
            #expect(try await begin(answer("9300")) == .answered(answered))
            #expect(try await outcomes("9300") == ["accepted"])
            #expect(try await begin(answer("9300"), again: true) == nil)
            #expect(try await outcomes("9300") == ["accepted", "sending"])

            // An answer Apple failed leaves the request open to the next one; an acked request takes none.
            let failed = answer("9301")
            #expect(try await begin(failed) == nil)
            try await db.database.transaction {
                try await store.completeAnswer(failed.sendId, with: .init(outcome: .failed, httpStatus: 503), on: $0)
            }
            #expect(try await stored("9301").state(at: now) == .open)
            _ = try await ConsumptionAcks.ack(transactionId: "9301", apps: nil, by: "alice", note: nil, database: db.database)
            #expect(try await begin(answer("9301")) == .acked(try await stored("9301")))
            #expect(try await outcomes("9301") == ["failed"])
            // Completing an attempt that was never begun is an error, not a silent no-op.
            #expect(
                await Self.code {
                    try await db.database.transaction { try await store.completeAnswer(UUID(), with: .init(outcome: .accepted), on: $0) }
                } == .missingRow)
        }
    }
}
