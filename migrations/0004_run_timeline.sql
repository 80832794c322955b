-- 0004: what the incident report page draws besides the notifications themselves: a run's App
-- Store Server API requests per endpoint per wall-clock second, and the request budget of each
-- process that worked on it.

-- Each process that works on a run (the run, `reconciler work`, a rerun that resumes it) writes
-- its own rows, keyed by `worker`: host:pid:nonce, then '#' and a nonce of that stint on the run.
-- A stint rewrites its rows with its totals so far (so a write that runs twice counts once); the
-- run's figures are the sum over workers. Seconds without requests have no row.
CREATE TABLE run_api_seconds (
    run_id        bigint NOT NULL REFERENCES reconcile_runs ON DELETE CASCADE,
    worker        text NOT NULL,
    -- Apple's name of the endpoint, e.g. 'Get Notification History'.
    endpoint      text NOT NULL,
    -- UNIX seconds.
    second        bigint NOT NULL,
    requests      integer NOT NULL DEFAULT 0,
    -- 429 responses received in that second.
    rate_limited  integer NOT NULL DEFAULT 0,
    -- Requests that repeated a failed one.
    retries       integer NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, worker, endpoint, second)
);

-- The requests per second per endpoint each stint was configured with.
CREATE TABLE run_api_budgets (
    run_id               bigint NOT NULL REFERENCES reconcile_runs ON DELETE CASCADE,
    worker               text NOT NULL,
    endpoint             text NOT NULL,
    requests_per_second  double precision NOT NULL,
    PRIMARY KEY (run_id, worker, endpoint)
);
