-- The app API's POST /v1/transactions writes the change feed under source 'app' (a purchase the app
-- handed over from StoreKit), and serve's leader writes 'time' rows (a purchase whose `entitled`
-- flipped as time passed): the source check takes both. Every existing row satisfies the old,
-- narrower check, so the new one is added NOT VALID: no scan of the feed, only the brief lock of a
-- constraint swap while the live webhook writes.
ALTER TABLE purchase_changes DROP CONSTRAINT purchase_changes_source_check;
ALTER TABLE purchase_changes ADD CONSTRAINT purchase_changes_source_check
    CHECK (source IN ('webhook', 'history', 'transaction_history', 'status_refresh', 'app', 'time')) NOT VALID;
