-- name: insert
INSERT INTO claim_probe_records (
    id, agent_id, wake_id, retraction_id, target, resolved_path, mode, needle, negate, assertion,
    verdict, evidence, instrument_state, controls, checked_at
) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $13, $14::jsonb, $15)

-- name: recent
-- Newest first; $1 NULL means every agent, $2 NULL every retraction (or none).
SELECT id, agent_id, wake_id, retraction_id, target, resolved_path, mode, needle, negate, assertion,
       verdict, evidence, instrument_state, controls, checked_at
  FROM claim_probe_records
 WHERE ($1::text IS NULL OR agent_id = $1)
   AND ($2::uuid IS NULL OR retraction_id = $2)
 ORDER BY checked_at DESC, id
 LIMIT $3
