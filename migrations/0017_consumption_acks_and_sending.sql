-- 0017: consumption requests that need nothing more, and answers written before Apple is called.
--
-- `reconciler consumption ack` records that a request needs nothing more from the reconciler (the
-- app answered it itself, or it is deliberately not answered): one row per request, the first ack
-- kept. An acked request is no longer open: `consumption list --open`, the gauges and the alert
-- leave it out.
CREATE TABLE consumption_acks (
    notification_uuid  text PRIMARY KEY REFERENCES notifications,
    bundle_id          text NOT NULL,
    environment        text NOT NULL,
    transaction_id     text NOT NULL,
    acked_at           timestamptz NOT NULL DEFAULT now(),
    -- Who acked it (`--by`, else the operator's $USER) and why, as given.
    acked_by           text NOT NULL,
    note               text
);

-- An answer is written `sending` in a transaction of its own before Apple is called, and completed
-- with what Apple said in another; one left `sending` is an answer whose outcome was never recorded
-- (the command stopped, or the database could not be written after Apple answered). `send_id`
-- names the attempt, so a completion run again finds its row. `answered_by` says who sent it:
-- `command` (`reconciler consumption send`, as every answer before this migration), open to more
-- senders. The table holds one row per answer sent: small, and a constant default rewrites nothing.
ALTER TABLE consumption_answers
    ADD COLUMN send_id uuid UNIQUE,
    ADD COLUMN answered_by text NOT NULL DEFAULT 'command';
ALTER TABLE consumption_answers ALTER COLUMN answered_by DROP DEFAULT;
ALTER TABLE consumption_answers
    DROP CONSTRAINT consumption_answers_outcome_check,
    ADD CONSTRAINT consumption_answers_outcome_check CHECK (outcome IN ('sending', 'accepted', 'refused', 'failed'));
-- A request's newest answer (whether one is being sent).
CREATE INDEX consumption_answers_newest_idx ON consumption_answers (notification_uuid, answer_id);
