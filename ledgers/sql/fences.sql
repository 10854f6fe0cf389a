-- name: newest
SELECT fence FROM agent_fences WHERE agent_id = $1

-- name: advance
-- Record a fence when its lease is taken; never moves backwards. Returns the newest fence.
INSERT INTO agent_fences AS f (agent_id, fence) VALUES ($1, $2)
ON CONFLICT (agent_id) DO UPDATE
   SET fence = GREATEST(f.fence, EXCLUDED.fence)
RETURNING fence

-- name: check
-- Inside a write transaction: lock the agent's fence row and return the newest fence, so that
-- an advance by a newer lease holder waits for this transaction to end.
SELECT fence FROM agent_fences WHERE agent_id = $1 FOR SHARE
