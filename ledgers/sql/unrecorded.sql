-- name: unrecorded_oneshots
-- One-shots claimed ($1: no later than this) that have no ledger row yet: held back or running
-- ones get theirs in moments; one whose claimer died never will (`wake.run.orphans`).
SELECT o.wake_id, o.agent_id, o.tier, o.claimed_by, o.claimed_at
  FROM wake_oneshots o
 WHERE o.claimed_at IS NOT NULL AND o.claimed_at <= $1
   AND NOT EXISTS (SELECT 1 FROM wake_introspection_ledger l WHERE l.wake_id = o.wake_id)
 ORDER BY o.claimed_at

-- name: lock_claim
-- The one-shot's claim, locked for the replica that records its row: a second replica waits here,
-- then finds the row written (`has_row`, a statement of its own so it sees that commit).
SELECT wake_id FROM wake_oneshots WHERE wake_id = $1 AND claimed_by = $2 FOR UPDATE

-- name: has_row
SELECT EXISTS (SELECT 1 FROM wake_introspection_ledger WHERE wake_id = $1)
