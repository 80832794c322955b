-- 0011: a schedule that never freezes on one customer, and the due-customer query on an index.

-- Failures in a row of a customer or shard across the attempts of its run (each rerun of an
-- unfinished window is one attempt): after `--give-up-after` of them it is given up, so its
-- window can finish. A success starts the count again.
ALTER TABLE gap_queue ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0;
ALTER TABLE gap_queue DROP CONSTRAINT gap_queue_status_check;
ALTER TABLE gap_queue ADD CONSTRAINT gap_queue_status_check CHECK (status IN ('pending', 'leased', 'done', 'failed', 'given_up'));
ALTER TABLE run_shards ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0;
ALTER TABLE run_shards DROP CONSTRAINT run_shards_status_check;
ALTER TABLE run_shards ADD CONSTRAINT run_shards_status_check CHECK (status IN ('pending', 'done', 'failed', 'given_up'));

-- Customers and shards a run gave up on: Apple refused them (a permanent failure) or they failed
-- in `--give-up-after` attempts in a row. Never retried; `reconciler rejections` lists them
-- beside the quarantine, and `--ack` hides one from the alert.
CREATE TABLE given_up (
    run_id             bigint NOT NULL REFERENCES reconcile_runs ON DELETE CASCADE,
    environment        text NOT NULL,
    bundle_id          text NOT NULL,
    kind               text NOT NULL CHECK (kind IN ('customer', 'shard')),
    -- customer: the transaction id its history is read by; shard: `QUERY START/END`.
    subject            text NOT NULL,
    failure_kind       text NOT NULL CHECK (failure_kind IN ('retryable', 'permanent')),
    reason             text NOT NULL,
    -- The failures in a row that led to it.
    failures           integer NOT NULL,
    given_up_at        timestamptz NOT NULL DEFAULT now(),
    acknowledged_at    timestamptz,
    acknowledged_note  text,
    PRIMARY KEY (run_id, kind, subject)
);
CREATE INDEX given_up_open_idx ON given_up (environment, bundle_id, given_up_at) WHERE acknowledged_at IS NULL;
-- Every `run --since-last` and the gauges read the schedule's unfinished windows.
CREATE INDEX reconcile_runs_unfinished_scheduled_idx ON reconcile_runs (environment, bundle_id, run_id)
    WHERE kind = 'scheduled' AND NOT dry_run AND status NOT IN ('succeeded', 'succeeded_with_rejections', 'lost');

-- A snapshot (Get Transaction History, Get All Subscription Statuses) is signed when it is read,
-- so it is newer than any notification even when Apple's API lags the change the notification
-- reported. Where a snapshot and a notification signed within the re-read margin of each other
-- disagree (a revocation, a status, the renewal), the notification wins, in either order of
-- arrival, and the customer is read again once the margin has passed (`recheck_at_ms`).
ALTER TABLE transactions ADD COLUMN from_notification boolean NOT NULL DEFAULT false;
ALTER TABLE purchases ADD COLUMN renewal_from_notification boolean NOT NULL DEFAULT false;
ALTER TABLE purchases ADD COLUMN status_from_notification boolean NOT NULL DEFAULT false;
ALTER TABLE purchases ADD COLUMN recheck_at_ms bigint;

-- When a purchase falls due for phase 2 (UNIX ms), kept by PostgreSQL itself: the earliest of its
-- expiry, renewal and grace period end still after the last check of its transaction history
-- (subscriptions Apple still counts as active, in billing retry or in grace), and a re-read asked
-- for after a snapshot disagreed with a notification. The hourly run's due query reads it through
-- the partial index, so a quiet hour costs an index probe, not a scan of every purchase.
ALTER TABLE purchases ADD COLUMN next_due_ms bigint GENERATED ALWAYS AS (
    LEAST(
        CASE WHEN recheck_at_ms > COALESCE(history_checked_at_ms, -1) THEN recheck_at_ms END,
        CASE WHEN product_type = 'Auto-Renewable Subscription' AND (status IS NULL OR status IN (1, 3, 4)) THEN
            LEAST(
                CASE WHEN expires_date_ms > COALESCE(history_checked_at_ms, -1) THEN expires_date_ms END,
                CASE WHEN renewal_date_ms > COALESCE(history_checked_at_ms, -1) THEN renewal_date_ms END,
                CASE WHEN grace_period_expires_date_ms > COALESCE(history_checked_at_ms, -1) THEN grace_period_expires_date_ms END)
        END)
) STORED;
CREATE INDEX purchases_next_due_idx ON purchases (environment, next_due_ms) WHERE next_due_ms IS NOT NULL;
-- The due query used these; nothing else does.
DROP INDEX purchases_expires_idx;
DROP INDEX purchases_renewal_idx;
