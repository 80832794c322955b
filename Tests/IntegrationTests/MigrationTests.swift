import AppStoreServer
import Foundation
import MockAppStore
import PostgresNIO
import Reconciler
import ReconcilerDomain
import TestSupport
import Testing

@testable import ReconcilerStore

/// Migrations against a real PostgreSQL: applied once, refused when changed, atomic, and what each
/// data migration does.
@Suite struct MigrationTests {
    @Test func migrateAppliesEachOnceEvenWhenRunConcurrently() async throws {
        try await TestDatabase.with(migrate: false) { db in
            let applied = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<4 { group.addTask { try await Migrator().migrate(db.client, logger: TestDatabase.logger).count } }
                return try await group.reduce(0, +)
            }
            let expected = Migration.embedded.count
            #expect(applied == expected)
            #expect(try await db.count("SELECT count(*) FROM schema_migrations") == expected)
            #expect(try await Migrator().migrate(db.client, logger: TestDatabase.logger).isEmpty)
            try await Migrator().requireCurrent(db.client, logger: TestDatabase.logger)
        }
    }

    @Test func aChangedAppliedMigrationIsRefused() async throws {
        try await TestDatabase.with(migrate: false) { db in
            let original = Migration(fileName: "0001_first.sql", sql: "CREATE TABLE first (id int);")
            try await Migrator(migrations: [original]).migrate(db.client, logger: TestDatabase.logger)
            let edited = Migration(fileName: "0001_first.sql", sql: "CREATE TABLE first (id bigint);")
            let error = await #expect(throws: ReconcilerError.self) {
                try await Migrator(migrations: [edited, Migration(fileName: "0002_second.sql", sql: "CREATE TABLE second (id int);")])
                    .migrate(db.client, logger: TestDatabase.logger)
            }
            #expect(error?.description.contains("changed after it was applied") == true)
            #expect(try await db.count("SELECT count(*) FROM pg_tables WHERE tablename = 'second'") == 0)
            // A database that is ahead of this binary is refused too.
            await #expect(throws: ReconcilerError.self) {
                try await Migrator(migrations: []).migrate(db.client, logger: TestDatabase.logger)
            }
        }
    }

    @Test func aFailingMigrationLeavesNothingBehind() async throws {
        try await TestDatabase.with(migrate: false) { db in
            let broken = Migration(fileName: "0001_broken.sql", sql: "CREATE TABLE half (id int);\nCREATE TABLE oops (id nosuchtype);")
            await #expect(throws: ReconcilerError.self) {
                try await Migrator(migrations: [broken]).migrate(db.client, logger: TestDatabase.logger)
            }
            let halfTables = try await db.count("SELECT count(*) FROM pg_tables WHERE tablename = 'half'")
            let recorded = try await db.count("SELECT count(*) FROM schema_migrations")
            #expect(halfTables == 0)
            #expect(recorded == 0)
            await #expect(throws: ReconcilerError.self) {
                try await Migrator(migrations: [broken]).requireCurrent(db.client, logger: TestDatabase.logger)
            }
        }
    }

    /// A file rewritten in place is accepted in a database that recorded one of its former
    /// checksums; any other change still is not.
    @Test func aMigrationRewrittenInPlaceAcceptsItsFormerChecksumOnly() async throws {
        try await TestDatabase.with(migrate: false) { db in
            let original = Migration(fileName: "0001_first.sql", sql: "CREATE TABLE first (id int);")
            try await Migrator(migrations: [original]).migrate(db.client, logger: TestDatabase.logger)
            let rewritten = Migration(
                fileName: "0001_first.sql", sql: "CREATE TABLE IF NOT EXISTS first (id int);", formerChecksums: [original.checksum])
            let second = Migration(fileName: "0002_second.sql", sql: "CREATE TABLE second (id int);")
            #expect(try await Migrator(migrations: [rewritten, second]).migrate(db.client, logger: TestDatabase.logger) == [second])
            let edited = Migration(
                fileName: "0001_first.sql", sql: "CREATE TABLE first (id bigint);", formerChecksums: ["0" + original.checksum.dropFirst()])
            await #expect(throws: ReconcilerError.self) {
                try await Migrator(migrations: [edited, second]).migrate(db.client, logger: TestDatabase.logger)
            }
        }
        // 0013's first text is one of its former checksums.
        let embedded = try #require(Migration.embedded.first { $0.version == 13 })
        let former = Migration(fileName: embedded.fileName, sql: Self.former0013)
        #expect(former.checksum == "a6a70bd9a1f5b76551296967c246e9ab6919edaee9ccdc7f5d73beadbd58d9a0")
        #expect(embedded.checksum != former.checksum && embedded.formerChecksums == [former.checksum])
    }

    /// A database that applied 0013's first text migrates on with the rewrite's binary, and both
    /// texts fill every row with the same app and environment and leave the same schema: a
    /// database of two apps with every kind of row whose app comes from somewhere else (a purchase
    /// known only by its notification, a TEST notification, a notification whose transaction is
    /// not stored, a transaction naming no app, a revision under a history anchor, sandbox rows, a
    /// forward whose notification is gone).
    @Test func bothTextsOf0013FillTheSameAppsAndLeaveTheSameSchema() async throws {
        func migrated(former: Bool) async throws -> (rows: [String], schema: [String]) {
            try await TestDatabase.with(migrate: false) { db in
                try await Migrator(migrations: Migration.embedded.filter { $0.version < 13 }).migrate(db.client, logger: TestDatabase.logger)
                try await Self.insertRowsBefore0013(db, bundleId: "com.example.one", first: 1, count: 40)
                try await Self.insertRowsBefore0013(db, bundleId: "com.example.two", first: 1001, count: 6)
                try await Self.insertRowsBefore0013(db, bundleId: "com.example.one", first: 2001, count: 5, environment: "Sandbox")
                try await Self.insertEdgeRowsBefore0013(db, bundleId: "com.example.two")
                var migrations = Migration.embedded
                if former {
                    migrations = migrations.filter { $0.version != 13 } + [Migration(fileName: "0013_every_app.sql", sql: Self.former0013)]
                }
                try await Migrator(migrations: migrations, defaultBundleId: "com.example.configured").migrate(db.client, logger: TestDatabase.logger)
                #expect(try await db.count("SELECT count(*) FROM schema_migrations") == Migration.embedded.count)
                if former {
                    // The rewrite's binary accepts it and finds nothing to do.
                    #expect(try await Migrator(defaultBundleId: "com.example.configured").migrate(db.client, logger: TestDatabase.logger).isEmpty)
                }
                return (try await db.strings(Self.appsOfEveryRow), try await db.strings(Self.schemaCatalog))
            }
        }
        let before = try await migrated(former: true)
        let after = try await migrated(former: false)
        let (sameRows, sameSchema) = (after.rows == before.rows, after.schema == before.schema)
        #expect(sameRows, "\(after.rows.count) rows; differing: \(Set(after.rows).symmetricDifference(before.rows).sorted())")
        #expect(sameSchema, "differing: \(Set(after.schema).symmetricDifference(before.schema).sorted())")
        // What the edge rows got (both texts agree, as checked above).
        for expected in [
            "purchases 1900 com.example.two Sandbox", "notifications n-test com.example.two Production",
            "notifications n-unstored com.example.two Production", "transactions 1901 com.example.configured Production",
            "history_revisions 5001020 com.example.two Sandbox", "forward_queue n-gone com.example.configured Production",
            "purchase_changes 1900 com.example.two Sandbox", "purchases 3001 com.example.one Sandbox",
        ] {
            let found = after.rows.contains(expected)
            #expect(found, "\(expected)")
        }
    }

    /// Migration 0013 finds each row's app by joins the tables' keys serve: it reads each table and
    /// index a few times at most, never once per row of another (its first text looked up every
    /// purchase's and every revision's app with a subquery no index served, after rebuilding the
    /// keys). From PostgreSQL's statistics, per table: the rows its scans read, and the blocks of
    /// its indexes visited (a scan through a whole index for one row reads few rows but every block).
    @Test func migration0013ReadsEachTableAFewTimesNotOncePerRow() async throws {
        struct Reads {
            var rowsRead = 0, rows = 0, indexBlocksVisited = 0, indexBlocks = 0
        }
        let tables = ["notifications", "transactions", "purchases", "history_revisions", "purchase_changes", "forward_queue"]
        func reads(former: Bool) async throws -> [String: Reads] {
            try await TestDatabase.with(migrate: false) { db in
                try await Migrator(migrations: Migration.embedded.filter { $0.version < 13 }).migrate(db.client, logger: TestDatabase.logger)
                // Only the migration reads them: autovacuum's scans, whenever they come, would count too.
                for table in tables {
                    try await db.execute("ALTER TABLE \(unescaped: table) SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)")
                }
                try await Self.insertRowsBefore0013(db, bundleId: "com.example.one", first: 1, count: 1500)
                // The load's own counts (index blocks it wrote) reach the statistics before they are reset.
                let names = tables.map { "'\($0)'" }.joined(separator: ", ")
                try await eventually("the load's statistics") {
                    try await db.count(
                        PostgresQuery(unsafeSQL: "SELECT count(*) FROM pg_stat_user_tables WHERE relname IN (\(names)) AND n_tup_ins > 0"))
                        == tables.count
                }
                // The migration's own connections, ended afterwards: a backend's statistics are
                // complete once it has exited.
                var configuration = try DatabaseSettings(url: db.url, maximumConnections: 2).clientConfiguration
                configuration.options.additionalStartupParameters = [("application_name", "migration-0013-reads")]
                let client = PostgresClient(configuration: configuration, backgroundLogger: TestDatabase.logger)
                let running = Task { await client.run() }
                let thirteen = try #require(Migration.embedded.first { $0.version == 13 })
                let migration = former ? Migration(fileName: thirteen.fileName, sql: Self.former0013) : thirteen
                try await db.execute("SELECT pg_stat_reset()")
                try await Migrator(migrations: Migration.embedded.filter { $0.version < 13 } + [migration]).migrate(
                    client, logger: TestDatabase.logger)
                running.cancel()
                try await eventually("the migration's connections to end") {
                    try await db.count("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'migration-0013-reads'") == 0
                }
                var reads: [String: Reads] = [:]
                for table in tables {
                    let counts =
                        try await db.strings(
                            """
                            SELECT concat_ws(' ', t.seq_tup_read + COALESCE((SELECT sum(idx_tup_read) FROM pg_stat_user_indexes i WHERE i.relid = t.relid), 0),
                                (SELECT count(*) FROM \(unescaped: table)), COALESCE(s.idx_blks_hit, 0) + COALESCE(s.idx_blks_read, 0),
                                pg_indexes_size(t.relid) / current_setting('block_size')::int)
                            FROM pg_stat_user_tables t JOIN pg_statio_user_tables s USING (relid) WHERE t.relname = \(table)
                            """
                        ).first?.split(separator: " ").compactMap { Int($0) } ?? []
                    try #require(counts.count == 4)
                    reads[table] = Reads(rowsRead: counts[0], rows: counts[1], indexBlocksVisited: counts[2], indexBlocks: counts[3])
                }
                return reads
            }
        }
        for (table, reads) in try await reads(former: false) {
            #expect(reads.rowsRead <= 20 * reads.rows && reads.indexBlocksVisited <= 20 * reads.indexBlocks, "\(table): \(reads)")
        }
        // The measure sees the former text's look-ups: a table's rows, or an index's blocks, read once per row of another.
        let former = try await reads(former: true)
        let (purchases, transactions) = (try #require(former["purchases"]), try #require(former["transactions"]))
        #expect(purchases.rowsRead > 100 * purchases.rows, "purchases: \(purchases)")
        #expect(transactions.indexBlocksVisited > 100 * transactions.indexBlocks, "transactions: \(transactions)")
    }

    /// Migration 0013's new keys of transactions are built before its transaction, while the table
    /// stays writable: they are there after the migration stopped (rows without an app, nothing
    /// else changed), used when it runs again, and become the keys. An index an interrupted build
    /// left invalid under their name is built again.
    @Test func migration0013BuildsTheKeysOfTransactionsBeforeItsTransaction() async throws {
        try await TestDatabase.with(migrate: false) { db in
            try await Migrator(migrations: Migration.embedded.filter { $0.version < 13 }).migrate(db.client, logger: TestDatabase.logger)
            try await Self.insertRowsBefore0013(db, bundleId: "com.example.one", first: 1, count: 20)
            try await Self.insertRowsBefore0013(db, bundleId: "com.example.one", first: 21, count: 2, environment: "Sandbox")
            // An interrupted build's leftover: a unique index that could not be built is left invalid.
            await #expect(throws: (any Error).self) {
                try await db.execute("CREATE UNIQUE INDEX CONCURRENTLY transactions_app_key ON transactions (environment)")
            }
            // A purchase whose signed data names no app, and no app configured: the migration stops.
            try await db.execute("INSERT INTO purchases (original_transaction_id, environment) VALUES ('orphan', 'Production')")
            await #expect(throws: ReconcilerError.self) { try await Migrator().migrate(db.client, logger: TestDatabase.logger) }
            let built = PostgresQuery(
                unsafeSQL: """
                    SELECT pg_get_indexdef(indexrelid) || CASE WHEN indisvalid THEN '' ELSE ' (invalid)' END FROM pg_index
                    WHERE indrelid = 'transactions'::regclass ORDER BY 1
                    """)
            #expect(
                try await db.strings(built) == [
                    "CREATE INDEX transactions_app_purchase_idx ON public.transactions USING btree (bundle_id, environment, original_transaction_id)",
                    "CREATE INDEX transactions_purchase_idx ON public.transactions USING btree (original_transaction_id)",
                    "CREATE UNIQUE INDEX transactions_app_key ON public.transactions USING btree (bundle_id, environment, transaction_id)",
                    "CREATE UNIQUE INDEX transactions_pkey ON public.transactions USING btree (transaction_id)",
                ])
            #expect(
                try await db.count("SELECT count(*) FROM information_schema.columns WHERE column_name = 'bundle_id' AND table_name = 'purchases'")
                    == 0)
            try await Migrator(defaultBundleId: "com.example.one").migrate(db.client, logger: TestDatabase.logger)
            #expect(
                try await db.strings(built) == [
                    // 0024's, for the app API's lookup by appAccountToken.
                    "CREATE INDEX transactions_app_account_token_idx ON public.transactions USING btree (bundle_id, environment, app_account_token) WHERE (app_account_token IS NOT NULL)",
                    "CREATE INDEX transactions_purchase_idx ON public.transactions USING btree (bundle_id, environment, original_transaction_id)",
                    "CREATE UNIQUE INDEX transactions_pkey ON public.transactions USING btree (bundle_id, environment, transaction_id)",
                ])
            #expect(
                try await db.strings("SELECT DISTINCT bundle_id || ' ' || environment FROM purchases ORDER BY 1") == [
                    "com.example.one Production", "com.example.one Sandbox",
                ])
        }
    }

    /// Migration 0013 looks at the rows first without holding the tables, so the live webhook keeps
    /// writing meanwhile; rows written before it holds them are looked at too. Here a reader of
    /// `purchases` makes it wait for the tables; a notification of another app (with its
    /// transaction) and a TEST notification are stored meanwhile, and get their own app, not the
    /// common one.
    @Test func migration0013LooksAtRowsWrittenWhileItWaitedForTheTables() async throws {
        try await TestDatabase.with(migrate: false) { db in
            try await Migrator(migrations: Migration.embedded.filter { $0.version < 13 }).migrate(db.client, logger: TestDatabase.logger)
            try await Self.insertRowsBefore0013(db, bundleId: "com.example.one", first: 1, count: 20)
            try await withThrowingTaskGroup(of: Void.self) { group in
                let released = Locked(false)
                group.addTask {
                    try await db.client.withConnection { reader in
                        try await reader.query("BEGIN", logger: TestDatabase.logger)
                        // A lock without a snapshot: the concurrent index builds before 0013's
                        // transaction wait for transactions that hold one.
                        try await reader.query("LOCK TABLE purchases IN ACCESS SHARE MODE", logger: TestDatabase.logger)
                        try await eventually("the writes") { released.withLock { $0 } }
                        try await reader.query("COMMIT", logger: TestDatabase.logger)
                    }
                }
                group.addTask { try await Migrator().migrate(db.client, logger: TestDatabase.logger) }
                try await eventually("0013 to wait for purchases") {
                    try await db.count(
                        """
                        SELECT count(*) FROM pg_locks WHERE relation = 'purchases'::regclass AND mode = 'AccessExclusiveLock' AND NOT granted
                        """) == 1
                }
                try await db.client.withConnection { writer in
                    try await writer.query("BEGIN", logger: TestDatabase.logger)
                    // Never waits: the migration holds none of these yet (a bug would fail here, not hang).
                    try await writer.query("SET LOCAL lock_timeout = '30s'", logger: TestDatabase.logger)
                    try await writer.query(
                        """
                        INSERT INTO transactions (transaction_id, original_transaction_id, environment, bundle_id, signed_date_ms, signed_transaction_info)
                        VALUES ('9001', '9001', 'Production', 'com.example.two', 1, 'h.e30.s')
                        """, logger: TestDatabase.logger)
                    try await writer.query(
                        """
                        INSERT INTO notifications (notification_uuid, notification_type, signed_date_ms, environment, original_transaction_id,
                            transaction_id, signed_payload, source, outcome)
                        VALUES ('n-9001', 'SUBSCRIBED', 1, 'Production', '9001', '9001', 'h.e30.s', 'webhook', 'applied'),
                               ('n-test-two', 'TEST', 1, 'Production', NULL, NULL, \(Self.unsignedJWS(#"{"data": {"bundleId": "com.example.two"}}"#)),
                                'webhook', 'recorded')
                        """, logger: TestDatabase.logger)
                    try await writer.query("COMMIT", logger: TestDatabase.logger)
                }
                released.withLock { $0 = true }
                try await group.waitForAll()
            }
            #expect(
                try await db.strings(
                    "SELECT notification_uuid || ' ' || bundle_id FROM notifications WHERE notification_uuid IN ('n-9001', 'n-test-two') ORDER BY 1")
                    == ["n-9001 com.example.two", "n-test-two com.example.two"])
            #expect(try await db.strings("SELECT DISTINCT bundle_id FROM notifications WHERE notification_uuid LIKE 'n-1%'") == ["com.example.one"])
        }
    }

    /// A JWS whose payload is `json` (header and signature are not looked at by migration 0013).
    static func unsignedJWS(_ json: String) -> String {
        "h."
            + Data(json.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "") + ".s"
    }

    /// Rows as the reconciler stored them before 0013 (the schema below 13): `count` purchases of
    /// `bundleId` numbered from `first`, each with three transactions, its last renewal's
    /// notification and change, and its customer's revision (every fifth customer's under a later
    /// transaction, the purchase's history anchor); every tenth notification is forwarded.
    static func insertRowsBefore0013(_ db: TestDatabase, bundleId: String, first: Int, count: Int, environment: String = "Production") async throws {
        let (last, state) = (first + count - 1, #"{"environment": "\#(environment)"}"#)
        try await db.execute(
            """
            INSERT INTO transactions (transaction_id, original_transaction_id, environment, bundle_id, signed_date_ms, signed_transaction_info)
            SELECT CASE WHEN k = 0 THEN (1000 + i)::text ELSE (5000000 + i * 10 + k)::text END, (1000 + i)::text, \(environment), \(bundleId),
                   1700000000000 + i, 'h.e30.s'
            FROM generate_series(\(first), \(last)) i, generate_series(0, 2) k
            """)
        try await db.execute(
            """
            INSERT INTO purchases (original_transaction_id, environment, product_type, history_anchor_transaction_id)
            SELECT (1000 + i)::text, \(environment), 'Auto-Renewable Subscription',
                   CASE WHEN i % 5 = 0 THEN (5000000 + i * 10 + 1)::text ELSE (1000 + i)::text END
            FROM generate_series(\(first), \(last)) i
            """)
        try await db.execute(
            """
            INSERT INTO history_revisions (anchor_transaction_id, environment, revision)
            SELECT CASE WHEN i % 5 = 0 THEN (5000000 + i * 10 + 1)::text ELSE (1000 + i)::text END, \(environment), 'r' || i
            FROM generate_series(\(first), \(last)) i
            """)
        try await db.execute(
            """
            INSERT INTO notifications (notification_uuid, notification_type, subtype, signed_date_ms, environment, original_transaction_id,
                transaction_id, signed_payload, source, outcome)
            SELECT 'n-' || (1000 + i), 'DID_RENEW', NULL, 1700000000000 + i, \(environment), (1000 + i)::text, (5000000 + i * 10 + 2)::text,
                   'h.e30.s', 'webhook', 'applied'
            FROM generate_series(\(first), \(last)) i
            """)
        try await db.execute(
            """
            INSERT INTO purchase_changes (original_transaction_id, source, notification_uuid, after_state)
            SELECT (1000 + i)::text, 'webhook', 'n-' || (1000 + i), \(state)::jsonb FROM generate_series(\(first), \(last)) i
            """)
        try await db.execute(
            """
            INSERT INTO forward_queue (notification_uuid, status, target_id, target_redacted)
            SELECT 'n-' || (1000 + i), 'pending', 'target', 'https://app.example.com/hook' FROM generate_series(\(first), \(last)) i WHERE i % 10 = 0
            """)
    }

    /// Rows of `bundleId` whose app 0013 takes from somewhere else than their own transaction.
    static func insertEdgeRowsBefore0013(_ db: TestDatabase, bundleId: String) async throws {
        // A sandbox purchase known only by its notification (and its change), under a later transaction's revision.
        try await db.execute(
            """
            INSERT INTO purchases (original_transaction_id, environment, history_anchor_transaction_id) VALUES ('1900', 'Sandbox', '5001020')
            """)
        try await db.execute("INSERT INTO history_revisions (anchor_transaction_id, environment, revision) VALUES ('5001020', 'Sandbox', 'r')")
        try await db.execute(
            """
            INSERT INTO notifications (notification_uuid, notification_type, signed_date_ms, environment, original_transaction_id, transaction_id,
                signed_payload, source, outcome)
            VALUES ('n-1900', 'SUBSCRIBED', 1, 'Sandbox', '1900', NULL, \(unsignedJWS(#"{"data": {"bundleId": "\#(bundleId)"}}"#)), 'webhook', 'applied'),
                   ('n-test', 'TEST', 1, 'Production', NULL, NULL, \(unsignedJWS(#"{"data": {"bundleId": "\#(bundleId)"}}"#)), 'webhook', 'recorded'),
                   ('n-unstored', 'DID_RENEW', 1, 'Production', '1950', '1951', \(unsignedJWS(#"{"data": {"bundleId": "\#(bundleId)"}}"#)),
                    'history', 'applied')
            """)
        try await db.execute(
            """
            INSERT INTO purchase_changes (original_transaction_id, source, after_state)
            VALUES ('1900', 'webhook', '{"originalTransactionId": "1900"}')
            """)
        // A transaction stored without its app takes the configured one; a forward whose notification is gone too.
        try await db.execute(
            """
            INSERT INTO transactions (transaction_id, original_transaction_id, environment, bundle_id, signed_date_ms, signed_transaction_info)
            VALUES ('1901', '1901', 'Production', '', 1, 'h.e30.s')
            """)
        try await db.execute(
            """
            INSERT INTO forward_queue (notification_uuid, status, target_id, target_redacted) VALUES ('n-gone', 'pending', 'target', 'https://app.example.com/hook')
            """)
    }

    /// Every row's table, key, app and environment.
    static let appsOfEveryRow: PostgresQuery = """
        SELECT 'notifications ' || notification_uuid || ' ' || bundle_id || ' ' || environment FROM notifications
        UNION ALL SELECT 'transactions ' || transaction_id || ' ' || bundle_id || ' ' || environment FROM transactions
        UNION ALL SELECT 'purchases ' || original_transaction_id || ' ' || bundle_id || ' ' || environment FROM purchases
        UNION ALL SELECT 'history_revisions ' || anchor_transaction_id || ' ' || bundle_id || ' ' || environment FROM history_revisions
        UNION ALL SELECT 'purchase_changes ' || original_transaction_id || ' ' || bundle_id || ' ' || environment FROM purchase_changes
        UNION ALL SELECT 'forward_queue ' || notification_uuid || ' ' || bundle_id || ' ' || environment FROM forward_queue
        ORDER BY 1
        """

    /// Every column (in order, with its type, nullability and default), index and constraint of the schema.
    static let schemaCatalog: PostgresQuery = """
        SELECT c.relname || ' #' || a.attnum || ' ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
               || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END || COALESCE(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '')
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
        UNION ALL
        SELECT pg_get_indexdef(i.indexrelid) || CASE WHEN i.indisvalid THEN '' ELSE ' (invalid)' END
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = 'public'::regnamespace
        UNION ALL
        SELECT conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
        WHERE connamespace = 'public'::regnamespace
        ORDER BY 1
        """

    /// Migration 0009 turns the URLs a queue row or a run's options held into a target id and a
    /// redacted form, the same as the code makes them, so no URL secret stays at rest and the
    /// rows still match a forwarder configured with the same URL.
    @Test func migration0009KeepsTargetsAndNoURLSecrets() async throws {
        let urls = [
            "https://hooks:pw-secret@app.example.com:8443/apple/notifications?token=tok-secret#frag",
            "http://127.0.0.1:9000/notifications", "https://user@app.example.com/a@b?x=y", "http://[::1]:8080/hook?k=v",
            "https://app.example.com/hook#tok-secret",
        ]
        try await TestDatabase.with(migrate: false) { db in
            try await Migrator(migrations: Migration.embedded.filter { $0.version < 9 }).migrate(db.client, logger: TestDatabase.logger)
            for (index, url) in urls.enumerated() {
                let options = #"{"forwardTo": "\#(url)"}"#
                try await db.execute(
                    """
                    INSERT INTO reconcile_runs (kind, environment, bundle_id, window_start_ms, window_end_ms, status, phase, dry_run, options)
                    VALUES ('manual', 'Production', 'com.example', 0, 1, 'succeeded', 'done', false, \(options)::jsonb)
                    """)
                try await db.execute(
                    """
                    INSERT INTO forward_queue (notification_uuid, target_url, status, delivered_at)
                    VALUES (\("n-\(index)"), \(url), \(index == 0 ? "delivered" : "pending"), \(index == 0 ? Date() : nil))
                    """)
            }
            // The queue rows above name no stored notification: they take the one app the database served.
            try await Migrator(defaultBundleId: "com.example.app").migrate(db.client, logger: TestDatabase.logger)
            let targets = urls.map(ForwardingTarget.init(url:))
            let rows = try await db.strings("SELECT target_id || ' ' || target_redacted FROM forward_queue ORDER BY notification_uuid")
            #expect(rows == targets.map { "\($0.id) \($0.redacted)" })
            #expect(targets[0].redacted == "https://…@app.example.com:8443/apple/notifications?…")
            #expect(targets[2].redacted == "https://…@app.example.com/a@b?…")
            let options = try await db.strings("SELECT options::text FROM reconcile_runs ORDER BY run_id")
            let decoded = try options.map { try JSONDecoder().decode(RunOptions.self, from: Data($0.utf8)).forwardTo }
            #expect(decoded == targets)
            let everything = try await db.strings(
                "SELECT options::text FROM reconcile_runs UNION ALL SELECT row_to_json(q)::text FROM forward_queue q")
            #expect(everything.allSatisfy { !$0.contains("secret") }, "\(everything)")
            #expect(try await db.count("SELECT delivered FROM forward_queue_totals") == 1)
        }
    }

    /// Migration 0018 counts the delivered rows of each app, environment and webhook, and the
    /// triggers go on counting per key: a delivery recorded, or pruned, moves its own row only.
    @Test func migration0018CountsTheDeliveredRowsOfEachAppAndWebhook() async throws {
        let (production, sandbox) = (try TestApp(), try TestApp(environment: .sandbox))
        try await TestDatabase.with(migrate: false) { db in
            try await Migrator(migrations: Migration.embedded.filter { $0.version < 18 }).migrate(db.client, logger: TestDatabase.logger)
            // This binary's write path records the rows below: it names 0023's columns (which 0023 adds if missing).
            try await db.execute("ALTER TABLE purchases ADD COLUMN app_user_id text")
            try await db.execute("ALTER TABLE purchase_changes ADD COLUMN app_user_id text")
            let (one, two) = (ForwardingTarget(url: "https://one.internal/apple"), ForwardingTarget(url: "https://two.internal/apple?k=v"))
            let first = try await production.recordForwarded(3, to: "https://one.internal/apple", in: db, purchasePrefix: "p1")
            let second = try await production.recordForwarded(2, to: "https://two.internal/apple?k=v", in: db, purchasePrefix: "p2")
            let third = try await sandbox.recordForwarded(2, to: "https://one.internal/apple", in: db, purchasePrefix: "s1")
            let delivered = Array(first.prefix(2)) + second + Array(third.prefix(1))
            try await db.execute(
                "UPDATE forward_queue SET status = 'delivered', delivered_at = now(), attempts = 1 WHERE notification_uuid = ANY(\(delivered))")
            #expect(try await db.count("SELECT delivered FROM forward_queue_totals") == delivered.count)

            try await Migrator().migrate(db.client, logger: TestDatabase.logger)
            func totals() async throws -> [String] {
                try await db.strings(
                    """
                    SELECT environment || ' ' || target_redacted || ' ' || delivered FROM forward_queue_totals
                    WHERE bundle_id = \(TestApp.bundleId) ORDER BY environment, target_redacted
                    """)
            }
            #expect(
                try await totals() == [
                    "Production \(one.redacted) 2", "Production \(two.redacted) 2", "Sandbox \(one.redacted) 1",
                ])
            // Recorded after the migration: one more delivered, one pruned.
            try await db.execute(
                "UPDATE forward_queue SET status = 'delivered', delivered_at = now(), attempts = 1 WHERE notification_uuid = \(third[1])")
            try await db.execute("DELETE FROM forward_queue WHERE notification_uuid = \(first[0])")
            #expect(
                try await totals() == [
                    "Production \(one.redacted) 1", "Production \(two.redacted) 2", "Sandbox \(one.redacted) 2",
                ])
        }
    }

    /// Migration 0013 brings a one-app database along: every row gets its app from its own
    /// signed data; rows whose signed data names none take the one configured app, and without
    /// one the migration stops, naming what to do, and changes nothing.
    @Test func migration0013FillsEachRowsAppFromItsSignedData() async throws {
        let app = try TestApp()
        let signed = app.start + 86_400_000
        let transaction = app.subscription(original: "7000", period: 0, signedDate: signed)
        let payload = try app.notification(.subscribed, .initialBuy, signedDate: signed, transaction: transaction, status: .active)
        let transactionJWS = try app.authority.signer.sign(transaction)
        func oneAppDatabase(_ db: TestDatabase, orphan: Bool) async throws {
            try await Migrator(migrations: Migration.embedded.filter { $0.version < 13 }).migrate(db.client, logger: TestDatabase.logger)
            try await db.execute(
                """
                INSERT INTO notifications (notification_uuid, notification_type, subtype, signed_date_ms, environment,
                    original_transaction_id, transaction_id, signed_payload, source, outcome)
                VALUES ('n-7000', 'SUBSCRIBED', 'INITIAL_BUY', \(signed), 'Production', '7000', NULL, \(payload), 'webhook', 'applied')
                """)
            try await db.execute(
                """
                INSERT INTO transactions (transaction_id, original_transaction_id, environment, bundle_id, signed_date_ms, signed_transaction_info)
                VALUES ('7000', '7000', 'Production', \(TestApp.bundleId), \(signed), \(transactionJWS))
                """)
            try await db.execute("INSERT INTO purchases (original_transaction_id, environment) VALUES ('7000', 'Production')")
            try await db.execute("INSERT INTO history_revisions (anchor_transaction_id, environment, revision) VALUES ('7000', 'Production', 'r1')")
            try await db.execute(
                """
                INSERT INTO purchase_changes (original_transaction_id, source, after_state)
                VALUES ('7000', 'webhook', '{"originalTransactionId": "7000", "environment": "Production"}')
                """)
            if orphan {
                // A purchase stored with no transaction and no notification: its signed data names no app.
                try await db.execute("INSERT INTO purchases (original_transaction_id, environment) VALUES ('7001', 'Production')")
            }
        }
        try await TestDatabase.with(migrate: false) { db in
            try await oneAppDatabase(db, orphan: false)
            try await Migrator().migrate(db.client, logger: TestDatabase.logger)
            for table in ["notifications", "transactions", "purchases", "history_revisions", "purchase_changes"] {
                #expect(try await db.strings("SELECT DISTINCT bundle_id FROM \(unescaped: table)") == [TestApp.bundleId], "\(table)")
            }
        }
        try await TestDatabase.with(migrate: false) { db in
            try await oneAppDatabase(db, orphan: true)
            let refused = await #expect(throws: ReconcilerError.self) {
                try await Migrator().migrate(db.client, logger: TestDatabase.logger)
            }
            #expect(refused?.description.contains("1 rows of purchases carry no bundle ID") == true, "\(String(describing: refused))")
            #expect(try await db.count("SELECT count(*) FROM schema_migrations WHERE version = 13") == 0)
            try await Migrator(defaultBundleId: "com.example.configured").migrate(db.client, logger: TestDatabase.logger)
            #expect(
                try await db.strings("SELECT bundle_id FROM purchases ORDER BY original_transaction_id") == [
                    TestApp.bundleId, "com.example.configured",
                ])
        }
    }

    /// A database from before migration 0015 (every JWS whole, the nested transaction again in
    /// `transactions`) migrates without rewriting a payload; its values rebuild exactly before and
    /// after `compact-payloads` takes them apart, the transaction a notification carried is then
    /// stored inside it, and everything verifies. A second compaction finds nothing to do.
    @Test func aDatabaseFromThePreviousSchemaMigratesAndItsPayloadsRebuildExactly() async throws {
        let app = try TestApp()
        let signed = app.start + 86_400_000
        try await TestDatabase.with(migrate: false) { db in
            try await Migrator(migrations: Migration.embedded.filter { $0.version < 15 }).migrate(db.client, logger: TestDatabase.logger)
            var notifications: [String: String] = [:]
            var transactions: [String: String] = [:]
            for index in 0..<7 {
                let original = "150\(index)"
                let transaction = app.subscription(original: original, period: 0, signedDate: signed + Int64(index))
                let transactionJWS = try app.authority.signer.sign(transaction)
                let uuid = "n-\(original)"
                // As 0.x wrote them: the notification's own copy of the transaction, and the same JWS again in transactions.
                let payload = try app.authority.signer.sign(
                    ResponseBodyV2DecodedPayload(
                        notificationType: .subscribed, subtype: .initialBuy, notificationUUID: uuid, signedDate: signed + Int64(index),
                        data: NotificationData(
                            appAppleId: TestApp.appAppleId, bundleId: TestApp.bundleId, environment: .production,
                            signedTransactionInfo: transactionJWS,
                            signedRenewalInfo: try app.authority.signer.sign(
                                app.renewal(original: original, autoRenew: .on, signedDate: signed + Int64(index))), status: .active)))
                notifications[uuid] = payload
                try await db.execute(
                    """
                    INSERT INTO notifications (notification_uuid, notification_type, subtype, signed_date_ms, bundle_id, environment,
                        original_transaction_id, transaction_id, signed_payload, source, outcome)
                    VALUES (\(uuid), 'SUBSCRIBED', 'INITIAL_BUY', \(signed + Int64(index)), \(TestApp.bundleId), 'Production', \(original),
                        \(original), \(payload), 'webhook', 'applied')
                    """)
                // The last one's transaction came from a snapshot since (another signature): stored in parts.
                let stored = index == 6 ? try app.authority.signer.sign(transaction) : transactionJWS
                transactions[original] = stored
                try await db.execute(
                    """
                    INSERT INTO transactions (transaction_id, original_transaction_id, environment, bundle_id, signed_date_ms,
                        signed_transaction_info, from_notification)
                    VALUES (\(original), \(original), 'Production', \(TestApp.bundleId), \(signed + Int64(index)), \(stored), \(index != 6))
                    """)
            }
            try await Migrator().migrate(db.client, logger: TestDatabase.logger)
            #expect(try await db.count("SELECT count(*) FROM notifications WHERE payload_form = 'legacy'") == 7)
            #expect(try await db.count("SELECT count(*) FROM transactions WHERE payload_form = 'legacy'") == 7)
            let uuids = notifications.keys.sorted()
            // Before compaction: read back as they are.
            #expect(
                try await db.signedPayloads("SELECT notification_uuid FROM notifications ORDER BY notification_uuid")
                    == uuids.map { notifications[$0]! })

            let compactor = PayloadCompactor(database: db.database, batchSize: 3)
            let totals = try await compactor.compact()
            #expect(totals.notifications == 7 && totals.notificationsWhole == 0, "\(totals)")
            #expect(totals.transactions == 7 && totals.transactionsInNotification == 6 && totals.transactionsWhole == 0, "\(totals)")
            #expect(try await db.count("SELECT count(*) FROM notifications WHERE payload_form = 'parts' AND signed_payload IS NULL") == 7)
            #expect(try await db.count("SELECT count(*) FROM transactions WHERE payload_form = 'in_notification'") == 6)
            #expect(try await db.count("SELECT count(*) FROM transactions WHERE payload_form = 'parts' AND transaction_id = '1506'") == 1)
            #expect(try await db.count("SELECT count(*) FROM jws_headers") == 1)
            // After: the same bytes.
            #expect(
                try await db.signedPayloads("SELECT notification_uuid FROM notifications ORDER BY notification_uuid")
                    == uuids.map { notifications[$0]! })
            let rebuilt = try await db.database.transaction { transaction in
                try await PurchaseStore(logger: TestDatabase.logger).storedTransactions(
                    after: .first, updatedSince: nil, limit: 100, headers: HeaderBook(), on: transaction)
            }
            #expect(Dictionary(uniqueKeysWithValues: rebuilt.map { ($0.key.transactionId, $0.value.jws ?? "") }) == transactions)
            let report = try await StoredPayloadVerifier(
                database: db.database, verifiers: [try SignedDataVerifier(configuration: app.verifierConfiguration)]
            ).verify(since: nil)
            #expect(report.failures.isEmpty && report.notifications.verified == 7 && report.transactions.verified == 7, "\(report)")
            // Nothing is left to do, and a second compaction changes nothing.
            #expect(try await compactor.compact() == PayloadCompactor.Totals())
        }
    }
}
