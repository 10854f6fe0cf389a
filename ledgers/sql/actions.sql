-- name: record
INSERT INTO last_actions (agent_id, surface, tool, summary, arguments, wake_id, fence, acted_at)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8)
RETURNING action_id

-- name: since
-- The agent's confirmed actions at or after $2, newest first, with their number counted up to $4
-- (the cap + 1, ledgers.queries.COUNT_READ).
SELECT action_id, surface, tool, summary, arguments, wake_id, fence, acted_at,
       (SELECT count(*) FROM (SELECT 1 FROM last_actions c WHERE c.agent_id = $1 AND c.acted_at >= $2 LIMIT $4) n) AS total
  FROM last_actions
 WHERE agent_id = $1 AND acted_at >= $2
 ORDER BY acted_at DESC, action_id DESC
 LIMIT $3
