-- 0009: forwarding without URL secrets at rest, leases a forwarder renews while it sends, queue
-- gauges that read no more than what waits, and the horizon of the change feed's pruning.

-- The webhook URL as output may show it: without user, password, query or fragment (the places
-- a URL carries credentials). The same rule as ForwardingTarget.redact in the code.
CREATE FUNCTION pg_temp.redacted_url(url text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT regexp_replace(regexp_replace(regexp_replace(url, '#.*$', ''), '\?.*$', '?…'), '^([^:/?#]+://)[^/?#]*@', '\1…@')
$$;

-- Queue rows keep a target id (the SHA-256 of the URL, hex) and the redacted URL; the full URL
-- comes from the configuration of the process that delivers (--forward-to, RECONCILER_FORWARD_TO),
-- which delivers only rows whose target id is its URL's.
ALTER TABLE forward_queue ADD COLUMN target_id text, ADD COLUMN target_redacted text;
UPDATE forward_queue SET target_id = encode(sha256(convert_to(target_url, 'UTF8')), 'hex'), target_redacted = pg_temp.redacted_url(target_url);
ALTER TABLE forward_queue ALTER COLUMN target_id SET NOT NULL, ALTER COLUMN target_redacted SET NOT NULL;
ALTER TABLE forward_queue DROP CONSTRAINT forward_queue_pkey;
ALTER TABLE forward_queue DROP COLUMN target_url;
ALTER TABLE forward_queue ADD PRIMARY KEY (notification_uuid, target_id);

-- A run's options name its target the same way.
UPDATE reconcile_runs SET options = jsonb_set(options, '{forwardTo}', jsonb_build_object(
        'id', encode(sha256(convert_to(options->>'forwardTo', 'UTF8')), 'hex'),
        'redacted', pg_temp.redacted_url(options->>'forwardTo')))
WHERE jsonb_typeof(options->'forwardTo') = 'string';

-- Each lease has a token of its own: a forwarder renews, records and sends only while the row
-- still carries its token, so a delivery another forwarder took over is never sent by both.
ALTER TABLE forward_queue ADD COLUMN lease_token uuid;
CREATE INDEX forward_queue_lease_idx ON forward_queue (lease_token) WHERE status = 'leased';

-- The gauges (every serve replica, every minute) and pruning read partial indexes: what waits,
-- what failed, and delivered rows by age; the number of delivered rows is a counter kept by
-- triggers, so nothing counts the delivered rows, however many there are.
CREATE INDEX forward_queue_waiting_idx ON forward_queue (target_id, queued_at) WHERE status IN ('pending', 'leased');
CREATE INDEX forward_queue_failed_idx ON forward_queue (target_id, queued_at) WHERE status = 'failed';
CREATE INDEX forward_queue_delivered_idx ON forward_queue (delivered_at) WHERE status = 'delivered';

CREATE TABLE forward_queue_totals (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),
    delivered  bigint NOT NULL
);
INSERT INTO forward_queue_totals (delivered) SELECT count(*) FROM forward_queue WHERE status = 'delivered';

-- Rows are queued pending: only an UPDATE makes one delivered (or, by hand, not), only a DELETE
-- removes one. No INSERT trigger, so recording a notification pays nothing for the counter.
CREATE FUNCTION forward_queue_count_delivered() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    delta bigint := 0;
BEGIN
    SELECT delta - count(*) INTO delta FROM old_rows WHERE status = 'delivered';
    IF TG_OP = 'UPDATE' THEN
        SELECT delta + count(*) INTO delta FROM new_rows WHERE status = 'delivered';
    END IF;
    IF delta <> 0 THEN
        UPDATE forward_queue_totals SET delivered = delivered + delta;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER forward_queue_delivered_on_update AFTER UPDATE ON forward_queue
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION forward_queue_count_delivered();
CREATE TRIGGER forward_queue_delivered_on_delete AFTER DELETE ON forward_queue
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION forward_queue_count_delivered();

-- How far the change feed was pruned: the position (xid, change_id) of the last row deleted,
-- moved forward in the transaction that deletes. A reader whose position is before it has
-- missed rows, and says so instead of going on after the gap.
CREATE TABLE purchase_changes_pruned (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),
    xid        xid8 NOT NULL,
    change_id  bigint NOT NULL
);
INSERT INTO purchase_changes_pruned (xid, change_id) VALUES ('0', 0);
