-- name: record
-- $1 may be NULL (a new id) or a fixed id (the demo seed); a fixed id recorded twice is kept once.
-- The message is sealed (`wake_seal`, migration 0022): a `saw` fact may cite only a sealed one.
WITH m AS (SELECT COALESCE($1::uuid, gen_random_uuid()) AS id)
INSERT INTO human_contact (message_id, agent_id, author, channel, body, received_at, seal)
SELECT m.id, $2, $3, $4, $5, $6, wake_seal(wake_message_text(m.id, $2::text, $3::text, $4::text, $5::text, $6::timestamptz))
  FROM m
ON CONFLICT (message_id) DO NOTHING
RETURNING message_id

-- name: get
-- `sealed`: the row is as `record` or the inbox wrote it (not forged nor changed since).
SELECT message_id, agent_id, author, channel, body, received_at,
       wake_sealed(wake_message_text(message_id, agent_id, author, channel, body, received_at), seal) AS sealed
  FROM human_contact
 WHERE message_id = $1 AND agent_id = $2

-- name: last_received
-- When the agent last heard from a human (the posture block); NULL: never.
SELECT max(received_at) FROM human_contact WHERE agent_id = $1

-- name: unsealed
-- `wake verify --chain`: messages without a valid seal (written outside `wake tell` and the inbox).
SELECT message_id, agent_id, author, channel, received_at FROM human_contact
 WHERE ($1::text IS NULL OR agent_id = $1)
   AND NOT wake_sealed(wake_message_text(message_id, agent_id, author, channel, body, received_at), seal)
 ORDER BY received_at, message_id
