-- name: human_messages
-- The agent's newest messages from humans: what a memory write is checked against for text
-- copied from a human (`memory.provenance`).
SELECT message_id, body FROM human_contact WHERE agent_id = $1 ORDER BY received_at DESC LIMIT $2
