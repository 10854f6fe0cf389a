-- name: claims_without_row
-- Slots of the given (agent, tier) pairs ($1, $2) claimed after $3 by a process on one host
-- (claimed_by LIKE $4, 'host:%') that have no row: their claimer died between the claim's commit
-- and the row (a surface wake waiting for a busy lease, say). Range scans of the slots' primary key.
SELECT s.agent_id, s.tier, s.scheduled_for, s.trigger, s.claimed_by, s.claimed_at, s.wake_id
  FROM unnest($1::text[], $2::text[]) AS c(agent_id, tier)
  JOIN wake_slots s ON s.agent_id = c.agent_id AND s.tier = c.tier AND s.scheduled_for > $3
 WHERE s.claimed_by LIKE $4
   AND NOT EXISTS (SELECT 1 FROM wake_introspection_ledger l WHERE l.wake_id = s.wake_id)
   AND NOT EXISTS (SELECT 1 FROM wake_introspection_ledger l
                    WHERE l.agent_id = s.agent_id AND l.tier = s.tier AND l.scheduled_for = s.scheduled_for)
 ORDER BY s.scheduled_for

-- name: lock_claim
-- The slot's claim, locked for this transaction: two daemons starting on one host record a dead
-- claimer's slot once (the second finds the first one's row after the lock).
SELECT wake_id FROM wake_slots WHERE agent_id = $1 AND tier = $2 AND scheduled_for = $3 FOR UPDATE

-- name: slot_has_row
SELECT EXISTS (SELECT 1 FROM wake_introspection_ledger
                WHERE wake_id = $4 OR (agent_id = $1 AND tier = $2 AND scheduled_for = $3))

-- name: oneshots_without_row
-- One-shots (`wake at`) claimed after $1 by a process on one host (claimed_by LIKE $2) that have no
-- row: their claimer died between the claim and the row, as for a slot.
SELECT o.agent_id, o.tier, NULL::timestamptz AS scheduled_for, 'at' AS trigger, o.claimed_by, o.claimed_at, o.wake_id
  FROM wake_oneshots o
 WHERE o.claimed_at > $1 AND o.claimed_by LIKE $2
   AND NOT EXISTS (SELECT 1 FROM wake_introspection_ledger l WHERE l.wake_id = o.wake_id)
 ORDER BY o.claimed_at

-- name: lock_oneshot
SELECT wake_id FROM wake_oneshots WHERE wake_id = $1 FOR UPDATE
