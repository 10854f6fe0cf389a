-- The newest settled wake of one (agent, tier): the diff of every wake reads it. Without this
-- index a tier with no rows yet scans every row the agent has.
CREATE INDEX wake_introspection_tier_recent
    ON wake_introspection_ledger (agent_id, tier, started_at DESC);
