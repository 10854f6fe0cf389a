-- name: active_count
-- The exact number of an agent's active facts (on the partial index facts_agent_active_recent).
SELECT count(*) FROM facts WHERE agent_id = $1 AND status = 'active'
