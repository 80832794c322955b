-- 0005: a run at Apple's limit: both phases at once, shards that split, one request budget for
-- every process of an app.

-- When phase 1 (the replay) finished; phase 2 runs beside it and ends with the run.
ALTER TABLE reconcile_runs ADD COLUMN replay_finished_at timestamptz;

-- Phase 1 touched a customer again after phase 2 started reading its history: it is read again.
ALTER TABLE gap_queue ADD COLUMN touched_again boolean NOT NULL DEFAULT false;

-- Shards split: a dense shard's remaining time range is cut into pieces for idle workers. The
-- parent is done at `split_at_ms`; each piece names the start of the shard it came from. Pieces
-- may start where another shard of the query starts, so a shard is its query and whole range.
ALTER TABLE run_shards ADD COLUMN split_at_ms bigint;
ALTER TABLE run_shards ADD COLUMN split_from_ms bigint;
ALTER TABLE run_shards DROP CONSTRAINT run_shards_pkey;
ALTER TABLE run_shards ADD PRIMARY KEY (run_id, query_index, shard_start_ms, shard_end_ms);

-- Every live process that calls the App Store Server API for an app and environment, with the
-- budget it was configured with; each takes an equal share of the smallest one.
CREATE TABLE api_processes (
    environment  text NOT NULL,
    bundle_id    text NOT NULL,
    -- host:pid:nonce of the process.
    process      text NOT NULL,
    -- Requests per second per endpoint the process was configured with: {"Get Notification History": 40, ...}.
    budget       jsonb NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    lease_until  timestamptz NOT NULL,
    PRIMARY KEY (environment, bundle_id, process)
);

-- An endpoint closed by a 429 until the instant its Retry-After gave (UNIX ms), for every process.
CREATE TABLE api_closures (
    environment      text NOT NULL,
    bundle_id        text NOT NULL,
    endpoint         text NOT NULL,
    closed_until_ms  bigint NOT NULL,
    PRIMARY KEY (environment, bundle_id, endpoint)
);
