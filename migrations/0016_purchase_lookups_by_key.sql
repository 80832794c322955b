-- 0016: a purchase looked up by its key is read through the primary key, on a fresh database too.
--
-- The history anchor's index began with the app's columns (bundle_id, environment), as the
-- primary key does. Until a table's first ANALYZE, PostgreSQL rates both as "1 row" for a lookup
-- by (bundle_id, environment, original_transaction_id) and could take the anchor's index, then
-- filter every purchase of the app, for each purchase the live webhook looked up. Only purchases
-- with an anchor are ever looked up by it, so it indexes only those; a lookup by key no longer
-- matches it. Rebuilding it takes a write lock on purchases for as long as the index build runs
-- (seconds per million purchases).
DROP INDEX purchases_history_anchor_idx;
CREATE INDEX purchases_history_anchor_idx ON purchases (bundle_id, environment, history_anchor_transaction_id)
    WHERE history_anchor_transaction_id IS NOT NULL;
