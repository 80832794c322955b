-- The live path's quarantine: an authentic notification the webhook cannot decode (a field of a
-- shape Apple added after the release) is stored with its exact bytes under source 'webhook' and
-- answered 200, so it is not lost; `reconciler rejections --retry` applies it once a release
-- decodes it, and removes it. Its app and environment are '' when even they cannot be read. A
-- constraint swap only: the table is small and this validates it once.
ALTER TABLE quarantined_payloads DROP CONSTRAINT quarantined_payloads_source_check;
ALTER TABLE quarantined_payloads ADD CONSTRAINT quarantined_payloads_source_check
    CHECK (source IN ('notification_history', 'transaction_history', 'subscription_status', 'order_lookup', 'webhook'));
-- `rejections --retry UUID` finds a webhook payload by the UUID it claims, whatever app it names.
CREATE INDEX quarantined_payloads_uuid_idx ON quarantined_payloads (notification_uuid) WHERE notification_uuid IS NOT NULL;
