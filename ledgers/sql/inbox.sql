-- name: record
-- One message from the inbox, verbatim; nothing when the agent already has one with this key.
INSERT INTO human_contact (agent_id, author, channel, body, received_at, idempotency_key)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (agent_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING message_id

-- name: by_key
SELECT message_id, received_at FROM human_contact WHERE agent_id = $1 AND idempotency_key = $2

-- name: lock_agent
-- Serializes the inbox's wake decisions for one agent across replicas, for this transaction.
SELECT pg_advisory_xact_lock(hashtext('wake-inbox:' || $1))

-- name: last_inbox_wake
-- When the inbox last asked for a wake of this agent ($2: the one-shots' created_by).
SELECT max(created_at) FROM wake_oneshots WHERE agent_id = $1 AND created_by = $2
