import AppStoreServer
import Foundation
import MockAppStore
import NIOHTTP1
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// Consumption answers by policy against a real PostgreSQL and the mock over HTTP: a recovered
/// outage with consumption requests of consumables and subscriptions, answered by
/// `consumption respond` (``ConsumptionResponder``), automatically after `answerAfter`, and by the
/// app (``ConsumptionAppAnswer``).
@Suite struct ConsumptionPolicyTests {
    static let hour: Int64 = 3_600_000

    /// A policy Apple's rules accept for both kinds: no percentage but for the consumable, which
    /// asks a prorated refund.
    static let policy = ConsumptionPolicy(
        customerConsented: true, defaults: .init(deliveryStatus: .delivered, sampleContentProvided: false, refundPreference: .decline),
        products: ["com.example.coins.100": .init(refundPreference: .grantProrated, consumptionPercentage: 50_000)])

    static let origins = SettingOrigins(
        bundleId: .named("test"), appAppleId: .named("test"), environment: .named("test"), keyId: .named("test"), issuerId: .named("test"),
        privateKeyPath: .named("test"), rootCertificates: .named("test"))

    /// Recovers the mock's 19-hour outage (consumption requests in it, some past Apple's 12 hours),
    /// then runs `body` with the app's target and the mock's base URL.
    static func withRecoveredOutage(
        seed: UInt64, policy: ConsumptionPolicy = Self.policy,
        _ body: (TestDatabase, MockAppStore, String, ConsumptionResponder.Target, Int64) async throws -> Void
    ) async throws {
        try await TestDatabase.with { db in
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let scenario = ScenarioConfiguration(
                seed: seed, customers: 30, now: now, span: 48 * hour, outageStart: now - 20 * hour, outageEnd: now - hour)
            try await MockAppStore.withRunning(.init(scenario: scenario)) { mock, baseURL in
                let verifier = try mock.verifier()
                let scope = AppScope(target: verifier.configuration.target, entitlement: .init())
                let report = try await ReconcileRun(
                    configuration: .init(
                        window: TimeWindow(milliseconds: (now - 47 * hour)..<now), dryRun: false, options: RunOptions(refreshStatus: true)),
                    scope: scope, database: db.database, verifier: verifier, client: mock.client(baseURL: baseURL)
                ).reconcile(progress: RunProgress())
                #expect(report.notifications.applied > 0)
                let target = try #require(
                    ConsumptionResponder.Target(
                        app: scope.target, settings: ConsumptionSettings(policy: policy), client: mock.client(baseURL: baseURL), origins: origins))
                try await body(db, mock, baseURL, target, now)
            }
        }
    }

    /// The answers the mock accepted, by transaction.
    static func received(_ baseURL: String) async throws -> [MockAppStore.ReceivedConsumptionAnswer] {
        let reply = try await HTTP.request(.GET, "\(baseURL)/mock/consumption")
        return try String(decoding: reply.body, as: UTF8.self).split(separator: "\n").map {
            try JSONDecoder().decode(MockAppStore.ReceivedConsumptionAnswer.self, from: Data($0.utf8))
        }
    }

    /// The body an answer the mock received carried.
    static func body(_ answer: MockAppStore.ReceivedConsumptionAnswer) -> ConsumptionRequest {
        ConsumptionRequest(
            customerConsented: answer.customerConsented, deliveryStatus: DeliveryStatus(rawValue: answer.deliveryStatus),
            sampleContentProvided: answer.sampleContentProvided, consumptionPercentage: answer.consumptionPercentage.map(Int32.init),
            refundPreference: answer.refundPreference.map(RefundPreference.init(rawValue:)))
    }

    struct Stop: Error {}

    /// `respond --dry-run`'s plan is exactly what `respond` then sends: one answer per open request,
    /// each accepted by the mock's Apple rules, soonest deadline first, never an expired or acked
    /// one; killed after Apple accepted an answer and before it was recorded, a rerun still sends
    /// each request one answer (the unrecorded one is reported, not sent again).
    @Test func respondSendsWhatItsDryRunPrintsOnceEvenWhenKilledMidway() async throws {
        try await Self.withRecoveredOutage(seed: 371) { db, _, baseURL, target, now in
            let store = ConsumptionRequests(logger: TestDatabase.logger)
            let all = try await db.database.transaction { try await store.list(apps: [target.app], on: $0) }
            let moment = Timestamp(millisecondsSince1970: now)
            let open = all.filter { $0.state(at: moment) == .open }
            let expired = all.filter { $0.state(at: moment) == .expired }
            #expect(
                open.count >= 3 && !expired.isEmpty,
                "the outage must hold open and expired requests: \(all.map { ($0.transactionId, $0.respondBy, $0.state(at: moment)) }) now \(moment)")
            // One of them the app answered itself and acked: never answered by policy.
            let subscriptions = Set(
                try await db.strings("SELECT transaction_id FROM transactions WHERE product_type = 'Auto-Renewable Subscription'"))
            let ackedRequest = try #require(open.last { subscriptions.contains($0.transactionId ?? "") })
            let acked = try #require(ackedRequest.transactionId)
            _ = try await ConsumptionAcks.ack(transactionId: acked, apps: nil, by: "app", note: nil, database: db.database)

            let dryRun = try await ConsumptionResponder.plan([target], at: .now, database: db.database)
            let types = try await db.strings(
                "SELECT DISTINCT product_type FROM transactions WHERE transaction_id = ANY(\(dryRun.planned.map(\.transactionId)))")
            #expect(Set(types) == ["Consumable", "Auto-Renewable Subscription"], "consumables and subscriptions: \(types)")
            #expect(
                Set(dryRun.planned.map(\.request.notificationUUID)) == Set(open.map(\.notificationUUID)).subtracting([ackedRequest.notificationUUID]))
            #expect(dryRun.planned.map(\.request.respondBy) == dryRun.planned.map(\.request.respondBy).sorted())
            #expect(dryRun.unanswerable.isEmpty && dryRun.outcomeUnknown.isEmpty && dryRun.notConsented.isEmpty)
            #expect(try await Self.received(baseURL).isEmpty)
            #expect(try await db.count("SELECT count(*) FROM consumption_answers") == 0)

            // Killed after Apple accepted the second answer, before that was recorded.
            let second = dryRun.planned[1].request.notificationUUID
            await #expect(throws: Stop.self) {
                _ = try await ConsumptionResponder.respond(
                    dryRun, targets: [target], answeredBy: .policy, database: db.database,
                    afterApple: {
                        planned in
                        if planned.request.notificationUUID == second { throw Stop() }
                    })
            }
            #expect(try await Self.received(baseURL).count == 2)
            let rerun = try await ConsumptionResponder.plan([target], at: .now, database: db.database)
            #expect(rerun.outcomeUnknown.map(\.notificationUUID) == [second])
            #expect(rerun.planned.map(\.request.notificationUUID) == dryRun.planned.dropFirst(2).map(\.request.notificationUUID))
            let outcome = try await ConsumptionResponder.respond(rerun, targets: [target], answeredBy: .policy, database: db.database)
            #expect(outcome.accepted.count == rerun.planned.count && outcome.failed.isEmpty)
            // The unrecorded answer needs a person: exit 4.
            #expect(outcome.ending?.exitCode == 4, "\(String(describing: outcome.ending))")
            // And a third run sends nothing.
            let third = try await ConsumptionResponder.plan([target], at: .now, database: db.database)
            #expect(third.planned.isEmpty)

            let received = try await Self.received(baseURL)
            #expect(received.map(\.transactionId).sorted() == dryRun.planned.map(\.transactionId).sorted())
            for planned in dryRun.planned {
                #expect(received.filter { $0.transactionId == planned.transactionId }.map(Self.body) == [planned.body], "\(planned.transactionId)")
            }
            #expect(!received.contains { $0.transactionId == acked })
            #expect(!received.contains { answer in expired.contains { $0.transactionId == answer.transactionId } })
            #expect(
                try await db.strings("SELECT DISTINCT answered_by || ' ' || outcome FROM consumption_answers ORDER BY 1") == [
                    "policy accepted", "policy sending",
                ])
        }
    }

    /// With `automatic`, a request is answered only once its `answerAfter` passed, never one acked
    /// or one the app answered itself (through the app API's core, which answers 409 the second time).
    @Test func automaticAnswersWaitForAnswerAfterAndLeaveTheAppsAnswersAlone() async throws {
        var policy = Self.policy
        policy.automatic = true
        policy.answerAfter = .seconds(30 * 3600)
        try await Self.withRecoveredOutage(seed: 372, policy: policy) { db, _, baseURL, target, now in
            let moment = Timestamp(millisecondsSince1970: now)
            let waiting = try await ConsumptionResponder.answerDue([target], clock: { moment }, database: db.database)
            #expect(waiting.plan.planned.isEmpty && waiting.plan.waiting >= 3, "\(waiting.plan)")
            #expect(try await Self.received(baseURL).isEmpty)

            let store = ConsumptionRequests(logger: TestDatabase.logger)
            let open = try await db.database.transaction { try await store.list(apps: [target.app], openAt: moment, on: $0) }
            let (byApp, acked) = (try #require(open.first?.transactionId), try #require(open.last?.transactionId))
            _ = try await ConsumptionAcks.ack(transactionId: acked, apps: nil, by: "app", note: nil, database: db.database)
            let input = ConsumptionAnswers.Input(
                transactionId: byApp, customerConsented: true, deliveryStatus: "UNDELIVERED_OTHER", sampleContentProvided: "true")
            #expect(
                await ConsumptionAppAnswer.answer(input, app: target.app, client: target.client, origins: Self.origins, database: db.database)
                    == .accepted)
            let again = await ConsumptionAppAnswer.answer(input, app: target.app, client: target.client, origins: Self.origins, database: db.database)
            #expect(again.httpStatus == 409, "\(again)")
            var badInput = input
            badInput.customerConsented = false
            #expect(
                await ConsumptionAppAnswer.answer(badInput, app: target.app, client: target.client, origins: Self.origins, database: db.database)
                    .httpStatus == 400)

            // Once answerAfter passed for all of them: every other open request, by policy.
            var soon = target
            soon.policy.answerAfter = .seconds(1)
            var manual = soon
            manual.policy.automatic = false
            #expect(try await ConsumptionResponder.answerDue([manual], database: db.database).plan.planned.isEmpty)
            let due = try await ConsumptionResponder.answerDue([soon], database: db.database)
            #expect(due.plan.waiting == 0 && due.accepted.count == open.count - 2 && due.ending == nil)
            let received = try await Self.received(baseURL)
            #expect(received.filter { $0.transactionId == byApp }.map(\.deliveryStatus) == ["UNDELIVERED_OTHER"])
            #expect(!received.contains { $0.transactionId == acked })
            #expect(received.count == open.count - 1)
            #expect(
                try await db.strings("SELECT answered_by FROM consumption_answers WHERE transaction_id = \(byApp) AND outcome = 'accepted'") == [
                    "app"
                ])
        }
    }

    /// serve's leader answers automatically on its ticks, on an injected clock that moves its "now":
    /// a request is answered at the first tick once its `answerAfter` passed (not before, and once:
    /// later ticks, and a second replica without the lease, send nothing again), an acked one never.
    @Test func serveLeaderAnswersOnceAnswerAfterPassedNeverBeforeAndNeverAnAckedRequest() async throws {
        var policy = Self.policy
        policy.automatic = true
        policy.answerAfter = .seconds(6 * 3600)
        try await Self.withRecoveredOutage(seed: 373, policy: policy) { db, _, baseURL, target, now in
            let clock = ManualClock()
            let moment: @Sendable () -> Timestamp = { Timestamp(millisecondsSince1970: now + clock.now.milliseconds) }
            let (leader, follower) = (
                ServeLeader(
                    configuration: .init(holder: "leader", clock: clock, now: moment),
                    writer: TimeRowWriter(scopes: [], database: db.database), consumption: [target], logger: TestDatabase.logger),
                ServeLeader(
                    configuration: .init(holder: "follower", clock: clock, now: moment),
                    writer: TimeRowWriter(scopes: [], database: db.database), consumption: [target], logger: TestDatabase.logger)
            )
            let store = ConsumptionRequests(logger: TestDatabase.logger)
            let open = try await db.database.transaction { try await store.list(apps: [target.app], openAt: moment(), on: $0) }
            func asked(_ request: ConsumptionRequests.Request) -> Int64 { request.firstSentAt?.millisecondsSince1970 ?? request.signedDate }
            let after = policy.answerAfter.milliseconds
            // The ticks: every half hour for five hours. One that comes due only after the first tick is acked.
            let ticks = (0...10).map { now + Int64($0) * Self.hour / 2 }
            let later = open.filter { asked($0) + after > ticks[0] && asked($0) + after <= ticks[10] }
            try #require(later.count >= 2, "the scenario has too few requests coming due in the ticks' five hours: \(later.count)")
            let acked = try #require(later.first?.transactionId)
            _ = try await ConsumptionAcks.ack(transactionId: acked, apps: nil, by: "app", note: nil, database: db.database)

            var sent = 0
            for (index, tick) in ticks.enumerated() {
                if index > 0 { clock.advance(by: .milliseconds(Self.hour / 2)) }
                #expect(moment().millisecondsSince1970 == tick)
                let ticked = try await leader.tick()
                #expect(ticked.leads)
                #expect(try await follower.tick().leads == false)
                // Due by this tick: answerAfter passed at or before it, the deadline not yet; not acked.
                let due = open.filter { request in
                    asked(request) + after <= tick && ticks.contains { $0 >= asked(request) + after && $0 < request.respondBy.millisecondsSince1970 }
                        && request.transactionId != acked
                }
                let received = try await Self.received(baseURL).map(\.transactionId)
                #expect(received.count == Set(received).count, "a request was answered twice: \(received)")
                #expect(Set(received) == Set(due.compactMap(\.transactionId)), "tick \(index)")
                #expect(ticked.answers.accepted.count == received.count - sent, "tick \(index)")
                sent = received.count
            }
            #expect(sent > 0)
            #expect(try await !Self.received(baseURL).contains { $0.transactionId == acked })
            #expect(try await db.strings("SELECT DISTINCT answered_by FROM consumption_answers") == ["policy"])
        }
    }
}
