-- Context pressure (docs/context.md). `wake_turns`: the pressure before every model call of a wake.
-- `conversation_archive`: the messages a compaction removed, retrievable as archive:<wake>-seg-<n>.
-- `context_events`: the audit of every pressure event (narrowing, reminder, choice point,
-- compaction, decline, automatic compaction, threshold change), with pressure before and after.
CREATE TABLE wake_turns (
    wake_id        uuid NOT NULL,
    turn           integer NOT NULL CHECK (turn >= 1),
    agent_id       text NOT NULL,
    prompt_tokens  integer NOT NULL CHECK (prompt_tokens >= 0),
    context_window integer NOT NULL CHECK (context_window >= 1),
    pressure       double precision NOT NULL,
    counted        text NOT NULL CHECK (counted IN ('server', 'usage', 'estimate')),
    max_tokens     integer NOT NULL,
    at             timestamptz NOT NULL,
    PRIMARY KEY (wake_id, turn)
);
CREATE INDEX wake_turns_agent ON wake_turns (agent_id, at DESC);

CREATE TABLE conversation_archive (
    wake_id     uuid NOT NULL,
    segment     integer NOT NULL CHECK (segment >= 1),
    agent_id    text NOT NULL,
    strategy    text NOT NULL,
    messages    jsonb NOT NULL,
    archived_at timestamptz NOT NULL,
    PRIMARY KEY (wake_id, segment)
);

CREATE TABLE context_events (
    event_id        bigserial PRIMARY KEY,
    agent_id        text NOT NULL,
    wake_id         uuid,
    turn            integer,
    kind            text NOT NULL CHECK (kind IN (
                        'narrowed', 'reminded', 'choice', 'compacted', 'declined', 'deferred', 'auto_compacted', 'config_set')),
    strategy        text,
    pressure_before double precision,
    pressure_after  double precision,
    reason          text NOT NULL,
    detail          jsonb NOT NULL DEFAULT '{}'::jsonb,
    at              timestamptz NOT NULL
);
CREATE INDEX context_events_agent ON context_events (agent_id, at DESC);

-- The peak pressure of a wake, on its row (the highest `wake_turns.pressure`, kept as the turns go).
ALTER TABLE wake_introspection_ledger ADD COLUMN peak_pressure double precision;
