-- Incidents (docs/incidents.md): failed, aborted, abandoned and missed rows of one agent's tier
-- with one error signature (the error text with ids, numbers, paths and hex normalised away) are
-- one incident. It opens at its first row (one notice queued to the tier's routes), counts the
-- later ones, and a completed or quiet row of the tier closes it (one recovery notice). At most
-- one incident per (agent, tier, signature) is open; `wake incidents ack ID --by` acknowledges it.
CREATE TABLE wake_incidents (
    id              bigserial   PRIMARY KEY,
    agent_id        text        NOT NULL,
    tier            text        NOT NULL CHECK (tier IN ('whisper', 'surface', 'full')),
    signature       text        NOT NULL,
    sample_error    text        NOT NULL,   -- the first row's error (clipped)
    first_wake_id   uuid        NOT NULL,
    last_wake_id    uuid        NOT NULL,
    rows_seen       integer     NOT NULL DEFAULT 1 CHECK (rows_seen >= 1),
    opened_at       timestamptz NOT NULL,
    last_seen_at    timestamptz NOT NULL,
    closed_at       timestamptz,
    closed_by_wake  uuid,
    acked_by        text,
    acked_at        timestamptz,
    CHECK ((closed_at IS NULL) = (closed_by_wake IS NULL)),
    CHECK ((acked_by IS NULL) = (acked_at IS NULL))
);

CREATE UNIQUE INDEX wake_incidents_one_open ON wake_incidents (agent_id, tier, signature) WHERE closed_at IS NULL;
CREATE INDEX wake_incidents_recent ON wake_incidents (opened_at DESC);
