-- The harness's verdicts and its records of what it did move to the control plane (issue 40,
-- docs/isolation.md "Two planes"): `fact_checks` (the code check's verdict on a fact),
-- `last_actions` (the model loop's confirmation that a mutating call succeeded, shown as a
-- confirmed action in the arrival), `wake_turns` (the pressure it measured before each call) and
-- `context_events` (the context audit; the settings in it are read back as the agent's
-- thresholds, and the context tools record one only once it is within the operator's bounds).
-- The harness writes all four on its own login; the agent's tool role keeps reading its rows and
-- may write none. `ledgers.scope.setup`, which runs after the migrations, grants what
-- `ledgers.scope.PLANES` decides; this takes the writes away at once where the role exists (a
-- fresh database has none yet: the setup then grants SELECT only).
DO $harness_records$
DECLARE
    tool text := 'wake_tool_' || substr(md5(current_database()), 1, 12);
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = tool) THEN
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON fact_checks, last_actions, wake_turns, context_events FROM %I', tool);
    END IF;
END
$harness_records$;
