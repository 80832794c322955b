import AppStoreServer
import Foundation
import Logging
import MockAppStore
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// A run at Apple's limit, in process against PostgreSQL: which customers phase 2 reads again, and
/// one request budget for every process of an app.
@Suite(.serialized) struct ConcurrentRunTests {
    /// A customer phase 1 touches again while phase 2 reads its history is read again.
    @Test func aCustomerTouchedAgainWhileItsHistoryIsReadIsReadAgain() async throws {
        try await TestDatabase.with { db in
            let ledger = RunLedger(database: db.database)
            let run = try await ledger.createRun(
                kind: .manual, app: AppTarget(bundleId: "com.example", environment: .production), window: TimeWindow(milliseconds: 0..<1),
                dryRun: false, options: .init(), shards: [], holder: "test")
            try await db.database.transaction { try await ledger.enqueue(runId: run.runId, anchors: ["1000"], reason: .touched, on: $0) }
            #expect(try await ledger.leaseCustomer(runId: run.runId, worker: "w", leaseDuration: .seconds(60)) == "1000")
            // Phase 1 replays another notification of the customer now.
            try await db.database.transaction { try await ledger.enqueue(runId: run.runId, anchors: ["1000"], reason: .touched, on: $0) }
            #expect(
                try await db.database.transaction {
                    try await ledger.completeCustomer(runId: run.runId, anchor: "1000", worker: "w", transactionsSeen: 1, on: $0)
                })
            #expect(try await ledger.queueSummary(runId: run.runId).pending == 1)
            #expect(try await ledger.leaseCustomer(runId: run.runId, worker: "w", leaseDuration: .seconds(60)) == "1000")
            #expect(
                try await db.database.transaction {
                    try await ledger.completeCustomer(runId: run.runId, anchor: "1000", worker: "w", transactionsSeen: 0, on: $0)
                })
            #expect(try await ledger.queueSummary(runId: run.runId).done == 1)
            // A done customer touched again is pending again; one queued as due stays as it is.
            try await db.database.transaction { try await ledger.enqueue(runId: run.runId, anchors: ["1000"], reason: .touched, on: $0) }
            #expect(try await ledger.queueSummary(runId: run.runId).pending == 1)
            try await db.database.transaction { try await ledger.enqueue(runId: run.runId, anchors: ["2000"], reason: .due, on: $0) }
            try await db.database.transaction { try await ledger.enqueue(runId: run.runId, anchors: ["2000"], reason: .due, on: $0) }
            #expect(try await ledger.queueSummary(runId: run.runId).pending == 2)
        }
    }

    /// A notification Apple signed before a customer's history read began is in that history: it
    /// does not make the customer read again, nor keep it from being covered by another purchase's
    /// history. One signed after the read began (within the margin) does both.
    @Test func onlyANotificationSignedAfterTheReadBeganMakesItReadAgain() async throws {
        try await TestDatabase.with { db in
            let ledger = RunLedger(database: db.database)
            let run = try await ledger.createRun(
                kind: .manual, app: AppTarget(bundleId: "com.example", environment: .production), window: TimeWindow(milliseconds: 0..<1),
                dryRun: false, options: .init(), shards: [], holder: "test")
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let margin = RunLedger.rereadMargin.components.seconds * 1000
            func touch(_ anchor: String, signed: Int64) async throws {
                try await db.database.transaction {
                    try await ledger.enqueue(runId: run.runId, touches: [.init(anchor: anchor, newestSignedDate: signed)], on: $0)
                }
            }
            func complete(_ anchor: String, covering: [String] = []) async throws -> Bool {
                try await db.database.transaction {
                    try await ledger.markCovered(runId: run.runId, anchors: covering, by: anchor, on: $0)
                    return try await ledger.completeCustomer(runId: run.runId, anchor: anchor, worker: "w", transactionsSeen: 1, on: $0)
                }
            }
            try await touch("1000", signed: now - 3_600_000)
            #expect(try await ledger.leaseCustomer(runId: run.runId, worker: "w", leaseDuration: .seconds(60)) == "1000")
            // While it is read: an old notification changes nothing, a new one brings it back.
            try await touch("1000", signed: now - margin - 60_000)
            #expect(try await complete("1000"))
            #expect(try await ledger.queueSummary(runId: run.runId).done == 1)
            try await touch("1000", signed: now - margin - 60_000)
            #expect(try await ledger.queueSummary(runId: run.runId).pending == 0)
            try await touch("1000", signed: now)
            #expect(try await ledger.queueSummary(runId: run.runId).pending == 1)

            // Another purchase of the same customer, touched by a notification signed before the read
            // of the first began, is covered by it; one touched by a notification signed after is not.
            try await touch("2000", signed: now - 2 * margin)
            try await touch("3000", signed: now + 60_000)
            #expect(try await ledger.leaseCustomer(runId: run.runId, worker: "w", leaseDuration: .seconds(60)) == "1000")
            #expect(try await complete("1000", covering: ["1000", "2000", "3000"]))
            let summary = try await ledger.queueSummary(runId: run.runId)
            #expect(summary.done == 2 && summary.pending == 1)
            #expect(try await ledger.leaseCustomer(runId: run.runId, worker: "w", leaseDuration: .seconds(60)) == "3000")
        }
    }

    /// An endpoint a 429 closed stays closed for a process started afterwards, until the instant
    /// Apple gave: it learns it from PostgreSQL before its first request.
    @Test func aRetryAfterClosesTheEndpointForProcessesStartedLater() async throws {
        try await TestDatabase.with { db in
            func budget(_ bundleId: String) -> SharedBudget {
                SharedBudget(
                    configuration: .init(claims: [.getTransactionHistory: .init(appBudget: 40)]), database: db.database,
                    limiter: RateLimiter(requestsPerSecond: [.getTransactionHistory: 40]),
                    app: AppTarget(bundleId: bundleId, environment: .production))
            }
            let first = budget("com.example")
            try await first.join()
            let until = Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000
            await first.endpointClosed(.getTransactionHistory, untilUNIXMilliseconds: until)
            await first.leave()
            // A new process of the same app: the endpoint is closed for it too.
            let later = budget("com.example")
            try await later.join()
            let refused = await #expect(throws: RateLimiter.EndpointClosed.self) {
                try await later.limiter.waitForTurn(.getTransactionHistory, longestClosure: .seconds(1))
            }
            #expect(refused.map { abs($0.reopensAt - until) < 1000 } == true)
            // Another app's endpoints stay open.
            let other = budget("com.example.other")
            try await other.join()
            try await other.limiter.waitForTurn(.getTransactionHistory, longestClosure: .seconds(1))
        }
    }

    /// Live processes that call an endpoint divide the app's budget for it equally, and re-divide
    /// when one leaves.
    @Test func liveProcessesDivideTheAppsBudget() async throws {
        try await TestDatabase.with { db in
            func budget(_ name: String) -> SharedBudget {
                SharedBudget(
                    configuration: .init(claims: [.getNotificationHistory: .init(appBudget: 40)], leaseDuration: .seconds(600), process: name),
                    database: db.database,
                    limiter: RateLimiter(requestsPerSecond: [.getNotificationHistory: 40]),
                    app: AppTarget(bundleId: "com.example", environment: .production))
            }
            let a = budget("a"), b = budget("b")
            try await a.join()
            #expect(a.processes == 1)
            #expect(await a.limiter.requestsPerSecond(of: .getNotificationHistory) == 40)
            try await b.join()
            try await a.renew(announce: false)
            #expect(a.processes == 2)
            #expect(await a.limiter.requestsPerSecond(of: .getNotificationHistory) == 20)
            #expect(await b.limiter.requestsPerSecond(of: .getNotificationHistory) == 20)
            await b.leave()
            try await a.renew(announce: false)
            #expect(a.processes == 1)
            #expect(await a.limiter.requestsPerSecond(of: .getNotificationHistory) == 40)
        }
    }

}
