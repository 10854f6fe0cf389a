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
