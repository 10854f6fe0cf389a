-- name: append
INSERT INTO daybook (agent_id, wake_id, entry, written_at, unchecked_blocks)
VALUES ($1, $2, $3, $4, $5)
RETURNING entry_id

-- name: recent
-- The newest entries (at most $2) and the exact number of entries.
SELECT entry_id, wake_id, entry, written_at, unchecked_blocks, count(*) OVER () AS total
  FROM daybook
 WHERE agent_id = $1
 ORDER BY written_at DESC, entry_id DESC
 LIMIT $2
