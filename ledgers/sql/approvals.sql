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

-- name: expire
-- Pending approvals asked $4 seconds or more before $3 are expired (migration 0028): a decision of
-- the harness ($5 names it), sealed as an operator's is, with $1 only that agent's and with $2
-- only that approval. Run before every decision, by `wake approvals` before it lists, and by each
-- wake before its claim; the expired ones are returned.
UPDATE tool_approvals SET state = 'expired', decided_by = $5, decided_at = $3,
       decision_seal = wake_seal(wake_decision_text(id, agent_id, tool, tool_hash, arguments, 'expired', $5, $3))
 WHERE state = 'pending' AND requested_at <= $3::timestamptz - make_interval(secs => $4::double precision)
   AND ($1::text IS NULL OR agent_id = $1) AND ($2::bigint IS NULL OR id = $2)
RETURNING *

-- name: decide
-- `wake approvals approve|reject` and the console: a decision is recorded once, on a pending
-- approval only, asked less than $7 seconds before it (an older one is expired, and `expire` has
-- marked it so in the same transaction), and with $6 only on that agent's.
-- The decision is sealed (`wake_seal`, migration 0022): the claim runs only a sealed approval.
UPDATE tool_approvals SET state = $2, decided_by = $3, decided_at = $4, why = $5,
       decision_seal = wake_seal(wake_decision_text(id, agent_id, tool, tool_hash, arguments, $2, $3, $4))
 WHERE id = $1 AND state = 'pending' AND ($6::text IS NULL OR agent_id = $6)
   AND requested_at > $4::timestamptz - make_interval(secs => $7::double precision)
RETURNING *

-- name: one
SELECT * FROM tool_approvals WHERE id = $1

-- name: listed
-- `wake approvals`: the open ones (pending, approved, running) and those expired at or after $4
-- (the ones its own `expire` just marked), or, with $2, every one; newest first.
SELECT * FROM tool_approvals
 WHERE ($1::text IS NULL OR agent_id = $1)
   AND ($2::boolean OR state IN ('pending', 'approved', 'running') OR (state = 'expired' AND decided_at >= $4::timestamptz))
 ORDER BY requested_at DESC, id DESC
 LIMIT $3

-- name: unsealed
-- `wake verify --chain`: decided approvals whose decision has no valid seal (written outside
-- `wake approvals`, nor expired by the harness), with $1 only that agent's.
SELECT id, agent_id, tool, state, decided_by FROM tool_approvals
 WHERE decided_by IS NOT NULL AND ($1::text IS NULL OR agent_id = $1)
   AND NOT wake_sealed(wake_decision_text(id, agent_id, tool, tool_hash, arguments,
                                          CASE WHEN state IN ('rejected', 'expired') THEN state ELSE 'approved' END, decided_by, decided_at),
                       decision_seal)
 ORDER BY id

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
RETURNING *, (SELECT count(*) FROM interrupted) AS interrupted,
          wake_sealed(wake_decision_text(id, agent_id, tool, tool_hash, arguments, 'approved', decided_by, decided_at), decision_seal) AS sealed

-- name: finish
-- What the claimed call did: ran (ok or error, with its answer) or was not run (why).
UPDATE tool_approvals SET state = $3, outcome = $4, result = $5, finished_at = $6
 WHERE id = $1 AND run_wake_id = $2 AND state = 'running'
RETURNING id

-- name: for_arrival
-- The `approvals` block: what waits (pending, approved, running elsewhere), what this wake ran or
-- did not run, and what was rejected, expired or interrupted since the agent's previous wake ($3).
SELECT * FROM tool_approvals
 WHERE agent_id = $1
   AND (state IN ('pending', 'approved', 'running') OR run_wake_id = $2
        OR (state IN ('rejected', 'expired') AND decided_at >= $3) OR (state = 'interrupted' AND finished_at >= $3))
 ORDER BY id
