-- 0007: `reconciler repair` repairs one customer (found by order ID, transaction ID or app account
-- token) and is recorded like a run: its own kind, which never moves the schedule's chain, and
-- the signed transactions of a Look Up Order ID answer, quarantined like any other when they fail
-- verification.

-- repair: one customer, by `reconciler repair`.
ALTER TABLE reconcile_runs DROP CONSTRAINT reconcile_runs_kind_check;
ALTER TABLE reconcile_runs ADD CONSTRAINT reconcile_runs_kind_check CHECK (kind IN ('manual', 'scheduled', 'detected', 'repair'));

-- order_lookup: a signed transaction of a Look Up Order ID answer.
ALTER TABLE quarantined_payloads DROP CONSTRAINT quarantined_payloads_source_check;
ALTER TABLE quarantined_payloads ADD CONSTRAINT quarantined_payloads_source_check
    CHECK (source IN ('notification_history', 'transaction_history', 'subscription_status', 'order_lookup'));
ALTER TABLE run_rejections DROP CONSTRAINT run_rejections_source_check;
ALTER TABLE run_rejections ADD CONSTRAINT run_rejections_source_check
    CHECK (source IN ('notification_history', 'transaction_history', 'subscription_status', 'order_lookup'));
