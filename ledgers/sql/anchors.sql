-- name: record
-- One anchor of an agent's chain head; an anchor of a link already anchored is kept as it was.
INSERT INTO chain_anchors (agent_id, chain_seq, chain, tsa_url, token, gen_time, anchored_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (agent_id, chain_seq) DO NOTHING
RETURNING id

-- name: of_agent
-- Every anchor of an agent, by link.
SELECT id, agent_id, chain_seq, chain, tsa_url, token, gen_time, anchored_at FROM chain_anchors
 WHERE agent_id = $1
 ORDER BY chain_seq

-- name: newest
-- When anything was last anchored (the daemon's schedule).
SELECT max(anchored_at) FROM chain_anchors
