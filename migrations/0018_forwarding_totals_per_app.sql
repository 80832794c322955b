-- 0017: the forwarding queue's delivered counter per app, environment and webhook.
--
-- The gauges of one app and environment must count only its own deliveries, so one app's failing
-- handler does not alert for every app; the counter migration 0009 keeps was one row for the
-- whole queue. It becomes one row per (bundle_id, environment, target_id), kept by the same
-- triggers, so several webhooks per app need no further change.
--
-- forward_queue_totals is small (one row before, one per app, environment and webhook after): it
-- is replaced, not rewritten. The rows are counted once from the delivered rows (through the
-- partial index of delivered rows; as many as `prune --delivered-older-than` keeps) while the
-- queue is locked against writes, so no delivery recorded meanwhile is counted twice or missed.
-- The triggers' function is replaced in place: the triggers stay.
LOCK TABLE forward_queue IN SHARE ROW EXCLUSIVE MODE;

DROP TABLE forward_queue_totals;
CREATE TABLE forward_queue_totals (
    bundle_id        text NOT NULL,
    environment      text NOT NULL,
    target_id        text NOT NULL,
    -- The webhook as output may show it (the gauges' `target` label).
    target_redacted  text NOT NULL,
    delivered        bigint NOT NULL,
    PRIMARY KEY (bundle_id, environment, target_id)
);
INSERT INTO forward_queue_totals (bundle_id, environment, target_id, target_redacted, delivered)
SELECT bundle_id, environment, target_id, min(target_redacted), count(*)
FROM forward_queue WHERE status = 'delivered'
GROUP BY bundle_id, environment, target_id;

-- Rows are queued pending: only an UPDATE makes one delivered (or, by hand, not), only a DELETE
-- removes one. Each statement moves the rows of the keys it touched, in key order (one sorted
-- lock set, so two forwarders recording at once cannot deadlock).
CREATE OR REPLACE FUNCTION forward_queue_count_delivered() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO forward_queue_totals AS t (bundle_id, environment, target_id, target_redacted, delivered)
        SELECT bundle_id, environment, target_id, min(target_redacted), sum(delta) FROM (
            SELECT bundle_id, environment, target_id, target_redacted, -1 AS delta FROM old_rows WHERE status = 'delivered'
            UNION ALL
            SELECT bundle_id, environment, target_id, target_redacted, 1 FROM new_rows WHERE status = 'delivered'
        ) moved
        GROUP BY bundle_id, environment, target_id HAVING sum(delta) <> 0
        ORDER BY bundle_id, environment, target_id
        ON CONFLICT (bundle_id, environment, target_id) DO UPDATE SET delivered = t.delivered + excluded.delivered;
    ELSE
        INSERT INTO forward_queue_totals AS t (bundle_id, environment, target_id, target_redacted, delivered)
        SELECT bundle_id, environment, target_id, min(target_redacted), -count(*) FROM old_rows WHERE status = 'delivered'
        GROUP BY bundle_id, environment, target_id
        ORDER BY bundle_id, environment, target_id
        ON CONFLICT (bundle_id, environment, target_id) DO UPDATE SET delivered = t.delivered + excluded.delivered;
    END IF;
    RETURN NULL;
END
$$;
