-- 0014: notifications with deadlines, and notifications that change no purchase. Apple asks for an
-- answer to a CONSUMPTION_REQUEST within 12 hours; runs query them first, forward the open ones
-- first, and the answers sent are recorded. Every notification recorded for the first time reaches
-- the change feed: the purchase row of the change it made, or a row of kind `notification`. The
-- export gains the latest transaction's appTransactionId, revocation type and percentage, and
-- offer. New columns are not backfilled: they fill as rows are written from now on.

-- When Apple first tried to send a notification (the earliest of its send attempts in Get
-- Notification History; NULL for one the live webhook received), the deadline Apple sets for an
-- answer (a CONSUMPTION_REQUEST: 12 hours after that first attempt, else after its signedDate),
-- fixed when the notification is first recorded, and the customer's reason for a refund request.
ALTER TABLE notifications
    ADD COLUMN first_send_attempt_ms bigint,
    ADD COLUMN respond_by_ms bigint,
    ADD COLUMN consumption_request_reason text;
-- `consumption list`, the gauges and `consumption send` read the requests, never the whole table.
CREATE INDEX notifications_deadline_idx ON notifications (bundle_id, environment, respond_by_ms) WHERE respond_by_ms IS NOT NULL;
CREATE INDEX notifications_deadline_transaction_idx ON notifications (transaction_id) WHERE respond_by_ms IS NOT NULL;

-- Answers sent with Send Consumption Information (V2), each with what Apple said: accepted (202),
-- refused (a 4xx, with Apple's error code) or failed (429, 5xx or no answer: send it again).
CREATE TABLE consumption_answers (
    answer_id                bigserial PRIMARY KEY,
    bundle_id                text NOT NULL,
    environment              text NOT NULL,
    transaction_id           text NOT NULL,
    -- The CONSUMPTION_REQUEST it answers (the newest stored for the transaction when it was sent).
    notification_uuid        text NOT NULL,
    customer_consented       boolean NOT NULL,
    delivery_status          text NOT NULL,
    sample_content_provided  boolean NOT NULL,
    refund_preference        text,
    consumption_percentage   integer,
    outcome                  text NOT NULL CHECK (outcome IN ('accepted', 'refused', 'failed')),
    http_status              integer,
    error_code               bigint,
    error_message            text,
    sent_at                  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX consumption_answers_request_idx ON consumption_answers (notification_uuid) WHERE outcome = 'accepted';

-- The export: these come from the latest transaction, as its other columns do.
ALTER TABLE purchases
    ADD COLUMN app_transaction_id text,
    ADD COLUMN revocation_type text,
    ADD COLUMN revocation_percentage integer,
    ADD COLUMN offer_type integer,
    ADD COLUMN offer_identifier text;

-- The change feed: rows of kind `notification` (a notification recorded for the first time that
-- changed no purchase, or that Apple set a deadline for) beside the purchase rows, in the one
-- sequence and commit order. A notification row has no before/after state and may name no purchase.
ALTER TABLE purchase_changes
    ADD COLUMN kind text NOT NULL DEFAULT 'purchase' CHECK (kind IN ('purchase', 'notification')),
    ADD COLUMN notification_type text,
    ADD COLUMN subtype text,
    ADD COLUMN transaction_id text,
    ADD COLUMN signed_date_ms bigint,
    ADD COLUMN respond_by_ms bigint;
ALTER TABLE purchase_changes ALTER COLUMN original_transaction_id DROP NOT NULL, ALTER COLUMN after_state DROP NOT NULL;
ALTER TABLE purchase_changes ADD CONSTRAINT purchase_changes_row_shape_check CHECK (
    (kind = 'purchase' AND original_transaction_id IS NOT NULL AND after_state IS NOT NULL)
    OR (kind = 'notification' AND notification_uuid IS NOT NULL AND notification_type IS NOT NULL AND before_state IS NULL AND after_state IS NULL));

-- Forwarding: a delivery knows its notification's deadline, so the open ones are sent first, and
-- whether a run holds it back (`held`, with next_attempt_at later) until the run's query of
-- consumption requests is done; the run releases it then, or the hold runs out by itself.
ALTER TABLE forward_queue
    ADD COLUMN respond_by_ms bigint,
    ADD COLUMN held boolean NOT NULL DEFAULT false;
CREATE INDEX forward_queue_deadline_idx ON forward_queue (target_id, respond_by_ms)
    WHERE status IN ('pending', 'leased') AND respond_by_ms IS NOT NULL;
