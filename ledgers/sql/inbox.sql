-- name: record
-- One message from the inbox, verbatim; nothing when the agent already has one with this key.
-- Sealed as `contact.record` seals a message (migration 0022).
WITH m AS (SELECT gen_random_uuid() AS id)
INSERT INTO human_contact (message_id, agent_id, author, channel, body, received_at, idempotency_key, seal)
SELECT m.id, $1, $2, $3, $4, $5, $6, wake_seal(wake_message_text(m.id, $1::text, $2::text, $3::text, $4::text, $5::timestamptz))
  FROM m
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
