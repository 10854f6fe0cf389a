-- Eval scorecards (docs/replay.md, "wake eval"): each run of `wake eval` stores its scorecard,
-- one row per agent whose wakes it replayed (that agent's pairs scored on their own), so the
-- console can show an agent's latest scorecard and draw its chart from the row. Stored beside
-- the replays it scored, apart from the agent's ledgers; the operator's, as the replays are.
CREATE TABLE wake_replay_evals (
    eval_id      uuid             NOT NULL,   -- one run of `wake eval`
    agent_id     text             NOT NULL,
    wakes        integer          NOT NULL CHECK (wakes >= 1),
    threshold    double precision NOT NULL CHECK (threshold >= 0 AND threshold <= 1),
    candidate    jsonb            NOT NULL,   -- what was changed: route, instructions (sha256), config
    regressed    text[]           NOT NULL,   -- the checks that regressed beyond the threshold
    scorecard    jsonb            NOT NULL,   -- the scorecard as `wake eval --json` prints it, of this agent's wakes
    started_at   timestamptz      NOT NULL,
    finished_at  timestamptz      NOT NULL,
    PRIMARY KEY (eval_id, agent_id)
);

CREATE INDEX wake_replay_evals_of_agent ON wake_replay_evals (agent_id, finished_at DESC);
