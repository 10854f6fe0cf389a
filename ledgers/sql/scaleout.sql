-- name: claim
-- Claim a slot nobody ran, to record it `missed` (a takeover's catch-up); a row only for the winner.
INSERT INTO wake_slots (agent_id, tier, scheduled_for, trigger, claimed_by, claimed_at, wake_id)
VALUES ($1, $2, $3, 'schedule', $4, $5, $6)
ON CONFLICT (agent_id, tier, scheduled_for) DO NOTHING
RETURNING wake_id

-- name: last_claimed
-- `slots.sql`'s last_claimed for many agents at once: the newest scheduled slot of each (agent,
-- tier) claimed or recorded, whichever is newer.
SELECT agent_id, tier, max(scheduled_for) AS scheduled_for FROM (
    SELECT agent_id, tier, max(scheduled_for) AS scheduled_for FROM wake_slots
     WHERE agent_id = ANY($1::text[]) GROUP BY agent_id, tier
    UNION ALL
    SELECT agent_id, tier, max(scheduled_for) FROM wake_introspection_ledger
     WHERE agent_id = ANY($1::text[]) AND trigger IN ('schedule', 'catch_up') GROUP BY agent_id, tier
) AS both_sources
GROUP BY agent_id, tier
