-- The console's cost per local day (`console_reads.daily_costs`) sums the agent's wakes of the last
-- seven days: about 16,000 rows at one wake every 37 s. Read from the heap, each of those wide rows
-- (its blocks, tools and diff) is fetched for four columns; this index holds them, so the sum is an
-- index-only read once vacuum has marked the pages all-visible (autovacuum does, for an
-- insert-mostly table). One more index entry per row written and settled (docs/performance.md,
-- "The console").
CREATE INDEX wake_introspection_agent_costs
    ON wake_introspection_ledger (agent_id, started_at)
    INCLUDE (cost_usd, prompt_tokens, completion_tokens, model);
