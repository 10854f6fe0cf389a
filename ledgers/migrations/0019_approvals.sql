-- Approvals for unattended actions (docs/approvals.md): a call of a tool that requires approval
-- is not run in the wake whose model made it. It is recorded here, `pending`, with the wake, the
-- tool, its arguments, the hash of the declaration the wake bound and the reason the model gave;
-- an operator decides it once (`wake approvals approve|reject ID --by NAME`); an approved call is
-- claimed by the agent's next wake that can run it (one conditional UPDATE under that wake's fence:
-- `running`), checked against that wake's binding, and run or not (`ran`, `not_run`). A call left
-- `running` by a wake that ended before its result was recorded is `interrupted` by the next
-- holder of a newer fence and never run again. Every column has a reader
-- (tests/integration/test_column_readers.py).
CREATE TABLE tool_approvals (
    id            bigserial   PRIMARY KEY,
    agent_id      text        NOT NULL,
    wake_id       uuid        NOT NULL,   -- the wake whose model asked
    tier          text        NOT NULL,   -- its tier: the next wake of this tier reports a tool no longer bound
    turn          integer     NOT NULL CHECK (turn >= 1),
    call_id       text        NOT NULL,   -- the id the model gave the call (wake_tool_calls.call_id)
    tool          text        NOT NULL,
    tool_hash     text        NOT NULL,   -- SHA-256 of the declaration the asking wake bound (manifest.tool_hash)
    arguments     jsonb       NOT NULL,
    reason        text        NOT NULL,
    reason_from   text        NOT NULL CHECK (reason_from IN ('arguments', 'assistant', 'none')),
    requested_at  timestamptz NOT NULL,
    state         text        NOT NULL DEFAULT 'pending'
                  CHECK (state IN ('pending', 'approved', 'rejected', 'running', 'ran', 'not_run', 'interrupted')),
    decided_by    text,
    decided_at    timestamptz,
    why           text,                   -- the operator's reason for a decision (optional)
    run_wake_id   uuid,                   -- the wake that claimed it
    run_fence     bigint,
    claimed_at    timestamptz,
    outcome       text        CHECK (outcome IS NULL OR outcome IN ('ok', 'error')),
    result        text,                   -- the tool's answer (clipped), or why it was not run
    finished_at   timestamptz,
    CHECK ((state = 'pending') = (decided_by IS NULL)),
    CHECK ((decided_by IS NULL) = (decided_at IS NULL)),
    CHECK ((state IN ('running', 'ran', 'not_run', 'interrupted')) = (run_wake_id IS NOT NULL AND claimed_at IS NOT NULL)),
    CHECK ((state = 'ran') = (outcome IS NOT NULL))
);

CREATE INDEX tool_approvals_open ON tool_approvals (agent_id, state) WHERE state IN ('pending', 'approved', 'running');
-- the same call asked again while one waits is the one that waits
CREATE UNIQUE INDEX tool_approvals_pending_call ON tool_approvals (agent_id, tool, md5(arguments::text)) WHERE state = 'pending';

-- A call answered "queued for approval" is recorded in the transcript with its own outcome.
ALTER TABLE wake_tool_calls
    DROP CONSTRAINT wake_tool_calls_outcome_check,
    ADD CONSTRAINT wake_tool_calls_outcome_check CHECK (outcome IN ('ok', 'error', 'refused', 'not_run', 'queued'));
