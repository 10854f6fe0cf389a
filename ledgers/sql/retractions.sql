-- name: insert
-- matures_at is $18 when given, else corrected_at + $17 days. Inserting an existing id is a no-op
-- (that is how the demo seed stays idempotent).
INSERT INTO retraction_ledger (
    id, agent_id, claim_verbatim, stood_on, why_wrong, corrected_claim, caught_by, row_class,
    test_procedure, expected_retraction_pass_obs, overturn_retraction_condition, corrected_at,
    probe_target, probe_mode, probe_needle, probe_negate, matures_at
) VALUES (
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
    COALESCE($18::timestamptz, $12::timestamptz + make_interval(days => $17::int))
)
ON CONFLICT (id) DO NOTHING
RETURNING id

-- name: get
SELECT id, agent_id, claim_verbatim, stood_on, why_wrong, corrected_claim, caught_by, row_class,
       test_procedure, expected_retraction_pass_obs, overturn_retraction_condition, verdict,
       corrected_at, matures_at, falsifier_checked_at, falsifier_outcome,
       probe_target, probe_mode, probe_needle, probe_negate, created_at
  FROM retraction_ledger
 WHERE id = $1

-- name: find_by_prefix
-- Retractions whose id lies in [$1, $2], the range an id prefix spans (ledgers.ids), optionally of
-- one agent, newest first, with the exact number that match.
SELECT id, count(*) OVER () AS total
  FROM retraction_ledger
 WHERE id BETWEEN $1 AND $2 AND ($3::text IS NULL OR agent_id = $3)
 ORDER BY corrected_at DESC
 LIMIT $4

-- name: due
-- Falsifiers that have matured by $2 and are still unchecked, oldest maturity first, with the
-- number due counted up to $4 (the cap + 1, ledgers.queries.COUNT_READ; never the LIMIT).
SELECT id, agent_id, claim_verbatim, stood_on, why_wrong, corrected_claim, caught_by, row_class,
       test_procedure, expected_retraction_pass_obs, overturn_retraction_condition, verdict,
       corrected_at, matures_at, falsifier_checked_at, falsifier_outcome,
       probe_target, probe_mode, probe_needle, probe_negate, created_at,
       (SELECT count(*) FROM (SELECT 1 FROM retraction_ledger c
                               WHERE c.agent_id = $1 AND c.verdict = 'unchecked' AND c.matures_at <= $2 LIMIT $4) n) AS total
  FROM retraction_ledger
 WHERE agent_id = $1 AND verdict = 'unchecked' AND matures_at <= $2
 ORDER BY matures_at, id
 LIMIT $3

-- name: list
-- Newest corrections first; $2 (a time) keeps only falsifiers due at it; $1 NULL means every agent.
SELECT id, agent_id, claim_verbatim, stood_on, why_wrong, corrected_claim, caught_by, row_class,
       test_procedure, expected_retraction_pass_obs, overturn_retraction_condition, verdict,
       corrected_at, matures_at, falsifier_checked_at, falsifier_outcome,
       probe_target, probe_mode, probe_needle, probe_negate, created_at,
       count(*) OVER () AS total
  FROM retraction_ledger
 WHERE ($1::text IS NULL OR agent_id = $1)
   AND ($2::timestamptz IS NULL OR (verdict = 'unchecked' AND matures_at <= $2))
 ORDER BY corrected_at DESC, id
 LIMIT $3

-- name: settle
-- Settle an unchecked, matured falsifier once; returns nothing when the row is missing, already
-- settled, or not yet due at $5.
UPDATE retraction_ledger
   SET verdict = $3, falsifier_outcome = $4, falsifier_checked_at = $5
 WHERE id = $1 AND agent_id = $2 AND verdict = 'unchecked' AND matures_at <= $5
RETURNING id, verdict, falsifier_outcome, falsifier_checked_at

-- name: newest
-- The agent's newest retractions for the settled-facts block, with their number counted up to $4
-- (the cap + 1, ledgers.queries.COUNT_READ; never the LIMIT). The correction date is formatted in
-- SQL in the agent's zone ($3).
-- A retraction that named a fact starts its stood_on with "fact <fact_id> (" (ledgers/retractions.py,
-- `naming_fact`); `refuted_fact` is that fact's key while the fact is refuted.
SELECT n.claim_verbatim, n.corrected_claim, n.verdict, n.corrected_on, f.fact_key AS refuted_fact, n.total
  FROM (SELECT r.agent_id, r.id, r.corrected_at, r.stood_on, r.claim_verbatim, r.corrected_claim, r.verdict,
               to_char(r.corrected_at AT TIME ZONE $3, 'YYYY-MM-DD') AS corrected_on,
               (SELECT count(*) FROM (SELECT 1 FROM retraction_ledger c WHERE c.agent_id = $1 LIMIT $4) x) AS total
          FROM retraction_ledger r
         WHERE r.agent_id = $1
         ORDER BY r.corrected_at DESC, r.id
         LIMIT $2) n
  LEFT JOIN facts f
    ON f.fact_id = substring(n.stood_on FROM '^fact ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}) \(')::uuid
   AND f.agent_id = n.agent_id AND f.status = 'refuted'
 ORDER BY n.corrected_at DESC, n.id
