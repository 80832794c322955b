-- 0006: recovered state reaches the app: a change feed written with every purchase change, a
-- durable queue of notifications to forward to the app's own webhook, the app's user on each
-- purchase, and the transaction and renewal fields Apple added since 2024.

-- The app's user id of the purchase (the latest transaction's appAccountToken; it can change).
ALTER TABLE purchases ADD COLUMN app_account_token text;
CREATE INDEX purchases_app_account_token_idx ON purchases (app_account_token) WHERE app_account_token IS NOT NULL;
-- From the newest renewal info: what the next renewal costs, and the win-back offers open to it.
ALTER TABLE purchases ADD COLUMN renewal_price bigint;
ALTER TABLE purchases ADD COLUMN renewal_currency text;
ALTER TABLE purchases ADD COLUMN price_increase_status integer;
ALTER TABLE purchases ADD COLUMN eligible_win_back_offer_ids jsonb;

ALTER TABLE transactions ADD COLUMN app_transaction_id text;
ALTER TABLE transactions ADD COLUMN offer_period text;
ALTER TABLE transactions ADD COLUMN offer_discount_type text;
ALTER TABLE transactions ADD COLUMN storefront_id text;
ALTER TABLE transactions ADD COLUMN billing_plan_type text;
ALTER TABLE transactions ADD COLUMN previous_original_transaction_id text;
-- Kept as Apple sent them.
ALTER TABLE transactions ADD COLUMN advanced_commerce_info jsonb;
ALTER TABLE transactions ADD COLUMN commitment_info jsonb;

-- The change feed (a transactional outbox): one row per purchase change, written in the
-- transaction that makes the change, so a consumer that stores the last id it processed misses
-- nothing and sees nothing twice. Rows are read in id order, only up to the oldest transaction
-- still running (`xid`), so a smaller id can never commit after a larger one was read.
CREATE TABLE purchase_changes (
    change_id                bigserial PRIMARY KEY,
    original_transaction_id  text NOT NULL,
    app_account_token        text,
    -- webhook, history (a replayed notification), transaction_history, status_refresh.
    source                   text NOT NULL CHECK (source IN ('webhook', 'history', 'transaction_history', 'status_refresh')),
    notification_uuid        text,
    run_id                   bigint,
    -- The `export` shape, with `entitled` as of the commit.
    before_state             jsonb,
    after_state              jsonb NOT NULL,
    changed_at               timestamptz NOT NULL DEFAULT now(),
    xid                      xid8 NOT NULL DEFAULT pg_current_xact_id()
);
-- Feed order: every read and prune walks (xid, change_id) from a consumer's position.
CREATE INDEX purchase_changes_order_idx ON purchase_changes (xid, change_id);
CREATE INDEX purchase_changes_time_idx ON purchase_changes (changed_at);
CREATE INDEX purchase_changes_user_idx ON purchase_changes (app_account_token, change_id) WHERE app_account_token IS NOT NULL;

-- Notifications to deliver to the app's own webhook as Apple would have ({"signedPayload": ...}),
-- queued in the transaction that records the notification.
CREATE TABLE forward_queue (
    notification_uuid  text NOT NULL,
    target_url         text NOT NULL,
    -- pending (waiting, or retrying after next_attempt_at), leased (a forwarder is sending it),
    -- delivered (the app answered 2xx: never sent again), failed (out of attempts).
    status             text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'leased', 'delivered', 'failed')),
    attempts           integer NOT NULL DEFAULT 0,
    next_attempt_at    timestamptz NOT NULL DEFAULT now(),
    lease_until        timestamptz,
    worker             text,
    last_status_code   integer,
    last_error         text,
    run_id             bigint,
    queued_at          timestamptz NOT NULL DEFAULT now(),
    delivered_at       timestamptz,
    PRIMARY KEY (notification_uuid, target_url)
);
CREATE INDEX forward_queue_due_idx ON forward_queue (next_attempt_at) WHERE status IN ('pending', 'leased');
CREATE INDEX forward_queue_run_idx ON forward_queue (run_id) WHERE run_id IS NOT NULL;
