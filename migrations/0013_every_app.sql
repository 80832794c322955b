-- 0013: one database for every app and both environments. A purchase, its transactions and its
-- customer's revision are keyed by (bundle ID, environment, id); notifications, the change feed and
-- the forwarding queue say which app and environment they belong to.
--
-- The bundle ID of existing rows comes from their own signed data (the transactions table already
-- holds it; a notification's payload names its app). Rows whose signed data names none take the
-- one app `reconciler migrate` is configured for (`reconciler.bundle_id`, set by the migrator when
-- the configuration names exactly one app); when such rows exist and it does not, the migration
-- stops and changes nothing.
--
-- How it runs, so that the live webhook waits as short a time as it can (it cannot write while
-- the tables are held, and Apple sends a sandbox notification only once): first, without holding
-- anything, the new keys of transactions (whose rows already name their app) are built beside the
-- old ones, and the rows that may belong to another app than the common one are found; then the
-- tables are held, the rows written since are looked at too, each row's app is filled (the common
-- app is given to every row at once, without rewriting the table; only rows of another app are
-- written), and only then are the keys and indexes rebuilt to lead with the app. Every row is found
-- by joins the tables' keys serve, never by a scan per row. `jobs/dev/benchmark upgrade` measures
-- it (BENCHMARKS.md; jobs/deploy/README.md's upgrade notes).
--
-- This file was rewritten in place: its first version rebuilt the keys first and then filled
-- purchases and revisions with a subquery per row that no index served any more, holding the
-- tables for hours at a million purchases. A database that applied it is accepted as it is (the
-- migrator knows that version's checksum: Migration.formerChecksums); both leave the same schema.

-- Built before the migration's transaction, each on its own, while the webhook keeps writing
-- (`reconciler migrate` runs a migration's CREATE INDEX CONCURRENTLY lines first). The transaction
-- below builds them itself if they are missing or were left invalid by an interrupted build, and
-- makes them the keys, so that none is left under these names.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS transactions_app_key ON transactions (bundle_id, environment, transaction_id);
CREATE INDEX CONCURRENTLY IF NOT EXISTS transactions_app_purchase_idx ON transactions (bundle_id, environment, original_transaction_id);

-- The payload of a JWS, as JSON (base64url without padding, as Apple writes it).
CREATE FUNCTION pg_temp.jws_payload(jws text) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT convert_from(decode(rpad(translate(split_part(jws, '.', 2), '-_', '+/'),
        ((length(split_part(jws, '.', 2)) + 3) / 4) * 4, '='), 'base64'), 'UTF8')::jsonb
$$;
-- The app a notification's payload names: data, else summary, else the external purchase token, else appData.
CREATE FUNCTION pg_temp.notification_bundle_id(payload jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT NULLIF(COALESCE(payload -> 'data' ->> 'bundleId', payload -> 'summary' ->> 'bundleId',
        payload -> 'externalPurchaseToken' ->> 'bundleId', payload -> 'appData' ->> 'bundleId'), '')
$$;
CREATE FUNCTION pg_temp.configured_bundle_id() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT NULLIF(current_setting('reconciler.bundle_id', true), '')
$$;
-- Stops the migration, changing nothing, when rows of a table carry no bundle ID.
CREATE FUNCTION pg_temp.require_bundle_ids(table_name text, missing bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF missing > 0 THEN
        RAISE EXCEPTION '% rows of % carry no bundle ID in their signed data; run `reconciler migrate` configured for the one app this database served (APP_STORE_BUNDLE_ID, or a configuration file naming one app)', missing, table_name;
    END IF;
END
$$;
-- The app and environment most rows belong to (in a database of one app, the only ones).
CREATE FUNCTION pg_temp.common_bundle_id() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT NULLIF(current_setting('reconciler.common_bundle_id', true), '')
$$;
CREATE FUNCTION pg_temp.common_environment() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT current_setting('reconciler.common_environment', true)
$$;
-- Whether a row was written after the rows were first looked at (`since`: the oldest transaction
-- still running then). Conservative: a row written by a transaction that was running then counts.
CREATE FUNCTION pg_temp.written_since_first_look(row_xmin xid) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT age(row_xmin) <= age(current_setting('reconciler.first_look_xmin')::xid)
$$;
-- Adds a text column, NOT NULL, that every existing row reads as `common` (kept in the catalog, not
-- written into each row), then gives the rows of the table `apps` (matched on `keys`) their own
-- value. Without a common value, the column is added empty and filled.
CREATE FUNCTION pg_temp.add_app_column(table_name text, column_name text, common text, apps text, keys text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    matching text := (SELECT string_agg(format('target.%1$I = found.%1$I', key), ' AND ') FROM unnest(keys) key);
BEGIN
    IF common IS NULL THEN
        EXECUTE format('ALTER TABLE %I ADD COLUMN %I text', table_name, column_name);
    ELSE
        EXECUTE format('ALTER TABLE %I ADD COLUMN %I text NOT NULL DEFAULT %L', table_name, column_name, common);
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I DROP DEFAULT', table_name, column_name);
    END IF;
    EXECUTE format('UPDATE %1$I target SET %2$I = found.%2$I FROM %3$I found WHERE %4$s AND found.%2$I IS DISTINCT FROM %5$L',
        table_name, column_name, apps, matching, common);
    IF common IS NULL THEN
        EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET NOT NULL', table_name, column_name);
    END IF;
END
$$;
-- Takes the tables this changes. Every write waits behind a lock that is waited for, so each
-- attempt waits at most 2 s (for a long query of another session, say) and lets the webhook write
-- for a second before the next; after a minute of attempts the migration stops, changing nothing.
CREATE FUNCTION pg_temp.hold_tables() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    lock_timeout text := current_setting('lock_timeout');
BEGIN
    FOR attempt IN 1..20 LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '2s', true);
            LOCK TABLE purchases, notifications, transactions, purchase_changes, forward_queue, history_revisions IN ACCESS EXCLUSIVE MODE;
            PERFORM set_config('lock_timeout', lock_timeout, true);
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(1);
        END;
    END LOOP;
    RAISE EXCEPTION 'the live tables stayed in use by other sessions for a minute (each wait for them gave up after 2 s): run `reconciler migrate` again, or stop what holds them';
END
$$;
-- Builds an index unless a valid one of that name is there (the concurrent build above did not
-- run, failed, or was interrupted).
CREATE FUNCTION pg_temp.ensure_index(index_name text, definition text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_index WHERE indexrelid = to_regclass(index_name) AND indisvalid) THEN
        EXECUTE format('DROP INDEX IF EXISTS %I', index_name);
        EXECUTE definition;
    END IF;
END
$$;

-- 1. Without holding the tables: the common app and environment, and the rows that may belong to
-- another (those whose app is not shown to be the common one by a key of the common app), with the
-- app of each such notification (from its transaction, else its payload, else the configuration).
SELECT set_config('reconciler.first_look_xmin', (pg_snapshot_xmin(pg_current_snapshot())::text::numeric % 4294967296)::text, true);
SELECT set_config('reconciler.common_bundle_id',
    COALESCE((SELECT bundle_id FROM transactions WHERE bundle_id <> '' LIMIT 1), pg_temp.configured_bundle_id(), ''), true);
SELECT set_config('reconciler.common_environment',
    COALESCE((SELECT environment FROM purchases GROUP BY environment ORDER BY count(*) DESC LIMIT 1), 'Production'), true);
SET LOCAL work_mem = '64MB';

CREATE FUNCTION pg_temp.notification_app(transaction_id text, signed_payload text) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT COALESCE((SELECT t.bundle_id FROM transactions t WHERE t.transaction_id = notification_app.transaction_id AND t.bundle_id <> ''),
        pg_temp.notification_bundle_id(pg_temp.jws_payload(signed_payload)), pg_temp.configured_bundle_id())
$$;
CREATE TEMP TABLE notification_apps ON COMMIT DROP AS
SELECT n.notification_uuid, pg_temp.notification_app(n.transaction_id, n.signed_payload) AS bundle_id FROM notifications n
WHERE NOT EXISTS (SELECT FROM transactions t WHERE t.bundle_id = pg_temp.common_bundle_id() AND t.environment = n.environment
                  AND t.transaction_id = n.transaction_id);
CREATE TEMP TABLE purchases_found ON COMMIT DROP AS
SELECT p.original_transaction_id FROM purchases p
WHERE NOT EXISTS (SELECT FROM transactions t WHERE t.bundle_id = pg_temp.common_bundle_id() AND t.environment = p.environment
                  AND t.original_transaction_id = p.original_transaction_id);
-- A revision whose anchor is a purchase of the common app, or the history anchor of one, is the common app's.
CREATE TEMP TABLE history_revisions_found ON COMMIT DROP AS
SELECT r.anchor_transaction_id FROM history_revisions r
WHERE NOT EXISTS (SELECT FROM purchases p WHERE p.original_transaction_id = r.anchor_transaction_id AND p.environment = r.environment
                  AND p.original_transaction_id NOT IN (SELECT original_transaction_id FROM purchases_found))
  AND NOT EXISTS (SELECT FROM purchases p WHERE p.history_anchor_transaction_id = r.anchor_transaction_id AND p.environment = r.environment
                  AND p.original_transaction_id NOT IN (SELECT original_transaction_id FROM purchases_found));
CREATE TEMP TABLE purchase_changes_found ON COMMIT DROP AS
SELECT c.change_id FROM purchase_changes c
LEFT JOIN purchases p ON p.original_transaction_id = c.original_transaction_id
WHERE p.original_transaction_id IS NULL OR p.original_transaction_id IN (SELECT original_transaction_id FROM purchases_found)
   OR COALESCE(c.after_state ->> 'environment', p.environment) IS DISTINCT FROM pg_temp.common_environment();
CREATE TEMP TABLE forward_queue_found ON COMMIT DROP AS
SELECT f.notification_uuid, f.target_id FROM forward_queue f
LEFT JOIN notifications n ON n.notification_uuid = f.notification_uuid
WHERE n.notification_uuid IS NULL OR n.notification_uuid IN (SELECT notification_uuid FROM notification_apps)
   OR n.environment IS DISTINCT FROM pg_temp.common_environment();

-- 2. The tables, at once, in the order the live webhook first touches them (a webhook transaction
-- holding a later one while it waits for an earlier one would deadlock with this migration), and
-- the rows written since they were first looked at.
SELECT pg_temp.hold_tables();
SET LOCAL maintenance_work_mem = '256MB';
SELECT pg_temp.ensure_index('transactions_app_key', 'CREATE UNIQUE INDEX transactions_app_key ON transactions (bundle_id, environment, transaction_id)');
SELECT pg_temp.ensure_index('transactions_app_purchase_idx',
    'CREATE INDEX transactions_app_purchase_idx ON transactions (bundle_id, environment, original_transaction_id)');
INSERT INTO notification_apps
SELECT notification_uuid, pg_temp.notification_app(transaction_id, signed_payload) FROM notifications
WHERE pg_temp.written_since_first_look(xmin) AND notification_uuid NOT IN (SELECT notification_uuid FROM notification_apps);
INSERT INTO purchases_found SELECT original_transaction_id FROM purchases
WHERE pg_temp.written_since_first_look(xmin) AND original_transaction_id NOT IN (SELECT original_transaction_id FROM purchases_found);
INSERT INTO history_revisions_found SELECT anchor_transaction_id FROM history_revisions
WHERE pg_temp.written_since_first_look(xmin) AND anchor_transaction_id NOT IN (SELECT anchor_transaction_id FROM history_revisions_found);
INSERT INTO purchase_changes_found SELECT change_id FROM purchase_changes
WHERE pg_temp.written_since_first_look(xmin) AND change_id NOT IN (SELECT change_id FROM purchase_changes_found);
INSERT INTO forward_queue_found SELECT notification_uuid, target_id FROM forward_queue
WHERE pg_temp.written_since_first_look(xmin) AND (notification_uuid, target_id) NOT IN (SELECT notification_uuid, target_id FROM forward_queue_found);

-- 3. Each row's app: rows not found above take the common app without being written; the others,
-- by look-ups the old keys serve. Notifications first (as found above).
ANALYZE notification_apps;
SELECT pg_temp.require_bundle_ids('notifications', (SELECT count(*) FROM notification_apps WHERE bundle_id IS NULL));
SELECT pg_temp.add_app_column('notifications', 'bundle_id', pg_temp.common_bundle_id(), 'notification_apps', '{notification_uuid}');

-- Transactions already name their app; those that name none take the configured one.
UPDATE transactions SET bundle_id = pg_temp.configured_bundle_id() WHERE bundle_id = '' AND pg_temp.configured_bundle_id() IS NOT NULL;

-- Purchases: the app of their transactions, else of their notifications, else the configured one.
CREATE TEMP TABLE purchase_apps ON COMMIT DROP AS
SELECT p.original_transaction_id,
       COALESCE((SELECT t.bundle_id FROM transactions t WHERE t.original_transaction_id = p.original_transaction_id
                   AND t.environment = p.environment AND t.bundle_id <> '' LIMIT 1),
                (SELECT n.bundle_id FROM notifications n WHERE n.original_transaction_id = p.original_transaction_id
                   AND n.environment = p.environment LIMIT 1),
                pg_temp.configured_bundle_id()) AS bundle_id
FROM purchases p WHERE p.original_transaction_id IN (SELECT original_transaction_id FROM purchases_found);
ANALYZE purchase_apps;
SELECT pg_temp.require_bundle_ids('purchases', (SELECT count(*) FROM purchase_apps WHERE bundle_id IS NULL));
SELECT pg_temp.add_app_column('purchases', 'bundle_id', pg_temp.common_bundle_id(), 'purchase_apps', '{original_transaction_id}');

-- Customers' revisions: the app of the purchases they cover (the anchor is a purchase's original
-- transaction ID or the history anchor of the purchases linked to it), else the configured one.
CREATE TEMP TABLE revision_apps ON COMMIT DROP AS
SELECT r.anchor_transaction_id,
       COALESCE((SELECT p.bundle_id FROM purchases p WHERE p.original_transaction_id = r.anchor_transaction_id
                   AND p.environment = r.environment),
                (SELECT p.bundle_id FROM purchases p WHERE p.history_anchor_transaction_id = r.anchor_transaction_id
                   AND p.environment = r.environment LIMIT 1),
                pg_temp.configured_bundle_id()) AS bundle_id
FROM history_revisions r WHERE r.anchor_transaction_id IN (SELECT anchor_transaction_id FROM history_revisions_found);
ANALYZE revision_apps;
SELECT pg_temp.require_bundle_ids('history_revisions', (SELECT count(*) FROM revision_apps WHERE bundle_id IS NULL));
SELECT pg_temp.add_app_column('history_revisions', 'bundle_id', pg_temp.common_bundle_id(), 'revision_apps', '{anchor_transaction_id}');

-- The change feed: one sequence for every app (stored change ids stay valid); each row names the
-- app and environment of its purchase.
CREATE TEMP TABLE change_apps ON COMMIT DROP AS
SELECT c.change_id, COALESCE(p.bundle_id, pg_temp.configured_bundle_id()) AS bundle_id,
       COALESCE(c.after_state ->> 'environment', p.environment, 'Production') AS environment
FROM purchase_changes c
LEFT JOIN purchases p ON p.original_transaction_id = c.original_transaction_id
    AND p.environment = COALESCE(c.after_state ->> 'environment', p.environment)
WHERE c.change_id IN (SELECT change_id FROM purchase_changes_found);
ANALYZE change_apps;
SELECT pg_temp.require_bundle_ids('purchase_changes', (SELECT count(*) FROM change_apps WHERE bundle_id IS NULL));
SELECT pg_temp.add_app_column('purchase_changes', 'bundle_id', pg_temp.common_bundle_id(), 'change_apps', '{change_id}');
SELECT pg_temp.add_app_column('purchase_changes', 'environment', pg_temp.common_environment(), 'change_apps', '{change_id}');

-- The forwarding queue: the app and environment of the notification it delivers.
CREATE TEMP TABLE forward_apps ON COMMIT DROP AS
SELECT f.notification_uuid, f.target_id, COALESCE(n.bundle_id, pg_temp.configured_bundle_id()) AS bundle_id,
       CASE WHEN n.notification_uuid IS NULL THEN 'Production' ELSE n.environment END AS environment
FROM forward_queue f LEFT JOIN notifications n ON n.notification_uuid = f.notification_uuid
WHERE (f.notification_uuid, f.target_id) IN (SELECT notification_uuid, target_id FROM forward_queue_found);
ANALYZE forward_apps;
SELECT pg_temp.require_bundle_ids('forward_queue', (SELECT count(*) FROM forward_apps WHERE bundle_id IS NULL));
SELECT pg_temp.add_app_column('forward_queue', 'bundle_id', pg_temp.common_bundle_id(), 'forward_apps', '{notification_uuid,target_id}');
SELECT pg_temp.add_app_column('forward_queue', 'environment', pg_temp.common_environment(), 'forward_apps', '{notification_uuid,target_id}');

-- 4. Every row has its app: now the keys and indexes lead with it.
DROP INDEX notifications_live_signed_date_idx;
CREATE INDEX notifications_live_signed_date_idx ON notifications (bundle_id, environment, signed_date_ms) WHERE source = 'webhook';

ALTER TABLE transactions DROP CONSTRAINT transactions_pkey;
ALTER TABLE transactions ADD CONSTRAINT transactions_pkey PRIMARY KEY USING INDEX transactions_app_key;
DROP INDEX transactions_purchase_idx;
ALTER INDEX transactions_app_purchase_idx RENAME TO transactions_purchase_idx;

ALTER TABLE purchases DROP CONSTRAINT purchases_pkey;
ALTER TABLE purchases ADD PRIMARY KEY (bundle_id, environment, original_transaction_id);
DROP INDEX purchases_next_due_idx;
CREATE INDEX purchases_next_due_idx ON purchases (bundle_id, environment, next_due_ms) WHERE next_due_ms IS NOT NULL;
DROP INDEX purchases_history_anchor_idx;
CREATE INDEX purchases_history_anchor_idx ON purchases (bundle_id, environment, history_anchor_transaction_id);

ALTER TABLE history_revisions DROP CONSTRAINT history_revisions_pkey;
ALTER TABLE history_revisions ADD PRIMARY KEY (bundle_id, environment, anchor_transaction_id);
