-- A claimed one-shot whose claimer died before writing its row gets that row from the next
-- replica, `abandoned`: it never reached its manifest, so `abandoned` joins the statuses that
-- may have none (0011's list: a wake that never ran records no manifest).
ALTER TABLE wake_introspection_ledger DROP CONSTRAINT wake_introspection_manifest;
ALTER TABLE wake_introspection_ledger
    ADD CONSTRAINT wake_introspection_manifest CHECK (manifest_root IS NOT NULL OR status IN ('failed', 'skipped', 'aborted', 'missed', 'abandoned'));
