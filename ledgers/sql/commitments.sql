-- name: add
INSERT INTO commitments (agent_id, title, due_on, wake_id, created_at)
VALUES ($1, $2, $3, $4, $5)
RETURNING commitment_id

-- name: complete
-- Close an open commitment: `done` or `dropped`, with what came of it.
UPDATE commitments
   SET status = $3, outcome = $4, completed_at = $5
 WHERE commitment_id = $1 AND agent_id = $2 AND status = 'open'
RETURNING commitment_id

-- name: state
SELECT commitment_id, status FROM commitments WHERE commitment_id = $1 AND agent_id = $2

-- name: open_newest
-- The newest open commitments (at most $2), due dates formatted in SQL, and the number open,
-- counted up to $3 (the cap + 1, ledgers.queries.COUNT_READ) on the partial index of open ones.
SELECT commitment_id, title, to_char(due_on, 'YYYY-MM-DD') AS due_on, created_at,
       (SELECT count(*) FROM (SELECT 1 FROM commitments c WHERE c.agent_id = $1 AND c.status = 'open' LIMIT $3) n) AS total
  FROM commitments
 WHERE agent_id = $1 AND status = 'open'
 ORDER BY created_at DESC, commitment_id DESC
 LIMIT $2
