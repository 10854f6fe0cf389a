-- name: record
INSERT INTO last_actions (agent_id, surface, tool, summary, arguments, wake_id, fence, acted_at)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8)
RETURNING action_id

-- name: since
-- The agent's confirmed actions at or after $2, newest first, with the exact total.
SELECT action_id, surface, tool, summary, arguments, wake_id, fence, acted_at,
       count(*) OVER () AS total
  FROM last_actions
 WHERE agent_id = $1 AND acted_at >= $2
 ORDER BY acted_at DESC, action_id DESC
 LIMIT $3
