-- name: fact
-- The fact a check is about, of this agent: what a retraction quotes.
SELECT fact_id, fact_key, fact_value, anchors, recorded_at
  FROM facts
 WHERE fact_id = $1 AND agent_id = $2

-- name: insert
INSERT INTO fact_checks (fact_id, agent_id, status, evidence, head, checked_at, wake_id, retraction_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING check_id

-- name: latest
-- The newest check of each of the agent's facts (at most $2), newest first, with the exact number
-- of facts ever checked (a window COUNT, never the LIMIT).
SELECT l.check_id, l.fact_id, l.agent_id, l.status, l.evidence, l.head, l.checked_at, l.wake_id, l.retraction_id,
       count(*) OVER () AS total
  FROM (SELECT DISTINCT ON (c.fact_id) c.*
          FROM fact_checks c
         WHERE c.agent_id = $1
         ORDER BY c.fact_id, c.checked_at DESC, c.check_id DESC) l
 ORDER BY l.checked_at DESC, l.check_id DESC
 LIMIT $2

-- name: history
-- One fact's checks, newest first, with the exact total.
SELECT check_id, fact_id, agent_id, status, evidence, head, checked_at, wake_id, retraction_id,
       count(*) OVER () AS total
  FROM fact_checks
 WHERE fact_id = $1 AND agent_id = $2
 ORDER BY checked_at DESC, check_id DESC
 LIMIT $3

-- name: matured_reality_retractions
-- Retractions that checks of this fact wrote, unsettled and matured by $3, made at a HEAD other
-- than the one checked now ($4): a later check is their falsifier's test procedure. One row per
-- retraction (its first check's HEAD): a retraction is shared by the checks of one cause, across HEADs.
SELECT DISTINCT ON (r.id) r.id, c.head
  FROM fact_checks c
  JOIN retraction_ledger r ON r.id = c.retraction_id
 WHERE c.fact_id = $1 AND c.agent_id = $2 AND r.agent_id = $2
   AND r.verdict = 'unchecked' AND r.matures_at <= $3 AND c.head <> $4
 ORDER BY r.id, c.checked_at, c.check_id
