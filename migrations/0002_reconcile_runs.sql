-- 0002: the run ledger of `reconciler run`: runs, their replay shards (checkpoints), what they
-- counted, changed and rejected, the phase-2 customer queue, and the stored history revisions.

CREATE TABLE reconcile_runs (
    run_id            bigserial PRIMARY KEY,
    environment       text NOT NULL,
    bundle_id         text NOT NULL,
    window_start_ms   bigint NOT NULL,
    window_end_ms     bigint NOT NULL,
    dry_run           boolean NOT NULL DEFAULT false,
    -- The options the run was planned with (priority order, shard size, --all, --refresh-status).
    options           jsonb NOT NULL DEFAULT '{}',
    status            text NOT NULL DEFAULT 'running'
                      CHECK (status IN ('running', 'succeeded', 'partial', 'failed', 'interrupted')),
    phase             text NOT NULL DEFAULT 'replay' CHECK (phase IN ('replay', 'gap_fill', 'done')),
    started_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz,
    -- host:pid of the process that last ran it.
    holder            text,
    -- API requests made by the processes that finished their part (killed ones cannot report).
    api_statistics    jsonb NOT NULL DEFAULT '{}',
    report            jsonb
);
CREATE INDEX reconcile_runs_window_idx ON reconcile_runs (environment, bundle_id, window_start_ms, window_end_ms, run_id DESC);

-- One Get Notification History query over one time shard. Its progress is committed in the same
-- transaction as the effects of the page it covers, so a killed run resumes exactly there.
CREATE TABLE run_shards (
    run_id             bigint NOT NULL REFERENCES reconcile_runs ON DELETE CASCADE,
    query_index        integer NOT NULL,
    -- NULL type: the unfiltered sweep that catches everything else.
    notification_type  text,
    subtype            text,
    shard_start_ms     bigint NOT NULL,
    shard_end_ms       bigint NOT NULL,
    -- The token of the next page to fetch; NULL: from the start.
    pagination_token   text,
    pages_done         integer NOT NULL DEFAULT 0,
    notifications_seen integer NOT NULL DEFAULT 0,
    -- How often an expired pagination token restarted it.
    restarts           integer NOT NULL DEFAULT 0,
    status             text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed')),
    last_error         text,
    PRIMARY KEY (run_id, query_index, shard_start_ms)
);

-- Notifications seen per type/subtype and outcome (applied, stale, recorded, duplicate, rejected).
CREATE TABLE run_counts (
    run_id            bigint NOT NULL REFERENCES reconcile_runs ON DELETE CASCADE,
    type_and_subtype  text NOT NULL,
    outcome           text NOT NULL,
    count             integer NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, type_and_subtype, outcome)
);

-- Purchases a run changed: the state before its first change and after its last.
CREATE TABLE run_changes (
    run_id                  bigint NOT NULL REFERENCES reconcile_runs ON DELETE CASCADE,
    original_transaction_id text NOT NULL,
    before_state            jsonb,
    after_state             jsonb NOT NULL,
    PRIMARY KEY (run_id, original_transaction_id)
);

-- Signed values a run refused, with the reason; never applied.
CREATE TABLE run_rejections (
    run_id              bigint NOT NULL REFERENCES reconcile_runs ON DELETE CASCADE,
    payload_sha256      text NOT NULL,
    phase               text NOT NULL,
    notification_uuid   text,
    reason              text NOT NULL,
    detail              text NOT NULL,
    recorded_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, payload_sha256)
);

-- Phase 2: one row per customer (the transaction id their history is fetched by). Workers
-- claim rows with FOR UPDATE SKIP LOCKED, so `reconciler work` on other machines can share it.
CREATE TABLE gap_queue (
    run_id                bigint NOT NULL REFERENCES reconcile_runs ON DELETE CASCADE,
    anchor_transaction_id text NOT NULL,
    reason                text NOT NULL CHECK (reason IN ('touched', 'due', 'all')),
    status                text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed')),
    attempts              integer NOT NULL DEFAULT 0,
    transactions_seen     integer NOT NULL DEFAULT 0,
    last_error            text,
    worker                text,
    updated_at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, anchor_transaction_id)
);
CREATE INDEX gap_queue_pending_idx ON gap_queue (run_id, anchor_transaction_id) WHERE status = 'pending';

-- The Get Transaction History revision of each customer, stored with the last page applied;
-- the next fetch asks only for what changed since.
CREATE TABLE history_revisions (
    anchor_transaction_id text PRIMARY KEY,
    environment           text NOT NULL,
    revision              text NOT NULL,
    updated_at            timestamptz NOT NULL DEFAULT now()
);
