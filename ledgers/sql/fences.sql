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

-- name: advance_seeing_started
-- Taking the lease in one statement: record the fence ($2, never backwards) and, when it is the
-- newest, say whether the agent has rows left `started` (their closing links each into the chain,
-- so it runs after, in its own fenced transaction, and only when there is something to close).
WITH f AS (
    INSERT INTO agent_fences AS f (agent_id, fence) VALUES ($1, $2)
    ON CONFLICT (agent_id) DO UPDATE
       SET fence = GREATEST(f.fence, EXCLUDED.fence)
    RETURNING fence
)
SELECT (SELECT fence FROM f) AS newest,
       (SELECT fence FROM f) = $2 AND EXISTS (
           SELECT 1 FROM wake_introspection_ledger WHERE agent_id = $1 AND status = 'started'
       ) AS left_started
