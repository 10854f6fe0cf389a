-- name: append
INSERT INTO daybook (agent_id, wake_id, entry, written_at, unchecked_blocks)
VALUES ($1, $2, $3, $4, $5)
RETURNING entry_id

-- name: recent
-- The newest entries (at most $2) and the number of entries, counted up to $3 (the cap + 1,
-- ledgers.queries.COUNT_READ): the count reads at most $3 index entries, not every entry.
SELECT entry_id, wake_id, entry, written_at, unchecked_blocks,
       (SELECT count(*) FROM (SELECT 1 FROM daybook c WHERE c.agent_id = $1 LIMIT $3) n) AS total
  FROM daybook
 WHERE agent_id = $1
 ORDER BY written_at DESC, entry_id DESC
 LIMIT $2
