-- Confirmed mutating actions, across surfaces (DESIGN step 10): one row per successful call of a
-- tool declared `mutates`, written in the wake's fenced transaction. The settled-facts block
-- reads the last 48 hours of it.
CREATE TABLE last_actions (
    action_id  bigserial PRIMARY KEY,
    agent_id   text NOT NULL,
    surface    text NOT NULL,          -- where it was done: 'wake.whisper', 'wake.surface', 'chat', ...
    tool       text NOT NULL,
    summary    text NOT NULL CHECK (length(summary) > 0),
    arguments  jsonb NOT NULL DEFAULT '{}',
    wake_id    uuid REFERENCES wake_introspection_ledger (wake_id),
    fence      bigint,
    acted_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX last_actions_agent_recent ON last_actions (agent_id, acted_at DESC);
