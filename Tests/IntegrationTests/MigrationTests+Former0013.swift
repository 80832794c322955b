// The first text of migrations/0013_every_app.sql (applied by every database migrated before it was
// rewritten in place), as MigrationTests applies it: a database that ran it must migrate on, and end
// with the same schema as one that ran the rewrite.

extension MigrationTests {
    static let former0013 = ####"""
        -- 0013: one database for every app and both environments. A purchase, its transactions and its
        -- customer's revision are keyed by (bundle ID, environment, id); notifications, the change feed and
        -- the forwarding queue say which app and environment they belong to.
        --
        -- The bundle ID of existing rows comes from their own signed data (the transactions table already
        -- holds it; a notification's payload names its app). Rows whose signed data names none take the
        -- one app `reconciler migrate` is configured for (`reconciler.bundle_id`, set by the migrator when
        -- the configuration names exactly one app); when such rows exist and it does not, the migration
        -- stops and changes nothing.

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
        -- Stops the migration when a table still has rows without a bundle ID.
        CREATE FUNCTION pg_temp.require_bundle_ids(table_name text) RETURNS void LANGUAGE plpgsql AS $$
        DECLARE
            missing bigint;
        BEGIN
            EXECUTE format('SELECT count(*) FROM %I WHERE bundle_id IS NULL', table_name) INTO missing;
            IF missing > 0 THEN
                RAISE EXCEPTION '% rows of % carry no bundle ID in their signed data; run `reconciler migrate` configured for the one app this database served (APP_STORE_BUNDLE_ID, or a configuration file naming one app)', missing, table_name;
            END IF;
        END
        $$;

        -- Notifications.
        ALTER TABLE notifications ADD COLUMN bundle_id text;
        UPDATE notifications n SET bundle_id = t.bundle_id
        FROM transactions t WHERE t.transaction_id = n.transaction_id AND t.bundle_id <> '';
        UPDATE notifications SET bundle_id = pg_temp.notification_bundle_id(pg_temp.jws_payload(signed_payload)) WHERE bundle_id IS NULL;
        UPDATE notifications SET bundle_id = pg_temp.configured_bundle_id() WHERE bundle_id IS NULL;
        SELECT pg_temp.require_bundle_ids('notifications');
        ALTER TABLE notifications ALTER COLUMN bundle_id SET NOT NULL;
        DROP INDEX notifications_live_signed_date_idx;
        CREATE INDEX notifications_live_signed_date_idx ON notifications (bundle_id, environment, signed_date_ms) WHERE source = 'webhook';

        -- Transactions: each already names its app.
        UPDATE transactions SET bundle_id = pg_temp.configured_bundle_id() WHERE bundle_id = '' AND pg_temp.configured_bundle_id() IS NOT NULL;
        ALTER TABLE transactions DROP CONSTRAINT transactions_pkey;
        ALTER TABLE transactions ADD PRIMARY KEY (bundle_id, environment, transaction_id);
        DROP INDEX transactions_purchase_idx;
        CREATE INDEX transactions_purchase_idx ON transactions (bundle_id, environment, original_transaction_id);

        -- Purchases: from their transactions, else their notifications.
        ALTER TABLE purchases ADD COLUMN bundle_id text;
        UPDATE purchases p SET bundle_id = (
            SELECT t.bundle_id FROM transactions t
            WHERE t.original_transaction_id = p.original_transaction_id AND t.environment = p.environment AND t.bundle_id <> '' LIMIT 1);
        UPDATE purchases p SET bundle_id = (
            SELECT n.bundle_id FROM notifications n
            WHERE n.original_transaction_id = p.original_transaction_id AND n.environment = p.environment LIMIT 1)
        WHERE bundle_id IS NULL;
        UPDATE purchases SET bundle_id = pg_temp.configured_bundle_id() WHERE bundle_id IS NULL;
        SELECT pg_temp.require_bundle_ids('purchases');
        ALTER TABLE purchases ALTER COLUMN bundle_id SET NOT NULL;
        ALTER TABLE purchases DROP CONSTRAINT purchases_pkey;
        ALTER TABLE purchases ADD PRIMARY KEY (bundle_id, environment, original_transaction_id);
        DROP INDEX purchases_next_due_idx;
        CREATE INDEX purchases_next_due_idx ON purchases (bundle_id, environment, next_due_ms) WHERE next_due_ms IS NOT NULL;
        DROP INDEX purchases_history_anchor_idx;
        CREATE INDEX purchases_history_anchor_idx ON purchases (bundle_id, environment, history_anchor_transaction_id);

        -- Customers' revisions: the app of the purchases they cover.
        ALTER TABLE history_revisions ADD COLUMN bundle_id text;
        UPDATE history_revisions r SET bundle_id = (
            SELECT p.bundle_id FROM purchases p
            WHERE p.environment = r.environment
              AND (p.original_transaction_id = r.anchor_transaction_id OR p.history_anchor_transaction_id = r.anchor_transaction_id)
            LIMIT 1);
        UPDATE history_revisions SET bundle_id = pg_temp.configured_bundle_id() WHERE bundle_id IS NULL;
        SELECT pg_temp.require_bundle_ids('history_revisions');
        ALTER TABLE history_revisions ALTER COLUMN bundle_id SET NOT NULL;
        ALTER TABLE history_revisions DROP CONSTRAINT history_revisions_pkey;
        ALTER TABLE history_revisions ADD PRIMARY KEY (bundle_id, environment, anchor_transaction_id);

        -- The change feed: one sequence for every app (stored change ids stay valid); each row names its app.
        ALTER TABLE purchase_changes ADD COLUMN bundle_id text, ADD COLUMN environment text;
        UPDATE purchase_changes c SET environment = COALESCE(c.after_state ->> 'environment', p.environment), bundle_id = p.bundle_id
        FROM purchases p WHERE p.original_transaction_id = c.original_transaction_id
          AND p.environment = COALESCE(c.after_state ->> 'environment', p.environment);
        UPDATE purchase_changes SET environment = COALESCE(environment, after_state ->> 'environment'),
            bundle_id = COALESCE(bundle_id, pg_temp.configured_bundle_id()) WHERE bundle_id IS NULL OR environment IS NULL;
        SELECT pg_temp.require_bundle_ids('purchase_changes');
        UPDATE purchase_changes SET environment = 'Production' WHERE environment IS NULL;
        ALTER TABLE purchase_changes ALTER COLUMN bundle_id SET NOT NULL, ALTER COLUMN environment SET NOT NULL;

        -- The forwarding queue: the app of the notification it delivers.
        ALTER TABLE forward_queue ADD COLUMN bundle_id text, ADD COLUMN environment text;
        UPDATE forward_queue f SET bundle_id = n.bundle_id, environment = n.environment FROM notifications n WHERE n.notification_uuid = f.notification_uuid;
        UPDATE forward_queue SET bundle_id = pg_temp.configured_bundle_id(), environment = 'Production' WHERE bundle_id IS NULL;
        SELECT pg_temp.require_bundle_ids('forward_queue');
        ALTER TABLE forward_queue ALTER COLUMN bundle_id SET NOT NULL, ALTER COLUMN environment SET NOT NULL;
        """####
}
