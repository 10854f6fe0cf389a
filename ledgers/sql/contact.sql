-- name: record
-- $1 may be NULL (a new id) or a fixed id (the demo seed); a fixed id recorded twice is kept once.
INSERT INTO human_contact (message_id, agent_id, author, channel, body, received_at)
VALUES (COALESCE($1, gen_random_uuid()), $2, $3, $4, $5, $6)
ON CONFLICT (message_id) DO NOTHING
RETURNING message_id

-- name: get
SELECT message_id, agent_id, author, channel, body, received_at
  FROM human_contact
 WHERE message_id = $1 AND agent_id = $2

-- name: last_received
-- When the agent last heard from a human (the posture block); NULL: never.
SELECT max(received_at) FROM human_contact WHERE agent_id = $1
