-- 0003: what an hourly schedule next to the live webhook needs: run kinds and the schedule's
-- outcomes, a lease row instead of a session lock, customer leases instead of open claim
-- transactions, a quarantine for payloads that fail verification, and when each purchase was
-- last checked against its transaction history.

-- manual: --start/--end; scheduled: --since-last (the schedule's chain of windows);
-- detected: a window `detect-outage` found. Only scheduled runs move the chain.
ALTER TABLE reconcile_runs ADD COLUMN kind text NOT NULL DEFAULT 'manual'
    CHECK (kind IN ('manual', 'scheduled', 'detected'));
-- succeeded_with_rejections: done, but payloads were quarantined (or customers refused) for the
-- first time; lost: a window left Apple's retention before it could be finished.
ALTER TABLE reconcile_runs DROP CONSTRAINT reconcile_runs_status_check;
ALTER TABLE reconcile_runs ADD CONSTRAINT reconcile_runs_status_check CHECK (status IN (
    'running', 'succeeded', 'succeeded_with_rejections', 'partial', 'failed', 'interrupted', 'lost'));
-- Why a failed run failed (configuration, database, ...), for `status` and the next scheduled run.
ALTER TABLE reconcile_runs ADD COLUMN failure text;
CREATE INDEX reconcile_runs_schedule_idx ON reconcile_runs (environment, bundle_id, kind, run_id DESC) WHERE NOT dry_run;

-- One reconcile run at a time per app and environment: a row that its holder renews; a holder
-- that stops renewing (killed, partitioned, its database connection gone) loses it when
-- lease_until passes, and a new run may take it over.
CREATE TABLE run_leases (
    environment  text NOT NULL,
    bundle_id    text NOT NULL,
    run_id       bigint REFERENCES reconcile_runs ON DELETE SET NULL,
    -- host:pid:nonce of the process.
    holder       text NOT NULL,
    acquired_at  timestamptz NOT NULL DEFAULT now(),
    lease_until  timestamptz NOT NULL,
    PRIMARY KEY (environment, bundle_id)
);

-- Phase 2 customers are leased (a row a worker renews), never held in an open transaction.
ALTER TABLE gap_queue DROP CONSTRAINT gap_queue_status_check;
ALTER TABLE gap_queue ADD CONSTRAINT gap_queue_status_check CHECK (status IN ('pending', 'leased', 'done', 'failed'));
ALTER TABLE gap_queue ADD COLUMN lease_until timestamptz;
-- retryable: the next run retries it; permanent: Apple refused it (4xx), a person must look.
ALTER TABLE gap_queue ADD COLUMN failure_kind text CHECK (failure_kind IN ('retryable', 'permanent'));
-- How often Apple refused the stored revision (4000005) so the history was read from the start.
ALTER TABLE gap_queue ADD COLUMN revision_resets integer NOT NULL DEFAULT 0;
DROP INDEX gap_queue_pending_idx;
-- Claims take touched customers first, then the rest, in a stable order.
CREATE INDEX gap_queue_claimable_idx ON gap_queue (run_id, (reason <> 'touched'), anchor_transaction_id) WHERE status IN ('pending', 'leased');

-- Shards fail retryably (the next run retries them) or permanently (Apple refused the query).
ALTER TABLE run_shards ADD COLUMN failure_kind text CHECK (failure_kind IN ('retryable', 'permanent'));

-- Signed values from Apple's API that failed verification: stored once, never applied, reported
-- by every run that meets them; `reconciler rejections --ack` hides one from the alert.
CREATE TABLE quarantined_payloads (
    payload_sha256     text PRIMARY KEY,
    environment        text NOT NULL,
    bundle_id          text NOT NULL,
    -- notification_history, transaction_history or subscription_status.
    source             text NOT NULL CHECK (source IN ('notification_history', 'transaction_history', 'subscription_status')),
    -- Read without trusting the payload, only to name it.
    notification_uuid  text,
    type_and_subtype   text,
    reason             text NOT NULL,
    detail             text NOT NULL,
    signed_payload     text NOT NULL,
    first_seen_at      timestamptz NOT NULL DEFAULT now(),
    last_seen_at       timestamptz NOT NULL DEFAULT now(),
    first_run_id       bigint,
    last_run_id        bigint,
    times_seen         integer NOT NULL DEFAULT 1,
    acknowledged_at    timestamptz,
    acknowledged_note  text
);
CREATE INDEX quarantined_payloads_open_idx ON quarantined_payloads (environment, bundle_id, first_seen_at) WHERE acknowledged_at IS NULL;

-- Which of a run's rejections it quarantined for the first time (the others were known), and which
-- API response each came in.
ALTER TABLE run_rejections ADD COLUMN newly_quarantined boolean NOT NULL DEFAULT true;
ALTER TABLE run_rejections ADD COLUMN type_and_subtype text;
ALTER TABLE run_rejections RENAME COLUMN phase TO source;
UPDATE run_rejections SET source = CASE source WHEN 'replay' THEN 'notification_history' WHEN 'gap fill' THEN 'transaction_history'
    ELSE 'subscription_status' END;
ALTER TABLE run_rejections ADD CONSTRAINT run_rejections_source_check
    CHECK (source IN ('notification_history', 'transaction_history', 'subscription_status'));

-- When the gap fill last verified the purchase against its transaction history (UNIX ms): a
-- purchase is due again only when its expiry, renewal or grace period falls due after that.
ALTER TABLE purchases ADD COLUMN history_checked_at_ms bigint;
