-- Replays (docs/replay.md): a recorded wake's first request rebuilt from the ledger and its model
-- loop run again against a candidate (a route, instructions, a tier's config). Stored apart from
-- the agent's ledgers: a replay writes no row of wake_introspection_ledger, wake_transcript,
-- wake_tool_calls, manifest_contents, last_actions, memory or outbox; it has its own row, its
-- own manifest (the hashes of the blocks and tools it sent), its own transcript and its own
-- content store, so removing every replay leaves the agent's record as it was.

CREATE TABLE wake_replay_contents (
    sha256 text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    kind   text NOT NULL CHECK (kind IN ('block', 'tool', 'message', 'arguments', 'instructions')),
    body   text NOT NULL
);

CREATE TABLE wake_replays (
    replay_id          uuid PRIMARY KEY,
    wake_id            uuid NOT NULL REFERENCES wake_introspection_ledger (wake_id),  -- the wake replayed
    agent_id           text NOT NULL,
    tier               text NOT NULL,
    route              text NOT NULL,                -- the route the replay called
    model              text NOT NULL,
    candidate          jsonb NOT NULL,               -- what was changed: route, instructions (sha256), config (path, hash)
    live_readonly      boolean NOT NULL,             -- tools declared not to mutate could run against the live stores
    request_sha256     text NOT NULL CHECK (request_sha256 ~ '^[0-9a-f]{64}$'),  -- the first request body as sent
    request_matches    boolean,                      -- its messages hash as the recorded arrival's (NULL: nothing recorded to compare)
    manifest           jsonb NOT NULL,               -- {"blocks": {name: sha256}, "tools": {name: sha256}}
    manifest_root      text NOT NULL CHECK (manifest_root ~ '^[0-9a-f]{64}$'),
    transcript_root    text CHECK (transcript_root ~ '^[0-9a-f]{64}$'),
    status             text NOT NULL CHECK (status IN ('completed', 'failed')),
    stop_reason        text,
    note               text,
    error              text,
    final_text         text,
    prompt_tokens      integer NOT NULL CHECK (prompt_tokens >= 0),
    completion_tokens  integer NOT NULL CHECK (completion_tokens >= 0),
    cached_tokens      integer NOT NULL CHECK (cached_tokens >= 0),
    cost_usd           numeric(14, 8) NOT NULL CHECK (cost_usd >= 0),
    turns              integer NOT NULL CHECK (turns >= 0),
    tool_calls         integer NOT NULL CHECK (tool_calls >= 0),
    refusals           integer NOT NULL CHECK (refusals >= 0),
    out_of_recording   integer NOT NULL CHECK (out_of_recording >= 0),  -- calls the recording could not answer (never run)
    live_calls         integer NOT NULL CHECK (live_calls >= 0),        -- read-only calls run live (--live-readonly)
    report             jsonb NOT NULL,               -- the comparison with the recorded wake (first divergence, diff, totals)
    duration_ms        double precision NOT NULL CHECK (duration_ms >= 0),
    started_at         timestamptz NOT NULL,
    finished_at        timestamptz NOT NULL
);

CREATE INDEX wake_replays_of_wake ON wake_replays (wake_id, started_at DESC);
CREATE INDEX wake_replays_recent ON wake_replays (started_at DESC);

CREATE TABLE wake_replay_transcript (
    replay_id uuid NOT NULL REFERENCES wake_replays (replay_id) ON DELETE CASCADE,
    seq       integer NOT NULL CHECK (seq >= 0),
    turn      integer NOT NULL CHECK (turn >= 0),
    role      text NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    sha256    text NOT NULL REFERENCES wake_replay_contents (sha256),
    chars     integer NOT NULL CHECK (chars >= 0),
    cut       boolean NOT NULL,
    PRIMARY KEY (replay_id, seq)
);

CREATE TABLE wake_replay_tool_calls (
    replay_id        uuid NOT NULL,
    seq              integer NOT NULL CHECK (seq >= 0),
    turn             integer NOT NULL CHECK (turn >= 1),
    call_id          text NOT NULL,
    tool             text NOT NULL,
    arguments_sha256 text NOT NULL REFERENCES wake_replay_contents (sha256),
    answer_seq       integer NOT NULL,
    outcome          text NOT NULL CHECK (outcome IN ('ok', 'error', 'refused', 'not_run', 'queued')),
    -- recorded: answered with the recorded answer (same tool, same arguments at that point);
    -- out_of_recording: not in the recording, never run; live: a read-only tool run live
    -- (--live-readonly); checked: refused or rejected by the loop's own checks before any answer was needed
    answered_from    text NOT NULL CHECK (answered_from IN ('recorded', 'out_of_recording', 'live', 'checked')),
    mutates          boolean NOT NULL,
    latency_ms       double precision NOT NULL CHECK (latency_ms >= 0),
    PRIMARY KEY (replay_id, seq),
    FOREIGN KEY (replay_id, answer_seq) REFERENCES wake_replay_transcript (replay_id, seq) ON DELETE CASCADE
);
