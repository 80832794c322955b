-- 0022: deliveries again on demand (`reconciler forward --redeliver`): a stored notification queued
-- again for a webhook, acknowledged before or not, each time as a new row.
--
-- Redeliveries have a queue of their own, which the forwarder drains beside forward_queue (after
-- its due first deliveries), sending each with the header `Reconciler-Redelivery: 1`. forward_queue
-- keeps its key (notification_uuid, target_id): a binary from before this migration, still serving
-- while the new one migrates, inserts first deliveries with ON CONFLICT (notification_uuid,
-- target_id), which needs that key, and leases, records and counts them as before. Nothing here
-- touches forward_queue, so nothing is rewritten and the webhook never waits on this migration.
CREATE TABLE forward_redeliveries (
    redelivery_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    notification_uuid  text NOT NULL,
    target_id          text NOT NULL,
    -- The webhook as output may show it.
    target_redacted    text NOT NULL,
    bundle_id          text NOT NULL,
    environment        text NOT NULL,
    -- As forward_queue's: pending, leased (a forwarder is sending it), delivered, failed (out of attempts).
    status             text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'leased', 'delivered', 'failed')),
    attempts           integer NOT NULL DEFAULT 0,
    next_attempt_at    timestamptz NOT NULL DEFAULT now(),
    lease_until        timestamptz,
    lease_token        uuid,
    worker             text,
    last_status_code   integer,
    last_error         text,
    queued_at          timestamptz NOT NULL DEFAULT now(),
    delivered_at       timestamptz
);
-- What a forwarder leases (its target's due rows), what pruning keeps payloads for, what is sent.
CREATE INDEX forward_redeliveries_waiting_idx ON forward_redeliveries (target_id, next_attempt_at) WHERE status IN ('pending', 'leased');
CREATE INDEX forward_redeliveries_unsent_idx ON forward_redeliveries (notification_uuid) WHERE status <> 'delivered';
CREATE INDEX forward_redeliveries_lease_idx ON forward_redeliveries (lease_token) WHERE status = 'leased';
CREATE INDEX forward_redeliveries_delivered_idx ON forward_redeliveries (delivered_at) WHERE status = 'delivered';

-- The windows `--redeliver` reads (`received_at` of one app and environment). Built concurrently
-- before the transaction, so the webhook keeps recording notifications while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS notifications_received_idx ON notifications (bundle_id, environment, received_at);
-- Only when the concurrent build above failed (it is logged, not fatal): built here instead.
CREATE INDEX IF NOT EXISTS notifications_received_idx ON notifications (bundle_id, environment, received_at);
