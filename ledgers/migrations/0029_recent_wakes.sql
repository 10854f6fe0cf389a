-- The newest wakes of every agent (`introspection.recent` with no agent: the console's timeline,
-- `wake ledger`, `wake status`) are read in this order. Without this index each such read sorts
-- every row of the ledger (docs/performance.md, "The console").
CREATE INDEX wake_introspection_recent ON wake_introspection_ledger (started_at DESC);
