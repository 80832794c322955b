import AppStoreServer
import Foundation
import PostgresNIO
import ReconcilerDomain
import ReconcilerShared
import TestSupport
import Testing

@testable import Reconciler
@testable import ReconcilerStore

/// The change feed through `reconciler changes` and real processes: ids and commit order, one row
/// per change through an outage rehearsal, a `changes --follow` consumer killed and restarted,
/// retention, and the `entitled` rule through the handler, `export` and the feed.
@Suite struct ChangeFeedTests: ChangeFeedTesting {
    let app: TestApp
    init() throws { app = try TestApp() }

    /// The lines of an output that are complete (a killed process may leave half of one).
    static func completeLines(_ output: String) -> [String] {
        var lines = output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines.removeLast()
        return lines.filter { !$0.isEmpty }
    }

    static func decode(_ line: String) throws -> PurchaseStore.FeedChange {
        try JSONDecoder().decode(PurchaseStore.FeedChange.self, from: Data(line.utf8))
    }

    static func execute(_ sql: PostgresQuery, on connection: PostgresConnection) async throws {
        for try await _ in try await connection.query(sql, logger: logger) {}
    }

    /// Feed order is the xid's number, not its text ('100' sorts before '99'): a reader that sorted
    /// by text would print the row of xid 100 first and then, reading after it, never the other.
    @Test func feedOrderFollowsTransactionIdsAcrossADigitBoundary() async throws {
        try await TestDatabase.with { db in
            // Both long committed: a fresh cluster's transactions are numbered from several hundred on.
            for (original, xid) in [("digits-b", 100), ("digits-a", 99)] {
                try await db.execute(
                    """
                    INSERT INTO purchase_changes (original_transaction_id, bundle_id, environment, source, after_state, xid)
                    VALUES (\(original), \(TestApp.bundleId), 'Production', 'webhook', jsonb_build_object('originalTransactionId', \(original)::text, 'entitled', false),
                            \(String(xid))::xid8)
                    """)
            }
            let ids = try await db.strings("SELECT change_id::text FROM purchase_changes ORDER BY xid")
            #expect(try await Self.feed(db).map(\.originalTransactionId) == ["digits-a", "digits-b"])
            let store = PurchaseStore(logger: Self.logger)
            let newest = try await db.database.transaction { try await store.newestPosition(on: $0) }
            #expect("\(newest.changeId)" == ids[1])
            let first = try await db.database.transaction { try await store.changes(after: .start, limit: 1, on: $0) }
            let rest = try await db.database.transaction { try await store.changes(after: first.end, limit: 10, on: $0) }
            #expect((first.changes + rest.changes).map(\.originalTransactionId) == ["digits-a", "digits-b"])
            let command = try await db.reconciler(["changes", "--since", ids[0], "--batch", "1"])
            #expect(command.status == 0, "\(command.stderr)")
            #expect(try Self.completeLines(command.stdout).map { try Self.decode($0).originalTransactionId } == ["digits-b"])
        }
    }

    /// Ids are not commit order: an older transaction can take a larger id and commit first. A
    /// consumer that stored the larger id and resumes with `--since` still gets the smaller one.
    ///
    /// In a cluster of its own: the transaction it holds open hides every newer row of the feed in
    /// the whole cluster (its horizon is cluster-wide), so other tests' `changes` would print less.
    @Test func aChangeWithASmallerIdCommittedLaterStillFollowsTheStoredId() async throws {
        try await PrivateCluster.with { cluster in
            try await TestDatabase.with(server: cluster.url) { db in try await checkASmallerIdCommittedLater(db) }
        }
    }

    func checkASmallerIdCommittedLater(_ db: TestDatabase) async throws {
        let handler = try app.handler(db)
        let first = try await handler.verify(signedPayload: try subscribed("ids-1"))
        let store = PurchaseStore(logger: Self.logger)
        var stored: Int64 = 0
        try await db.client.withConnection { older in
            try await db.client.withConnection { newer in
                // A transaction gets its xid at its first write, its change id when it records the change.
                try await Self.execute("BEGIN", on: older)
                try await Self.execute("SELECT pg_current_xact_id()", on: older)
                try await Self.execute("BEGIN", on: newer)
                _ = try await handler.apply([first], source: .webhook, on: DatabaseTransaction(newer))  // the smaller id
                // The older transaction records its change now (as the store does, in one statement): the larger id.
                try await Self.execute(
                    """
                    INSERT INTO purchase_changes (original_transaction_id, bundle_id, environment, source, after_state)
                    VALUES ('ids-2', \(TestApp.bundleId), 'Production', 'webhook', '{"originalTransactionId": "ids-2", "entitled": true}')
                    """, on: older)
                try await Self.execute("COMMIT", on: older)
                // The newer transaction cannot put a row before the older one's: it is readable now.
                try await eventually("the larger id readable") { try await Self.feed(db).count == 1 }
                let read = try await Self.feed(db)
                #expect(read.map(\.originalTransactionId) == ["ids-2"])
                stored = read[0].changeId
                try await Self.execute("COMMIT", on: newer)
            }
        }
        let found = try await db.database.transaction { [stored] in try await store.position(of: stored, on: $0) }
        let position = try #require(found)
        try await eventually("the smaller id readable after the stored one") {
            try await Self.feed(db, after: position).count == 1
        }
        let resumed = try await Self.feed(db, after: position)
        #expect(resumed.map(\.originalTransactionId) == ["ids-1"])
        #expect(resumed[0].changeId < stored, "an id-ordered consumer would have skipped it")
        // The command does the same from the id alone.
        let command = try await db.reconciler(["changes", "--since", "\(stored)"])
        #expect(command.status == 0, "\(command.stderr)")
        #expect(try Self.completeLines(command.stdout).map { try Self.decode($0).originalTransactionId } == ["ids-1"])
    }

    // MARK: A rehearsal: one row per change, and a follower killed and restarted

    /// Live traffic, an outage and a run over it: the feed chains each purchase's states from
    /// nothing to what `export` shows, one row per change; a `changes --follow` consumer killed
    /// mid-run and restarted from the last id it printed prints the whole feed, once, in order.
    @Test func theFeedHoldsEachChangeOnceAndAKilledFollowerMissesNoneAndRepeatsNone() async throws {
        try await Rehearsal.with(customers: 60, seed: 61, mockArguments: ["--latency-ms", "40"]) { rehearsal in
            let live = try await rehearsal.db.count("SELECT count(*) FROM purchase_changes")
            #expect(live > 0)
            let first = try rehearsal.start(["changes", "--follow", "--since", "0", "--batch", "7"])
            defer { first.signal(SIGKILL) }
            try await eventually("the follower caught up with the live traffic") {
                Self.completeLines(first.stdout).count >= live
            }
            let run = try rehearsal.start([
                "run", "--start", rehearsal.outageStart, "--end", rehearsal.outageEnd,
                "--concurrency", "1", "--gap-concurrency", "1",
            ])
            defer { run.signal(SIGKILL) }
            try await eventually("the follower printed a change of the run") {
                first.stdout.contains(#""source":"history""#)
            }
            #expect(run.process.isRunning, "the run ended before the follower was killed")
            first.signal(SIGKILL)
            _ = try await first.wait()
            let beforeKill = Self.completeLines(first.stdout)
            let lastId = try Self.decode(try #require(beforeKill.last)).changeId
            let second = try rehearsal.start(["changes", "--follow", "--since", "\(lastId)"])
            defer { second.signal(SIGKILL) }

            let finished = try await run.wait()
            #expect(finished.status == 0, "\(finished.stdout)\n\(finished.stderr)")
            let total = try await rehearsal.db.count("SELECT count(*) FROM purchase_changes")
            #expect(total > live)
            try await eventually("the follower drained the feed") {
                beforeKill.count + Self.completeLines(second.stdout).count >= total
            }
            var whole: [String] = []
            try await eventually("the whole feed readable") {
                let result = try await rehearsal.reconciler(["changes", "--since", "0"])
                whole = Self.completeLines(result.stdout)
                return result.status == 0 && whole.count == total
            }
            // Every line is printed (above): the follower is ended without a signal contract (its
            // exit 0 on SIGTERM is aFollowerWakesOnNotifyReconnectsAndStopsCleanly's).
            second.kill()
            let followed = beforeKill + Self.completeLines(second.stdout)
            #expect(followed.count == whole.count)
            #expect(followed == whole, "the killed and restarted follower did not print the feed exactly once, in order")

            // One purchase row per change: per purchase, each row starts from the previous row's
            // state and changes something (`entitled` aside: it is judged at each commit; and
            // `lastSignedDate`, which a notification that changed nothing else moves with no
            // purchase row: it has a row of kind `notification`).
            let changes = try whole.map(Self.decode)
            #expect(Set(changes.map(\.changeId)).count == changes.count)
            var states: [String: PurchaseState] = [:]
            for change in changes where change.kind == .purchase {
                let original = try #require(change.originalTransactionId)
                var before = change.before, after = try #require(change.after)
                let entitled = (before?.entitled, after.entitled)
                before?.entitled = false
                before?.lastSignedDate = nil
                (after.entitled, after.lastSignedDate) = (false, nil)
                if let previous = states[original] {
                    #expect(before == previous, "change \(change.changeId) of \(original) does not follow the previous one")
                } else {
                    #expect(before == nil, "the first change \(change.changeId) of \(original) has a before state")
                }
                if change.source == .time {
                    // Time ended the entitlement (a serve or a run found the moment passed): only
                    // `entitled` differs, from true to false, and no run or notification made it.
                    #expect(before == after && entitled.0 == true && entitled.1 == false, "time row \(change.changeId) of \(original)")
                    #expect(change.runId == nil && change.notificationUUID == nil, "time row \(change.changeId) names a run or a notification")
                } else {
                    #expect(before != after, "change \(change.changeId) changes nothing")
                    #expect((change.source == .webhook) == (change.runId == nil))
                }
                #expect(after.originalTransactionId == original)
                // The notification that caused it, by its type; none for transaction history and status refresh.
                #expect(change.respondBy == nil && (change.notificationType == nil) == (change.notificationUUID == nil))
                states[original] = after
            }
            #expect(changes.contains { $0.kind == .purchase && $0.source == .webhook })
            #expect(changes.contains { $0.kind == .purchase && $0.source == .history && $0.notificationUUID != nil })
            // Subscriptions that ran out in the last day with no notification (serve's leader and the
            // run found their moments passed): their time rows are among the rows checked above.
            #expect(changes.contains { $0.kind == .purchase && $0.source == .time })
            // Every notification recorded is in the feed exactly once: named by the purchase row of
            // the change it made, or in a notification row of its own (those of the outage with the
            // run's id), whatever its type, the ones without `data` included.
            let notificationRows = changes.filter { $0.kind == .notification }
            #expect(notificationRows.allSatisfy { $0.before == nil && $0.after == nil && $0.notificationType != nil && $0.notificationUUID != nil })
            #expect(notificationRows.contains { $0.source == .history && $0.runId != nil } && notificationRows.contains { $0.source == .webhook })
            // (One with a deadline has its own row even when it also names the purchase row of a change it made.)
            let named = changes.filter { $0.source == .webhook || $0.source == .history }
            for (uuid, rows) in Dictionary(grouping: named, by: { $0.notificationUUID ?? "" }) where rows.count > 1 {
                #expect(
                    rows.count == 2 && rows.contains { $0.kind == .purchase } && rows.contains { $0.kind == .notification && $0.respondBy != nil },
                    "notification \(uuid) is in the feed \(rows.count) times")
            }
            let recorded = try await rehearsal.db.strings("SELECT notification_uuid FROM notifications")
            #expect(Set(named.compactMap(\.notificationUUID)) == Set(recorded))
            let noPurchase = Set(notificationRows.map(\.notificationType))
            #expect(
                noPurchase.isSuperset(of: ["RENEWAL_EXTENSION", "EXTERNAL_PURCHASE_TOKEN", "RESCIND_CONSENT", "CONSUMPTION_REQUEST"]), "\(noPurchase)"
            )
            // Consumption requests carry their deadline, 12 hours after Apple's first send attempt.
            let requests = notificationRows.filter { $0.notificationType == "CONSUMPTION_REQUEST" }
            #expect(requests.allSatisfy { ($0.respondBy ?? 0) > ($0.signedDate ?? .max) && $0.transactionId != nil })
            // The last state of each purchase is what export shows (`lastSignedDate` aside, above).
            var exported: [String: PurchaseState] = [:]
            for line in try await rehearsal.export().split(separator: "\n") {
                var state = try JSONDecoder().decode(PurchaseState.self, from: Data(line.utf8))
                (state.entitled, state.lastSignedDate) = (false, nil)
                exported[state.originalTransactionId] = state
            }
            #expect(!exported.isEmpty)
            #expect(exported == states)
            // --kind prints one kind of row, in the same order.
            let purchases = try await rehearsal.reconciler(["changes", "--kind", "purchase"])
            #expect(
                try Self.completeLines(purchases.stdout).map { try Self.decode($0).changeId }
                    == changes.filter { $0.kind == .purchase }.map(\.changeId))
            let events = try await rehearsal.reconciler(["changes", "--kind", "notification"])
            #expect(try Self.completeLines(events.stdout).map { try Self.decode($0).changeId } == notificationRows.map(\.changeId))
        }
    }

    /// A purchase row says what caused it: a run that replays a REFUND and a DID_RENEW writes
    /// purchase rows with those types and subtypes (of the notification each names), so a consumer
    /// can react to the event; the gap fill's rows (transaction history, status refresh) have none.
    @Test func purchaseRowsCarryTheTypeOfTheNotificationThatCausedThem() async throws {
        let hour: Int64 = 3_600_000
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let (start, end) = (now - 6 * hour, now - 3 * hour)
        try await HistoryMock.with([
            "--seed", "33", "--customers", "30", "--span", "3d", "--outage-start", "\(start)", "--outage-end", "\(end)", "--rate-limit", "0",
        ]) { mock in
            let run = try await mock.reconciler(["run", "--start", "\(start)", "--end", "\(end)"], environment: ["APP_STORE_RATE_LIMIT": "1000"])
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            let printed = try await mock.reconciler(["changes", "--kind", "purchase"])
            #expect(printed.status == 0, "\(printed.stderr)")
            let rows = try Self.completeLines(printed.stdout).map(Self.decode)
            var recorded: [String: (type: String, subtype: String?)] = [:]
            for line in try await mock.db.strings(
                "SELECT notification_uuid || ' ' || notification_type || coalesce(' ' || subtype, '') FROM notifications")
            {
                let parts = line.split(separator: " ").map(String.init)
                recorded[parts[0]] = (parts[1], parts.count > 2 ? parts[2] : nil)
            }
            for row in rows {
                switch row.source {
                case .history, .webhook:
                    let cause = try #require(row.notificationUUID.flatMap { recorded[$0] }, "change \(row.changeId) names no recorded notification")
                    #expect(row.notificationType == cause.type && row.subtype == cause.subtype, "change \(row.changeId)")
                default:
                    #expect(row.notificationType == nil && row.subtype == nil && row.notificationUUID == nil, "change \(row.changeId)")
                }
            }
            let replayed = Set(rows.filter { $0.source == .history }.compactMap(\.notificationType))
            #expect(replayed.isSuperset(of: ["REFUND", "DID_RENEW"]), "\(replayed)")
            #expect(rows.contains { $0.source == .transactionHistory || $0.source == .statusRefresh }, "no gap-fill row to check")
        }
    }

    // MARK: The command: resuming, batches, retention

    /// `changes --run-id` prints one run's changes; a run's report lists a bounded number of the
    /// purchases it changed and says how many there were.
    @Test func aRunsChangesInTheFeedAndInItsReport() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            _ = try await handler.handle(signedPayload: try subscribed("live-1"), source: .webhook)
            for index in 1...3 { _ = try await handler.handle(signedPayload: try subscribed("run-\(index)"), source: .history(runId: 77)) }
            try await eventually("the feed readable") { try await Self.feed(db).count == 4 }
            let ofRun = try await db.reconciler(["changes", "--run-id", "77"])
            #expect(ofRun.status == 0, "\(ofRun.stderr)")
            #expect(try Self.completeLines(ofRun.stdout).map { try Self.decode($0).originalTransactionId } == ["run-1", "run-2", "run-3"])
            for arguments in [["--run-id", "0"], ["--run-id", "x"], ["--newest", "--run-id", "77"], ["--prune-before", "30d", "--run-id", "77"]] {
                let refused = try await db.reconciler(["changes"] + arguments)
                #expect(refused.status == 1, "\(arguments): \(refused.stderr)")
            }

            let ledger = RunLedger(database: db.database)
            let run = try await ledger.createRun(
                kind: .manual, app: AppTarget(bundleId: "com.example", environment: .production), window: TimeWindow(milliseconds: 0..<1),
                dryRun: false, options: .init(), shards: [], holder: "test")
            let changes = (1...5).map { PurchaseChange(before: nil, after: PurchaseState(originalTransactionId: "changed-\($0)")) }
            try await db.database.transaction { try await ledger.recordChanges(runId: run.runId, changes, on: $0) }
            let listed = try await ledger.changes(runId: run.runId, limit: 2)
            #expect(listed.total == 5)
            #expect(listed.changes.map(\.after.originalTransactionId) == ["changed-1", "changed-2"])
        }
    }

    @Test func sincePrunedIdsAndRetention() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            for index in 1...6 { _ = try await handler.handle(signedPayload: try subscribed("prune-\(index)"), source: .webhook) }
            try await eventually("the feed readable") { try await Self.feed(db).count == 6 }
            let ids = try await Self.feed(db).map(\.changeId)

            // Every line has the same keys; batches and limits do not change what is printed.
            let all = try await db.reconciler(["changes"])
            #expect(all.status == 0, "\(all.stderr)")
            let lines = Self.completeLines(all.stdout)
            #expect(try lines.map { try Self.decode($0).changeId } == ids)
            for line in lines {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                #expect(
                    Set(object.keys) == [
                        "changeId", "kind", "originalTransactionId", "bundleId", "environment", "appAccountToken", "source", "notificationUUID",
                        "runId", "before", "after", "changedAt", "notificationType", "subtype", "transactionId", "signedDate", "respondBy",
                        "appUserId",
                    ])
            }
            #expect(lines[0].contains(#""before":null"#) && lines[0].contains(#""runId":null"#))
            // Purchase rows carry the notification row's keys as null (every line has the union of keys).
            #expect(lines.allSatisfy { $0.contains(#""kind":"purchase""#) && $0.contains(#""respondBy":null"#) })
            let batched = try await db.reconciler(["changes", "--since", "0", "--batch", "2"])
            #expect(Self.completeLines(batched.stdout) == lines)
            let limited = try await db.reconciler(["changes", "--since", "\(ids[1])", "--limit", "3", "--batch", "2"])
            #expect(Self.completeLines(limited.stdout) == Array(lines[2..<5]))
            let newest = try await db.reconciler(["changes", "--newest"])
            #expect(newest.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "\(ids[5])")

            // Refused before anything is read or deleted.
            for arguments in [
                ["--since", "abc"], ["--since", "-3"], ["--prune-before", "30"], ["--prune-before", "30m"],
                ["--prune-before", "30d", "--follow"], ["--prune-before", "soon"], ["--batch", "0"],
                ["--app-account-token", "not-a-uuid"],
            ] {
                let refused = try await db.reconciler(["changes"] + arguments)
                #expect(refused.status == 1, "\(arguments): \(refused.stderr)")
                #expect(refused.stdout.isEmpty)
            }
            #expect(try await db.count("SELECT count(*) FROM purchase_changes") == 6)

            // Rows 1, 2 and 4 are old; 3 is not, so only 1 and 2 go: the feed loses a prefix only.
            try await db.execute(
                """
                UPDATE purchase_changes SET changed_at = now() - interval '40 days' WHERE change_id = ANY(\([ids[0], ids[1], ids[3]]))
                """)
            let pruned = try await db.reconciler(["changes", "--prune-before", "30d"])
            #expect(pruned.status == 0, "\(pruned.stderr)")
            #expect(pruned.stdout.hasPrefix("pruned 2 changes"), "\(pruned.stdout)")
            #expect(try await db.strings("SELECT change_id::text FROM purchase_changes ORDER BY change_id") == ids[2...].map { "\($0)" })

            // A consumer whose last id is gone must resync: exit 1, nothing printed.
            let gone = try await db.reconciler(["changes", "--since", "\(ids[1])"])
            #expect(gone.status == 1)
            #expect(gone.stdout.isEmpty)
            #expect(gone.stderr.contains("change \(ids[1]) is not in the feed"), "\(gone.stderr)")
            let kept = try await db.reconciler(["changes", "--since", "\(ids[2])"])
            #expect(kept.status == 0, "\(kept.stderr)")
            #expect(try Self.completeLines(kept.stdout).map { try Self.decode($0).changeId } == Array(ids[3...]))

            // Everything old: all go but the newest, so a consumer that is caught up can resume.
            try await db.execute("UPDATE purchase_changes SET changed_at = now() - interval '40 days'")
            let again = try await db.reconciler(["changes", "--prune-before", "30d"])
            #expect(again.stdout.hasPrefix("pruned 3 changes"), "\(again.stdout)")
            #expect(try await db.strings("SELECT change_id::text FROM purchase_changes") == ["\(ids[5])"])
            let caughtUp = try await db.reconciler(["changes", "--since", "\(ids[5])"])
            #expect(caughtUp.status == 0, "\(caughtUp.stderr)")
            #expect(caughtUp.stdout.isEmpty)
        }
    }

    /// A follower that is behind when a prune removes the rows it has not read
    /// yet ends as a reader started after the prune would (exit 1, "resync"), instead of going on
    /// after the gap. The follower is stopped (SIGSTOP) while the rows are written and pruned, so
    /// it is behind for certain, and continued afterwards.
    @Test func aFollowerBehindAPruneEndsAsAtStart() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            _ = try await handler.handle(signedPayload: try subscribed("behind-0"), source: .webhook)
            let follower = try RunningProcess(
                "reconciler", ["changes", "--since", "0", "--follow", "--poll-interval", "100ms"],
                environment: ["DATABASE_URL": db.url, "LOG_LEVEL": "warning"])
            defer { follower.signal(SIGKILL) }
            try await eventually("the follower caught up") { Self.completeLines(follower.stdout).count == 1 }
            // Stopped outside a transaction: one it held open would keep the prune from reaching the new rows.
            let busy: PostgresQuery = """
                SELECT count(*) FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid() AND (state LIKE 'idle in transaction%' OR state = 'active')
                  AND query NOT ILIKE 'LISTEN%'
                """
            try await eventually("the follower stopped between reads") {
                follower.signal(SIGSTOP)
                if try await db.count(busy) == 0 { return true }
                follower.signal(SIGCONT)
                return false
            }
            for index in 1...3 { _ = try await handler.handle(signedPayload: try subscribed("behind-\(index)"), source: .webhook) }
            try await eventually("the rows readable") { try await Self.feed(db).count == 4 }
            let ids = try await Self.feed(db).map(\.changeId)
            // All but the newest are old: the prune takes the row the follower read and the two it did not.
            try await db.execute("UPDATE purchase_changes SET changed_at = now() - interval '40 days' WHERE change_id <> \(ids[3])")
            let pruned = try await db.reconciler(["changes", "--prune-before", "30d"])
            #expect(pruned.status == 0 && pruned.stdout.hasPrefix("pruned 3 changes"), "\(pruned.stdout) \(pruned.stderr)")
            let atStart = try await db.reconciler(["changes", "--since", "\(ids[0])"])
            #expect(atStart.status == 1)

            follower.signal(SIGCONT)
            try await eventually("the follower ended or read past the gap") {
                !follower.process.isRunning || Self.completeLines(follower.stdout).count > 1
            }
            // One that read past the gap is ended by SIGKILL: its status (9) is not 1 either.
            follower.kill()
            let ended = try await follower.wait(timeout: .seconds(30))
            #expect(ended.status == atStart.status, "\(ended.stderr)")
            #expect(Self.completeLines(ended.stdout).count == 1, "nothing after the gap")
            #expect(ended.stderr.contains("resync this consumer"), "\(ended.stderr)")
        }
    }

    /// `--follow` wakes on the commit's notification (the poll interval here is an hour), gets its
    /// LISTEN connection back after the server drops it, and ends with exit 0 on SIGTERM.
    @Test func aFollowerWakesOnNotifyReconnectsAndStopsCleanly() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            let follower = try RunningProcess(
                "reconciler", ["changes", "--follow", "--poll-interval", "1h"],
                environment: ["DATABASE_URL": db.url, "LOG_LEVEL": "warning"])
            defer { follower.signal(SIGKILL) }
            var written = 0
            /// Writes a change and waits for the follower to print `count` lines, again if need be:
            /// another test's transaction can hold a change back when its notification arrives; the
            /// next change's notification then brings both.
            func writeUntilPrinted(_ count: Int) async throws {
                for _ in 0..<20 {
                    written += 1
                    let payload = try subscribed("follow-\(written)", signedDate: t0 + Int64(written))
                    _ = try await handler.handle(signedPayload: payload, source: .webhook)
                    do {
                        try await eventually("the follower printed \(count) changes", timeout: .seconds(15)) {
                            Self.completeLines(follower.stdout).count >= count
                        }
                        return
                    } catch is ProcessFailure {
                        #expect(follower.process.isRunning, "\(follower.stderr)")
                    }
                }
                Issue.record("the follower never printed \(count) changes: \(follower.stderr)")
            }
            let listeners: PostgresQuery = "SELECT pid::text FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'"
            try await eventually("the follower listening") { try await db.strings(listeners).count == 1 }
            let listener = try await db.strings(listeners)
            try await writeUntilPrinted(1)
            // The server drops the LISTEN connection: the follower listens again and goes on.
            try await db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid::text = \(listener[0])")
            try await eventually("the follower listening again") {
                let now = try await db.strings(listeners)
                return now.count == 1 && now != listener && follower.stderr.contains("reconnecting")
            }
            let printed = Self.completeLines(follower.stdout).count
            try await writeUntilPrinted(printed + 1)
            follower.signal(SIGTERM)
            let stopped = try await follower.wait(timeout: .seconds(30))
            #expect(stopped.status == 0, "\(stopped.stderr)")
            let lines = Self.completeLines(stopped.stdout)
            #expect(try lines.map { try Self.decode($0).changeId } == (try await Self.feed(db)).prefix(lines.count).map(\.changeId))
        }
    }

    /// `changes | head -1`: the reader takes one line and closes the pipe while `changes` is still
    /// writing (the pipe holds a page, the feed a dozen lines). The command ends quietly, exit 0,
    /// with no "Broken pipe" (before: a Cocoa error and a non-zero exit).
    @Test func aReaderThatClosesThePipeEndsTheCommandQuietly() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            for index in 1...12 { _ = try await handler.handle(signedPayload: try subscribed("head-\(index)"), source: .webhook) }
            try await eventually("the feed readable") { try await Self.feed(db).count == 12 }
            let pipe = try ReaderPipe()
            // Only a write can tell it the reader is gone: the check while idle waits an hour.
            let changes = try RunningProcess(
                "reconciler", ["changes", "--since", "0", "--output-check-interval", "1h"],
                environment: ["DATABASE_URL": db.url, "LOG_LEVEL": "warning"], standardOutput: pipe.writing)
            pipe.closeWriting()
            let first = try #require(try await pipe.readLine())
            #expect(try Self.decode(first).originalTransactionId == "head-1")
            pipe.closeReading()
            let ended = try await changes.wait(timeout: .seconds(60))
            #expect(ended.status == 0, "\(ended.stderr)")
            #expect(!ended.stderr.localizedCaseInsensitiveContains("broken pipe") && !ended.stderr.contains("Error"), "\(ended.stderr)")
        }
    }

    /// A `changes --follow` consumer dies while the feed is quiet: nothing is written, so the
    /// follower looks at its standard output every --output-check-interval, sees the pipe's
    /// reader gone and ends quietly (exit 0), releasing its connections (before: it held them
    /// until the next change, then died on "Broken pipe").
    @Test func anIdleFollowerWhoseReaderIsGoneEndsAndReleasesItsConnection() async throws {
        try await TestDatabase.with { db in
            let handler = try app.handler(db)
            _ = try await handler.handle(signedPayload: try subscribed("idle-1"), source: .webhook)
            try await eventually("the feed readable") { try await Self.feed(db).count == 1 }
            let pipe = try ReaderPipe()
            let follower = try RunningProcess(
                "reconciler", ["changes", "--follow", "--since", "0", "--poll-interval", "1h", "--output-check-interval", "100ms"],
                environment: ["DATABASE_URL": db.url, "LOG_LEVEL": "warning"], standardOutput: pipe.writing)
            defer { follower.kill() }
            pipe.closeWriting()
            let first = try #require(try await pipe.readLine())
            #expect(try Self.decode(first).originalTransactionId == "idle-1")
            let listeners: PostgresQuery = "SELECT pid::text FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN%'"
            try await eventually("the follower listening") { try await db.strings(listeners).count == 1 }
            pipe.closeReading()
            // A generous bound, only to catch a follower that never ends.
            let ended = try await follower.wait(timeout: .seconds(60))
            #expect(ended.status == 0, "\(ended.stderr)")
            #expect(!ended.stderr.localizedCaseInsensitiveContains("broken pipe") && !ended.stderr.contains("Error"), "\(ended.stderr)")
            try await eventually("the follower's connections closed") { try await db.strings(listeners).isEmpty }
        }
    }

    // MARK: Entitlement, through the handler, export and the feed

    /// One purchase of an entitlement case, signing its notifications relative to `now`.
    struct CasePurchase {
        let app: TestApp
        let original: String
        /// The app's user (appAccountToken) on its transactions.
        let token: String
        let now: Int64
        static let day: Int64 = 86_400_000

        /// A notification signed `ago` ms before now, carrying the purchase's transaction expiring
        /// at `expires` (revoked at `revoked`), and renewal info when given.
        func notification(
            _ type: NotificationTypeV2, _ subtype: Subtype? = nil, ago: Int64, expires: Int64, revoked: Int64? = nil,
            familyShared: Bool = false, autoRenew: AutoRenewStatus = .on, billingRetry: Bool? = nil, graceEnds: Int64? = nil,
            status: Status
        ) throws -> String {
            let signed = now - ago
            var transaction = app.subscription(original: original, period: 0, signedDate: signed, revocationDate: revoked)
            transaction.expiresDate = expires
            transaction.appAccountToken = token
            if familyShared { transaction.inAppOwnershipType = .familyShared }
            let renewal = app.renewal(
                original: original, autoRenew: autoRenew, signedDate: signed, isInBillingRetryPeriod: billingRetry,
                gracePeriodExpiresDate: graceEnds)
            return try app.notification(type, subtype, signedDate: signed, transaction: transaction, renewal: renewal, status: status)
        }
    }

    struct EntitlementCase: Sendable, CustomStringConvertible {
        var name: String
        /// The purchase's notifications, in order.
        var notifications: @Sendable (CasePurchase) throws -> [String]
        var status: Int32
        var entitled: Bool
        /// `entitled` when the app keeps access during billing retry (RECONCILER_ENTITLE_BILLING_RETRY).
        var entitledWhenBillingRetryEntitles: Bool
        var description: String { name }
    }

    static let entitlementCases: [EntitlementCase] = {
        let day = CasePurchase.day
        return [
            EntitlementCase(
                name: "active",
                notifications: { p in
                    [try p.notification(.subscribed, .initialBuy, ago: 60_000, expires: p.now + 10 * day, status: .active)]
                }, status: 1, entitled: true, entitledWhenBillingRetryEntitles: true),
            EntitlementCase(
                name: "expired",
                notifications: { p in
                    [try p.notification(.expired, .voluntary, ago: 60_000, expires: p.now - day, autoRenew: .off, status: .expired)]
                }, status: 2, entitled: false, entitledWhenBillingRetryEntitles: false),
            EntitlementCase(
                name: "grace period",
                notifications: { p in
                    [
                        try p.notification(
                            .didFailToRenew, .gracePeriod, ago: 60_000, expires: p.now - 3_600_000, billingRetry: true,
                            graceEnds: p.now + 5 * day, status: .billingGracePeriod)
                    ]
                }, status: 4, entitled: true, entitledWhenBillingRetryEntitles: true),
            EntitlementCase(
                name: "billing retry",
                notifications: { p in
                    [try p.notification(.didFailToRenew, ago: 60_000, expires: p.now - day, billingRetry: true, status: .billingRetry)]
                }, status: 3, entitled: false, entitledWhenBillingRetryEntitles: true),
            EntitlementCase(
                name: "refund",
                notifications: { p in
                    [
                        try p.notification(.subscribed, .initialBuy, ago: 120_000, expires: p.now + 10 * day, status: .active),
                        try p.notification(.refund, ago: 60_000, expires: p.now + 10 * day, revoked: p.now - 70_000, status: .revoked),
                    ]
                }, status: 5, entitled: false, entitledWhenBillingRetryEntitles: false),
            EntitlementCase(
                name: "refund reversed",
                notifications: { p in
                    [
                        try p.notification(.subscribed, .initialBuy, ago: 180_000, expires: p.now + 10 * day, status: .active),
                        try p.notification(.refund, ago: 120_000, expires: p.now + 10 * day, revoked: p.now - 130_000, status: .revoked),
                        try p.notification(.refundReversed, ago: 60_000, expires: p.now + 10 * day, status: .active),
                    ]
                }, status: 1, entitled: true, entitledWhenBillingRetryEntitles: true),
            EntitlementCase(
                name: "family sharing revoke",
                notifications: { p in
                    [
                        try p.notification(.subscribed, .initialBuy, ago: 120_000, expires: p.now + 10 * day, familyShared: true, status: .active),
                        try p.notification(
                            .revoke, ago: 60_000, expires: p.now + 10 * day, revoked: p.now - 70_000, familyShared: true, status: .revoked),
                    ]
                }, status: 5, entitled: false, entitledWhenBillingRetryEntitles: false),
        ]
    }()

    /// Each case's notifications go through the real handler and store, with the app's billing
    /// retry choice (RECONCILER_ENTITLE_BILLING_RETRY) off and on; `reconciler export` and the
    /// feed's last row of the purchase (`reconciler changes --app-account-token`) say the same.
    @Test(arguments: [false, true])
    func entitlementRules(billingRetryEntitles: Bool) async throws {
        try await TestDatabase.with { db in
            let database = Database(client: db.client, logger: Self.logger)
            let handler = NotificationHandler(
                verifier: try SignedDataVerifier(configuration: app.verifierConfiguration), database: database,
                entitlement: .init(billingRetryEntitles: billingRetryEntitles))
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            var tokens: [String: String] = [:]
            for (index, entitlementCase) in Self.entitlementCases.enumerated() {
                let original = "entitled-\(index)", token = UUID().uuidString.lowercased()
                tokens[original] = token
                for payload in try entitlementCase.notifications(CasePurchase(app: app, original: original, token: token, now: now)) {
                    #expect(try await handler.handle(signedPayload: payload, source: .webhook).outcome == .applied, "\(entitlementCase)")
                }
            }
            let environment = ["DATABASE_URL": db.url, "LOG_LEVEL": "warning", "RECONCILER_ENTITLE_BILLING_RETRY": billingRetryEntitles ? "1" : ""]
            let export = try await runProcess("reconciler", ["export"], environment: environment)
            #expect(export.status == 0, "\(export.stderr)")
            var exported: [String: PurchaseState] = [:]
            for line in export.stdout.split(separator: "\n") {
                let state = try JSONDecoder().decode(PurchaseState.self, from: Data(line.utf8))
                exported[state.originalTransactionId] = state
            }
            for (index, entitlementCase) in Self.entitlementCases.enumerated() {
                let original = "entitled-\(index)", token = try #require(tokens[original])
                let expected = billingRetryEntitles ? entitlementCase.entitledWhenBillingRetryEntitles : entitlementCase.entitled
                let state = try #require(exported[original], "\(entitlementCase)")
                #expect(state.entitled == expected, "export: \(entitlementCase)")
                #expect(state.status == entitlementCase.status, "export: \(entitlementCase)")
                #expect(state.appAccountToken == token)
                // Other tests' transactions in the cluster may hold the feed back a moment (commit
                // order), its later rows longer than its first: wait until every purchase row is readable.
                let stored = try await db.count(
                    "SELECT count(*) FROM purchase_changes WHERE original_transaction_id = \(original) AND kind = 'purchase'")
                var read: ProcessResult?
                try await eventually("the purchase's changes readable") {
                    let result = try await runProcess("reconciler", ["changes", "--app-account-token", token.uppercased()], environment: environment)
                    read = result
                    guard result.status == 0 else { return true }
                    return try Self.completeLines(result.stdout).map(Self.decode).filter { $0.kind == .purchase }.count >= stored
                }
                let feed = try #require(read)
                #expect(feed.status == 0, "\(feed.stderr)")
                let changes = try Self.completeLines(feed.stdout).map(Self.decode)
                #expect(
                    !changes.isEmpty && changes.allSatisfy { $0.originalTransactionId == original && $0.appAccountToken == token },
                    "feed of \(entitlementCase)")
                // The last purchase row (a notification that changed nothing else has a row of its own).
                let last = try #require(changes.last { $0.kind == .purchase }?.after)
                #expect(last.entitled == expected, "feed: \(entitlementCase)")
                #expect(last.status == entitlementCase.status, "feed: \(entitlementCase)")
            }
        }
    }

}
