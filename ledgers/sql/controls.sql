-- name: pause
-- `wake pause`: a new pause replaces the agent's pause of the same scope.
INSERT INTO wake_pauses (agent_id, tier, paused_by, paused_at, until, reason)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (agent_id, tier) DO UPDATE
   SET paused_by = EXCLUDED.paused_by, paused_at = EXCLUDED.paused_at, until = EXCLUDED.until, reason = EXCLUDED.reason
RETURNING agent_id, tier

-- name: resume
-- `wake resume`: the agent's pause of one scope, or ($2 NULL) every pause of the agent.
DELETE FROM wake_pauses WHERE agent_id = $1 AND ($2::text IS NULL OR tier = $2)
RETURNING agent_id, tier, paused_by, paused_at, until, reason

-- name: pause_for
-- The pause that holds (agent, tier) back at $3: the tier's own, else the agent-wide one.
SELECT agent_id, tier, paused_by, paused_at, until, reason FROM wake_pauses
 WHERE agent_id = $1 AND tier IN ($2, 'all') AND (until IS NULL OR until > $3)
 ORDER BY tier = 'all'
 LIMIT 1

-- name: active_pauses
SELECT agent_id, tier, paused_by, paused_at, until, reason FROM wake_pauses
 WHERE until IS NULL OR until > $1
 ORDER BY agent_id, tier

-- name: add_oneshot
INSERT INTO wake_oneshots (wake_id, agent_id, tier, fire_at, note, created_by, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING wake_id

-- name: claim_oneshot
-- The one claim of a one-shot: only the replica whose UPDATE finds it unclaimed and not
-- cancelled runs it (the same rule as a slot's INSERT ... ON CONFLICT DO NOTHING).
UPDATE wake_oneshots SET claimed_by = $2, claimed_at = $3
 WHERE wake_id = $1 AND claimed_at IS NULL AND cancelled_at IS NULL
RETURNING wake_id

-- name: due_oneshots
SELECT * FROM wake_oneshots
 WHERE claimed_at IS NULL AND cancelled_at IS NULL AND fire_at <= $1
 ORDER BY fire_at
 LIMIT $2

-- name: cancel_oneshot
UPDATE wake_oneshots SET cancelled_by = $2, cancelled_at = $3
 WHERE wake_id = $1 AND claimed_at IS NULL AND cancelled_at IS NULL
RETURNING wake_id

-- name: oneshot
SELECT * FROM wake_oneshots WHERE wake_id = $1

-- name: oneshots
-- `wake at --list`: pending ones first (soonest first), then the newest claimed or cancelled.
SELECT o.*, l.status
  FROM wake_oneshots o
  LEFT JOIN wake_introspection_ledger l ON l.wake_id = o.wake_id
 WHERE ($1::bool OR (o.claimed_at IS NULL AND o.cancelled_at IS NULL))
 ORDER BY (o.claimed_at IS NULL AND o.cancelled_at IS NULL) DESC, o.fire_at DESC
 LIMIT $2

-- name: find_oneshot_by_prefix
SELECT wake_id FROM wake_oneshots WHERE wake_id::text LIKE $1 || '%' ORDER BY created_at DESC LIMIT 2
