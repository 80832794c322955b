-- 0008: cheaper writes of signed data, and a phase-2 queue that reads each customer once.

-- A JWS is base64 of signatures, certificates and JSON: PostgreSQL's default compression (pglz)
-- tries every value over 2 kB, fails to shrink it, and stores it as it was. Measured on
-- `reconciler-bench apply`, those failed attempts were a third of PostgreSQL's CPU. EXTERNAL keeps
-- the values out of line without trying. Only rows written from now on are affected.
ALTER TABLE notifications ALTER COLUMN signed_payload SET STORAGE EXTERNAL;
ALTER TABLE transactions ALTER COLUMN signed_transaction_info SET STORAGE EXTERNAL;
ALTER TABLE quarantined_payloads ALTER COLUMN signed_payload SET STORAGE EXTERNAL;

-- When the current (or last) read of a customer's history began: a notification phase 1 replays
-- later makes the customer read again only when Apple signed it after (or shortly before) that
-- read began; an older one is already in the history that read returns.
ALTER TABLE gap_queue ADD COLUMN read_started_at timestamptz;
-- The signedDate of the newest replayed notification that touched the customer.
ALTER TABLE gap_queue ADD COLUMN touched_signed_ms bigint;
-- First queued, first read. Within one transaction's batch the order is a hash of the anchor:
-- the ids Apple gives one customer's purchases are often close together, and reading them side by
-- side would read that customer's history twice before either read could cover the other.
ALTER TABLE gap_queue ADD COLUMN queued_at timestamptz NOT NULL DEFAULT now();
DROP INDEX gap_queue_claimable_idx;
CREATE INDEX gap_queue_claimable_idx ON gap_queue (run_id, (reason <> 'touched'), queued_at, hashtext(anchor_transaction_id))
    WHERE status IN ('pending', 'leased');
