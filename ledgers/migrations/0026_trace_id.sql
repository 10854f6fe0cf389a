-- Traces (docs/traces.md): the OpenTelemetry trace a wake's spans were exported
-- under, as 32 hex digits, so `wake show` names it; NULL when the process traced nothing. Written
-- with the row by the writer that writes the row (ledgers.introspection.insert), never changed after.
ALTER TABLE wake_introspection_ledger ADD COLUMN trace_id text CHECK (trace_id ~ '^[0-9a-f]{32}$');
