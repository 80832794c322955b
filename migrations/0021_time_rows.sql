-- 0021: the change feed hears of `entitled` flipping with time (a subscription running out, a
-- grace period ending, a non-renewing term passing), with no notification from Apple.
--
-- Feed rows of source 'time' (and 'app', for the app API). The check is swapped NOT VALID and not
-- validated here: inside this transaction the DROP holds the feed's exclusive lock, so a VALIDATE
-- would scan the whole feed while the webhook waits. New rows are checked all the same, and every
-- existing row passed the narrower check it replaces.
ALTER TABLE purchase_changes DROP CONSTRAINT purchase_changes_source_check;
ALTER TABLE purchase_changes ADD CONSTRAINT purchase_changes_source_check
    CHECK (source IN ('webhook', 'history', 'transaction_history', 'status_refresh', 'app', 'time')) NOT VALID;

-- Each purchase's moment of losing entitlement that got its 'time' row: the unique key that lets
-- serve's leader and every run write it, and only one of them, once. Kept apart from the feed so
-- pruning the feed does not make an old moment due again.
CREATE TABLE entitlement_instants (
    bundle_id                text NOT NULL,
    environment              text NOT NULL,
    original_transaction_id  text NOT NULL,
    instant_ms               bigint NOT NULL,
    recorded_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bundle_id, environment, original_transaction_id, instant_ms)
);
CREATE INDEX entitlement_instants_recorded_idx ON entitlement_instants (recorded_at);

-- The scan for due moments reads the moments entitlement may end through these, so a quiet minute
-- costs an index probe per app. `reconciler migrate` builds them concurrently before this
-- transaction (one line each), so the webhook keeps writing purchases while they build.
CREATE INDEX CONCURRENTLY IF NOT EXISTS purchases_entitlement_end_idx ON purchases (bundle_id, environment, GREATEST(expires_date_ms, grace_period_expires_date_ms)) WHERE revocation_date_ms IS NULL AND (expires_date_ms IS NOT NULL OR grace_period_expires_date_ms IS NOT NULL);
CREATE INDEX CONCURRENTLY IF NOT EXISTS purchases_non_renewing_idx ON purchases (bundle_id, environment, product_id, purchase_date_ms) WHERE revocation_date_ms IS NULL AND product_type = 'Non-Renewing Subscription';
-- Only when a concurrent build above failed (it is logged, not fatal): built here instead.
CREATE INDEX IF NOT EXISTS purchases_entitlement_end_idx ON purchases (bundle_id, environment, GREATEST(expires_date_ms, grace_period_expires_date_ms))
    WHERE revocation_date_ms IS NULL AND (expires_date_ms IS NOT NULL OR grace_period_expires_date_ms IS NOT NULL);
CREATE INDEX IF NOT EXISTS purchases_non_renewing_idx ON purchases (bundle_id, environment, product_id, purchase_date_ms)
    WHERE revocation_date_ms IS NULL AND product_type = 'Non-Renewing Subscription';

-- One leader among serve's replicas for work no two may do at once (time rows, automatic
-- consumption answers): a row its holder renews every tick; a holder that stops renewing loses it
-- when lease_until passes. Times are the database's.
CREATE TABLE serve_leases (
    name         text PRIMARY KEY,
    -- host:pid:nonce of the process.
    holder       text NOT NULL,
    acquired_at  timestamptz NOT NULL DEFAULT now(),
    lease_until  timestamptz NOT NULL
);
