-- name: enqueue
-- In the settle transaction, under the wake's fence: one row per (wake, route), whatever retries.
INSERT INTO wake_outbox (wake_id, route, agent_id, tier, payload, created_at, next_attempt_at)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, $6)
ON CONFLICT (wake_id, route) DO NOTHING
RETURNING id

-- name: take_due
-- Lock up to $4 due rows for this sender until $2; rows another sender holds are passed over.
UPDATE wake_outbox o
   SET locked_by = $3, locked_until = $2
  FROM (SELECT id FROM wake_outbox
         WHERE state = 'pending' AND next_attempt_at <= $1 AND (locked_until IS NULL OR locked_until <= $1)
         ORDER BY next_attempt_at, id
         LIMIT $4
           FOR UPDATE SKIP LOCKED) AS due
 WHERE o.id = due.id
RETURNING o.id, o.wake_id, o.route, o.agent_id, o.tier, o.payload, o.attempts, o.created_at

-- name: attempt
-- Count one attempt before it is made (a crash mid-send still counts it) and hold the row until $3.
UPDATE wake_outbox SET attempts = attempts + 1, locked_until = $3
 WHERE id = $1 AND locked_by = $2 AND state = 'pending'
RETURNING attempts

-- name: failed_attempt
UPDATE wake_outbox SET last_error = $3 WHERE id = $1 AND locked_by = $2 AND state = 'pending'
RETURNING id

-- name: sent
UPDATE wake_outbox SET state = 'sent', sent_at = $2, locked_by = NULL, locked_until = NULL
 WHERE id = $1 AND state = 'pending'
RETURNING id

-- name: dead
UPDATE wake_outbox SET state = 'dead', last_error = $2, locked_by = NULL, locked_until = NULL
 WHERE id = $1 AND state = 'pending'
RETURNING id

-- name: retry
-- `wake outbox --retry ID`: a dead (or pending) row is due again at $2 with its attempts reset.
UPDATE wake_outbox SET state = 'pending', attempts = 0, next_attempt_at = $2, locked_by = NULL, locked_until = NULL
 WHERE id = $1 AND state <> 'sent'
RETURNING id

-- name: get
SELECT * FROM wake_outbox WHERE id = $1

-- name: listing
-- `wake outbox`: what is not delivered yet (pending, dead), or ($1) only the dead.
SELECT id, wake_id, route, agent_id, tier, payload, state, attempts, created_at, next_attempt_at,
       locked_by, locked_until, last_error, sent_at
  FROM wake_outbox
 WHERE state <> 'sent' AND (NOT $1::bool OR state = 'dead')
 ORDER BY id DESC
 LIMIT $2

-- name: of_wake
SELECT id, route, state, attempts, last_error, sent_at FROM wake_outbox WHERE wake_id = $1 ORDER BY id

-- name: backlog
SELECT count(*) FROM wake_outbox WHERE state = 'pending'
