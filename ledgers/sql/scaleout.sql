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

-- name: claimed_since
-- The slots claimed after each (agent, tier)'s own look back ($1, $2, $3 side by side): a
-- takeover looks in them for slots nobody claimed before a later one was (a replica that died
-- holding them).
-- Each with who claimed it, when, and whether its wake has a row (a claim without one is a replica
-- that died between the claim and the wake's first write).
SELECT s.agent_id, s.tier, s.scheduled_for, s.wake_id, s.claimed_by, s.claimed_at, l.wake_id IS NULL AS rowless
  FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS p(agent_id, tier, since)
  JOIN wake_slots s ON s.agent_id = p.agent_id AND s.tier = p.tier AND s.scheduled_for > p.since
  LEFT JOIN wake_introspection_ledger l ON l.wake_id = s.wake_id

-- name: claimed_by_then
-- Which of those (agent, tier) pairs had a slot claimed at or before its look back.
SELECT p.agent_id, p.tier FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS p(agent_id, tier, since)
 WHERE EXISTS (SELECT 1 FROM wake_slots s WHERE s.agent_id = p.agent_id AND s.tier = p.tier AND s.scheduled_for <= p.since)
