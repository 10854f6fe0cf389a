-- Scheduled slots claimed across every replica and every restart (DESIGN step 2). The replica
-- whose INSERT wins runs the slot; the others see the existing row, log who holds it and run
-- nothing. `wake_id` links the claim to the attempt's ledger row.
CREATE TABLE wake_slots (
    agent_id      text NOT NULL,
    tier          text NOT NULL CHECK (tier IN ('whisper', 'surface', 'full')),
    scheduled_for timestamptz NOT NULL,
    trigger       text NOT NULL CHECK (trigger IN ('schedule', 'catch_up')),
    claimed_by    text NOT NULL,
    claimed_at    timestamptz NOT NULL DEFAULT now(),
    wake_id       uuid NOT NULL,
    PRIMARY KEY (agent_id, tier, scheduled_for)
);

-- Every lease taken closes the agent's rows left `started` (abandoned); at start the daemon looks
-- for such rows of every agent. Both read only the few open rows, however long the history.
CREATE INDEX wake_introspection_open ON wake_introspection_ledger (agent_id) WHERE status = 'started';
