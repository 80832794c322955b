-- 0024: the app API's lookup by `appAccountToken` (`GET /v1/purchases?appAccountToken=`) reads the
-- tokens of every transaction, not only each purchase's latest; without an index it scanned the
-- whole transactions table for each request.
--
-- Safe while the live webhook writes: built CONCURRENTLY by `reconciler migrate` (the table stays
-- writable), and nothing relies on it but that lookup's speed.
CREATE INDEX CONCURRENTLY IF NOT EXISTS transactions_app_account_token_idx ON transactions (bundle_id, environment, app_account_token) WHERE app_account_token IS NOT NULL;
