-- 0023: the app's own ID for a customer (`appUserId`), given by `reconciler import`, kept on each of
-- the customer's purchases and on the change feed's rows.
--
-- Safe while the live webhook writes: each ALTER adds a nullable column with no default, a change
-- of the catalog only (no table rewrite, no scan); its lock is taken with a 2 s limit, retried,
-- so the webhook never waits long behind it. The indexes are on the new columns, so `reconciler
-- migrate` builds them CONCURRENTLY right after this transaction (the tables stay writable), and
-- nothing relies on them. An older binary's statements still work: they name their columns and
-- leave the new ones NULL (its writes give no appUserId; the customer's next import or purchase does).
CREATE FUNCTION pg_temp.add_app_user_columns() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    lock_timeout text := current_setting('lock_timeout');
BEGIN
    FOR attempt IN 1..20 LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '2s', true);
            ALTER TABLE purchases ADD COLUMN IF NOT EXISTS app_user_id text;
            ALTER TABLE purchase_changes ADD COLUMN IF NOT EXISTS app_user_id text;
            PERFORM set_config('lock_timeout', lock_timeout, true);
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(1);
        END;
    END LOOP;
    RAISE EXCEPTION 'purchases and purchase_changes stayed in use by other sessions for a minute (each wait for them gave up after 2 s): run `reconciler migrate` again, or stop what holds them';
END
$$;
SELECT pg_temp.add_app_user_columns();

-- `export --app-user-id`, `repair --app-user-id` and the app API's lookup of a user's purchases.
CREATE INDEX CONCURRENTLY IF NOT EXISTS purchases_app_user_idx ON purchases (bundle_id, environment, app_user_id) WHERE app_user_id IS NOT NULL;
-- A customer's later purchase takes the appUserId of an earlier one with the same appTransactionId.
CREATE INDEX CONCURRENTLY IF NOT EXISTS purchases_app_transaction_user_idx ON purchases (bundle_id, environment, app_transaction_id) WHERE app_user_id IS NOT NULL;
-- `changes --app-user-id`.
CREATE INDEX CONCURRENTLY IF NOT EXISTS purchase_changes_app_user_idx ON purchase_changes (app_user_id, change_id) WHERE app_user_id IS NOT NULL;
