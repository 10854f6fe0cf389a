-- name: record_state
INSERT INTO settled_state (agent_id, subject, state, state_on, settled_at)
VALUES ($1, $2, $3, $4, $5)
RETURNING state_id

-- name: latest_state
-- The latest settled state: the newest day, then the newest settlement of it. The DATE is
-- formatted here, so no timezone (the connection's or the agent's) can move it a day.
SELECT state_id, subject, state, to_char(state_on, 'YYYY-MM-DD') AS state_on, settled_at
  FROM settled_state
 WHERE agent_id = $1
 ORDER BY state_on DESC, settled_at DESC, state_id DESC
 LIMIT 1

