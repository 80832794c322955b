-- 0015: signed values stored small. A JWS header carries its certificate chain (about 4.4 KB on
-- Apple's real values) and one signing certificate signs every value for about two years, so each
-- distinct header is stored once, by its SHA-256; a value keeps the header's hash, its payload's
-- decoded bytes (the JSON exactly as signed, not re-serialised; deflated, since PostgreSQL
-- compresses nothing in a row under 2 KB) and its signature's bytes, and the exact JWS is rebuilt
-- from them (JWSParts and NotificationPayloadParts in AppStoreServer, StoredPayloads in
-- ReconcilerDomain). A notification's nested transaction and renewal info are cut out of its
-- payload and stored beside it the same way, and a transaction that came inside a notification
-- names that notification instead of being stored again. Each value is rebuilt and compared when
-- it is written; one whose parts would not rebuild it byte for byte is stored whole.
--
-- Rows written before this migration stay as they were (`legacy`) until `reconciler
-- compact-payloads` takes them apart in batches of short transactions: rewriting every payload
-- inside this migration's one transaction would hold the tables for as long as that takes.

-- Each distinct JWS header (the protected header segment exactly as signed), once. Never deleted:
-- there is one per signing certificate, and any stored value may name it.
CREATE TABLE jws_headers (
    sha256          bytea PRIMARY KEY,
    encoded_header  text NOT NULL,
    first_seen_at   timestamptz NOT NULL DEFAULT now()
);

-- How a row holds its signed value (PayloadForm in the code):
--   legacy           the whole JWS in the text column, as written before 0015 (compact-payloads takes it apart)
--   whole            the whole JWS in the text column: its parts would not rebuild it exactly
--   parts            header hash, payload bytes and signature (and, for a notification, its nested values)
--   in_notification  (transactions) the version stored inside the notification named by signed_in_notification
--   pruned           removed by `reconciler prune --payloads-older-than`; the decoded columns and the hash stay
ALTER TABLE notifications
    ALTER COLUMN signed_payload DROP NOT NULL,
    ADD COLUMN payload_form text NOT NULL DEFAULT 'legacy',
    -- SHA-256 of the whole JWS (the quarantine's payload_sha256, as bytes): kept when the payload is pruned.
    ADD COLUMN payload_sha256 bytea,
    ADD COLUMN header_sha256 bytea,
    -- Raw DEFLATE of the payload's JSON with the nested values' characters cut out (their quotes
    -- stay), then for each nested value present (transaction, then renewal info) a NUL byte and its
    -- payload's JSON.
    ADD COLUMN payload bytea,
    ADD COLUMN signature bytea,
    -- data.signedTransactionInfo: where in the cut payload its characters go back, its signature,
    -- and its header's hash when that is not the notification's own (usually it is: NULL).
    ADD COLUMN transaction_offset integer,
    ADD COLUMN transaction_signature bytea,
    ADD COLUMN transaction_header_sha256 bytea,
    -- data.signedRenewalInfo, the same way.
    ADD COLUMN renewal_offset integer,
    ADD COLUMN renewal_signature bytea,
    ADD COLUMN renewal_header_sha256 bytea,
    ADD COLUMN payload_pruned_at timestamptz,
    ADD CONSTRAINT notifications_payload_form_check CHECK (CASE payload_form
        WHEN 'parts' THEN payload IS NOT NULL AND signature IS NOT NULL AND header_sha256 IS NOT NULL AND signed_payload IS NULL
        WHEN 'pruned' THEN signed_payload IS NULL AND payload IS NULL AND transaction_signature IS NULL AND renewal_signature IS NULL
        WHEN 'legacy' THEN signed_payload IS NOT NULL
        WHEN 'whole' THEN signed_payload IS NOT NULL
        ELSE false END) NOT VALID;
-- The checks are NOT VALID: every existing row is legacy with its JWS, which they accept, and
-- validating them would read the whole table inside this migration. A row written without saying
-- its form holds its JWS whole, as before: legacy (compact-payloads takes it apart).

ALTER TABLE transactions
    ALTER COLUMN signed_transaction_info DROP NOT NULL,
    ADD COLUMN payload_form text NOT NULL DEFAULT 'legacy',
    -- SHA-256 of the JWS, kept when the payload is pruned; none for a version inside a notification,
    -- whose own hash covers it (its JWS is part of the notification's).
    ADD COLUMN payload_sha256 bytea,
    -- The notification whose data.signedTransactionInfo is this version (form in_notification).
    ADD COLUMN signed_in_notification text,
    ADD COLUMN header_sha256 bytea,
    -- Raw DEFLATE of the payload's JSON.
    ADD COLUMN payload bytea,
    ADD COLUMN signature bytea,
    ADD COLUMN payload_pruned_at timestamptz,
    ADD CONSTRAINT transactions_payload_form_check CHECK (CASE payload_form
        WHEN 'parts' THEN payload IS NOT NULL AND signature IS NOT NULL AND header_sha256 IS NOT NULL AND signed_transaction_info IS NULL
        WHEN 'in_notification' THEN signed_in_notification IS NOT NULL AND signed_transaction_info IS NULL AND payload IS NULL
        WHEN 'pruned' THEN signed_transaction_info IS NULL AND payload IS NULL
        WHEN 'legacy' THEN signed_transaction_info IS NOT NULL
        WHEN 'whole' THEN signed_transaction_info IS NOT NULL
        ELSE false END) NOT VALID;

-- A transaction keeps the version it has when a newer one says the same (everything but its
-- signedDate): a run's transaction history, signed when it is read, repeats the versions the
-- notifications brought, and keeping those means a transaction is stored once, inside its
-- notification, and is not written again (PurchaseStore.upsertTransactionsSQL).
