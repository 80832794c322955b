-- 0019: `reconciler import` reads the customers an app's own database names (transaction IDs,
-- order IDs) and records, per app, environment and ID, that it has: a rerun, from the same file or
-- a grown one, skips what is complete and reads only what is new.
--
-- import: a run of `reconciler import` (status, report, metrics, the change feed like a repair).
ALTER TABLE reconcile_runs DROP CONSTRAINT reconcile_runs_kind_check;
ALTER TABLE reconcile_runs ADD CONSTRAINT reconcile_runs_kind_check
    CHECK (kind IN ('manual', 'scheduled', 'detected', 'repair', 'import'));

-- One row per ID an import resolved: `read` (the customer's history and statuses were applied;
-- `anchor_transaction_id` is the customer it names) or `not_found` (Apple knows no such ID in any
-- environment tried; recorded under the last one). A new table: nothing is rewritten.
CREATE TABLE import_completions (
    bundle_id              text NOT NULL,
    environment            text NOT NULL,
    id_kind                text NOT NULL CHECK (id_kind IN ('transactionId', 'orderId')),
    id                     text NOT NULL,
    outcome                text NOT NULL CHECK (outcome IN ('read', 'not_found')),
    anchor_transaction_id  text,
    run_id                 bigint NOT NULL REFERENCES reconcile_runs (run_id) ON DELETE CASCADE,
    completed_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bundle_id, environment, id_kind, id)
);
-- "Was this customer read by this import already?": by its anchor within a run.
CREATE INDEX import_completions_run_anchor ON import_completions (run_id, anchor_transaction_id);
