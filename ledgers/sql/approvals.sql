-- name: queue
-- A call of a tool that requires approval, recorded pending; the same call (tool and arguments)
-- asked again while one waits returns nothing here (`pending_call` finds the one that waits).
INSERT INTO tool_approvals (agent_id, wake_id, tier, turn, call_id, tool, tool_hash, arguments, reason, reason_from, requested_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10, $11)
ON CONFLICT (agent_id, tool, md5(arguments::text)) WHERE state = 'pending' DO NOTHING
RETURNING id

-- name: pending_call
-- The approval that waits for this very call.
SELECT id, wake_id, requested_at FROM tool_approvals
 WHERE agent_id = $1 AND tool = $2 AND md5(arguments::text) = md5($3::jsonb::text) AND state = 'pending'

-- name: decide
-- `wake approvals approve|reject`: a decision is recorded once, on a pending approval only.
UPDATE tool_approvals SET state = $2, decided_by = $3, decided_at = $4, why = $5
 WHERE id = $1 AND state = 'pending'
RETURNING *

-- name: one
SELECT * FROM tool_approvals WHERE id = $1

-- name: listed
-- `wake approvals`: the open ones (pending, approved, running) or, with $2, every one; newest first.
SELECT * FROM tool_approvals
 WHERE ($1::text IS NULL OR agent_id = $1) AND ($2::boolean OR state IN ('pending', 'approved', 'running'))
 ORDER BY requested_at DESC, id DESC
 LIMIT $3

-- name: claim
-- A wake claims the agent's approved calls it can run (their tool is in its binding, or they were
-- asked at its tier: there it reports a tool no longer bound), under its fence, once: a second
-- claimant finds the state changed. Calls a wake of an older fence left running are interrupted.
WITH interrupted AS (
    UPDATE tool_approvals SET state = 'interrupted', finished_at = $5,
           result = 'the wake that claimed it ended before its result was recorded; it may or may not have run, and is not run again'
     WHERE agent_id = $1 AND state = 'running' AND run_fence < $4
    RETURNING id
)
UPDATE tool_approvals SET state = 'running', run_wake_id = $2, run_fence = $4, claimed_at = $5
 WHERE agent_id = $1 AND state = 'approved' AND (tool = ANY($6::text[]) OR tier = $3)
RETURNING *, (SELECT count(*) FROM interrupted) AS interrupted

-- name: finish
-- What the claimed call did: ran (ok or error, with its answer) or was not run (why).
UPDATE tool_approvals SET state = $3, outcome = $4, result = $5, finished_at = $6
 WHERE id = $1 AND run_wake_id = $2 AND state = 'running'
RETURNING id

-- name: for_arrival
-- The `approvals` block: what waits (pending, approved, running elsewhere), what this wake ran or
-- did not run, and what was rejected or interrupted since the agent's previous wake ($3).
SELECT * FROM tool_approvals
 WHERE agent_id = $1
   AND (state IN ('pending', 'approved', 'running') OR run_wake_id = $2
        OR (state = 'rejected' AND decided_at >= $3) OR (state = 'interrupted' AND finished_at >= $3))
 ORDER BY id
