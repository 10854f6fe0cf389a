-- name: claim
-- Claim a slot; returns a row only for the replica whose insert won.
INSERT INTO wake_slots (agent_id, tier, scheduled_for, trigger, claimed_by, claimed_at, wake_id)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (agent_id, tier, scheduled_for) DO NOTHING
RETURNING wake_id

-- name: holder
SELECT claimed_by, claimed_at, wake_id, trigger FROM wake_slots
 WHERE agent_id = $1 AND tier = $2 AND scheduled_for = $3

-- name: last_claimed
-- The newest scheduled slot of (agent, tier) that was claimed or recorded, whichever is newer:
-- the ledger counts too, so history from before slot claims existed is not replayed.
SELECT max(scheduled_for) FROM (
    SELECT max(scheduled_for) AS scheduled_for FROM wake_slots WHERE agent_id = $1 AND tier = $2
    UNION ALL
    SELECT max(scheduled_for) FROM wake_introspection_ledger
     WHERE agent_id = $1 AND tier = $2 AND trigger IN ('schedule', 'catch_up')
) AS both_sources

-- name: claim_reading_fence
-- The claim, the agent's newest fence (the floor of the lease's next fence) and the pause that
-- holds (agent, tier) back at the claim's time $6, in one round trip: `won` is the wake id only
-- for the replica whose insert won. The pause is `controls.sql`'s `pause_for` rule: the tier's
-- own, else the agent-wide one (tests/integration/test_operator_controls.py holds both to it).
WITH won AS (
    INSERT INTO wake_slots (agent_id, tier, scheduled_for, trigger, claimed_by, claimed_at, wake_id)
    VALUES ($1, $2, $3, $4, $5, $6, $7)
    ON CONFLICT (agent_id, tier, scheduled_for) DO NOTHING
    RETURNING wake_id
)
SELECT (SELECT wake_id FROM won) AS won, (SELECT fence FROM agent_fences WHERE agent_id = $1) AS fence,
       p.agent_id, p.tier, p.paused_by, p.paused_at, p.until, p.reason
  FROM (SELECT 1) AS one
  LEFT JOIN LATERAL (
      SELECT agent_id, tier, paused_by, paused_at, until, reason FROM wake_pauses
       WHERE agent_id = $1 AND tier IN ($2, 'all') AND (until IS NULL OR until > $6)
       ORDER BY tier = 'all'
       LIMIT 1
  ) AS p ON true
