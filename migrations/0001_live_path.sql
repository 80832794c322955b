-- 0001: what the live webhook and every replay write: notifications, transactions and the
-- per-purchase state derived from them.
--
-- Apple's dates are kept exactly as Apple sends them, bigint UNIX milliseconds (columns ending
-- in _ms); this tool's own times are timestamptz.

-- Every notification recorded, once per notificationUUID (the dedup key Apple documents).
CREATE TABLE notifications (
    notification_uuid        text PRIMARY KEY,
    notification_type        text NOT NULL,
    subtype                  text,
    signed_date_ms           bigint NOT NULL,
    environment              text NOT NULL,
    original_transaction_id  text,
    transaction_id           text,
    -- The JWS as received, so any decision can be re-checked later.
    signed_payload           text NOT NULL,
    source                   text NOT NULL CHECK (source IN ('webhook', 'history')),
    -- The reconcile run that replayed it (source 'history').
    run_id                   bigint,
    -- applied: its data was applied; stale: older than what the purchase already reflected
    -- (recorded, nothing regressed); recorded: nothing to apply (TEST, summaries, tokens).
    outcome                  text NOT NULL CHECK (outcome IN ('applied', 'stale', 'recorded')),
    received_at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notifications_purchase_idx ON notifications (original_transaction_id, signed_date_ms);
-- For `run --since-last`: the newest notification the live webhook received.
CREATE INDEX notifications_live_signed_date_idx ON notifications (environment, signed_date_ms) WHERE source = 'webhook';
CREATE INDEX notifications_run_idx ON notifications (run_id) WHERE run_id IS NOT NULL;

-- One row per transactionId: the newest signed version of it (by signedDate) wins.
CREATE TABLE transactions (
    transaction_id                text PRIMARY KEY,
    original_transaction_id       text NOT NULL,
    environment                   text NOT NULL,
    bundle_id                     text NOT NULL,
    product_id                    text,
    product_type                  text,
    subscription_group_identifier text,
    web_order_line_item_id        text,
    in_app_ownership_type         text,
    transaction_reason            text,
    purchase_date_ms              bigint,
    original_purchase_date_ms     bigint,
    expires_date_ms               bigint,
    quantity                      integer,
    is_upgraded                   boolean NOT NULL DEFAULT false,
    offer_type                    integer,
    offer_identifier              text,
    storefront                    text,
    currency                      text,
    price                         bigint,
    app_account_token             text,
    revocation_date_ms            bigint,
    revocation_reason             integer,
    revocation_type               text,
    revocation_percentage         integer,
    signed_date_ms                bigint NOT NULL,
    signed_transaction_info       text NOT NULL,
    updated_at                    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX transactions_purchase_idx ON transactions (original_transaction_id);

-- One row per originalTransactionId (a subscription or a one-time purchase).
-- The transaction columns come from its latest transaction (not upgraded, newest purchaseDate);
-- the renewal columns from the newest signed renewal info; status and last_signed_date_ms from
-- the newest notification. Each part only moves forward in signedDate, so replaying old data
-- in any order never regresses it.
CREATE TABLE purchases (
    original_transaction_id       text PRIMARY KEY,
    environment                   text NOT NULL,
    product_id                    text,
    product_type                  text,
    latest_transaction_id         text,
    purchase_date_ms              bigint,
    expires_date_ms               bigint,
    revocation_date_ms            bigint,
    revocation_reason             integer,
    auto_renew_status             integer,
    auto_renew_product_id         text,
    expiration_intent             integer,
    is_in_billing_retry_period    boolean,
    grace_period_expires_date_ms  bigint,
    renewal_date_ms               bigint,
    renewal_signed_date_ms        bigint,
    -- Status 1-5 as of status_signed_date_ms (from notifications or Get All Subscription Statuses).
    status                        integer,
    status_signed_date_ms         bigint,
    -- The newest notification signedDate applied to this purchase.
    last_signed_date_ms           bigint,
    last_notification_uuid        text,
    -- The transaction id whose history covers this purchase (one customer, one history).
    history_anchor_transaction_id text,
    updated_at                    timestamptz NOT NULL DEFAULT now()
);
-- Phase 2 picks subscriptions whose expiry or renewal fell due.
CREATE INDEX purchases_expires_idx ON purchases (expires_date_ms) WHERE product_type = 'Auto-Renewable Subscription';
CREATE INDEX purchases_renewal_idx ON purchases (renewal_date_ms) WHERE product_type = 'Auto-Renewable Subscription';
CREATE INDEX purchases_history_anchor_idx ON purchases (history_anchor_transaction_id);
