-- name: active_count
-- The exact number of an agent's active facts (on the partial index facts_agent_active_recent).
SELECT count(*) FROM facts WHERE agent_id = $1 AND status = 'active'

-- name: refuted_at_head
-- Of the facts $3, those of agent $1 whose latest check refuted them at HEAD $2 (on the index
-- fact_checks_fact_recent: one lookup per fact). A fingerprint is fixed per HEAD, so such a
-- fact is left out of the arrival without being checked again.
SELECT f.fact_id
  FROM unnest($3::uuid[]) AS f(fact_id)
 CROSS JOIN LATERAL (SELECT c.status, c.head
                       FROM fact_checks c
                      WHERE c.fact_id = f.fact_id AND c.agent_id = $1
                      ORDER BY c.checked_at DESC, c.check_id DESC
                      LIMIT 1) l
 WHERE l.status = 'refuted' AND l.head = $2
