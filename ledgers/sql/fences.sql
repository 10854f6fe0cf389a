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

-- name: advance_abandoning
-- Taking the lease in one statement: record the fence ($2, never backwards) and, when it is the
-- newest, close the agent's rows left `started` as `abandoned` ($3 the reason). One row for the
-- fence (wake_id NULL) when nothing was closed; else one row per closed wake.
WITH f AS (
    INSERT INTO agent_fences AS f (agent_id, fence) VALUES ($1, $2)
    ON CONFLICT (agent_id) DO UPDATE
       SET fence = GREATEST(f.fence, EXCLUDED.fence)
    RETURNING fence
), closed AS (
    UPDATE wake_introspection_ledger
       SET status = 'abandoned', finished_at = now(), error = $3
     WHERE agent_id = $1 AND status = 'started' AND (SELECT fence FROM f) = $2
    RETURNING wake_id, tier, host, pid, fence
)
SELECT (SELECT fence FROM f) AS newest, closed.wake_id, closed.tier, closed.host, closed.pid, closed.fence
  FROM (SELECT 1) AS one LEFT JOIN closed ON true
