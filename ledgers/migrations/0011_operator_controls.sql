-- Operator controls: a `missed` status (a slot found later than its tier's misfire_grace_s gets
-- one row and no wake), the `at` trigger (a one-shot wake an operator asked for), pauses,
-- one-shot wakes and the delivery outbox.
--
-- 0001's status, trigger and manifest CHECKs were created unnamed; they are found by their
-- definitions and replaced by named ones that also accept the new words.
DO $$
DECLARE
    c record;
BEGIN
    FOR c IN
        SELECT conname FROM pg_constraint
         WHERE conrelid = 'wake_introspection_ledger'::regclass AND contype = 'c'
           AND (pg_get_constraintdef(oid) LIKE 'CHECK ((status = ANY %'
                OR pg_get_constraintdef(oid) LIKE 'CHECK ((trigger = ANY %'
                OR pg_get_constraintdef(oid) LIKE 'CHECK (((manifest_root IS NOT NULL) OR %')
    LOOP
        EXECUTE format('ALTER TABLE wake_introspection_ledger DROP CONSTRAINT %I', c.conname);
    END LOOP;
END
$$;

ALTER TABLE wake_introspection_ledger
    ADD CONSTRAINT wake_introspection_status CHECK (
        status IN ('started', 'completed', 'quiet', 'failed', 'aborted', 'halted', 'abandoned', 'skipped', 'missed')),
    ADD CONSTRAINT wake_introspection_trigger CHECK (trigger IN ('schedule', 'manual', 'catch_up', 'escalation', 'at')),
    -- a missed slot never ran, so it has no manifest either
    ADD CONSTRAINT wake_introspection_manifest CHECK (manifest_root IS NOT NULL OR status IN ('failed', 'skipped', 'aborted', 'missed')),
    -- a one-shot is not a slot: its one row is guaranteed by its wake id, chosen when it was asked for
    ADD CONSTRAINT wake_introspection_at_no_slot CHECK (trigger <> 'at' OR scheduled_for IS NULL);

-- `wake pause`: an agent's tier (or `all` of its tiers) is paused until `until` (NULL: until
-- `wake resume`). Every replica reads it after each claim; a paused slot is recorded `skipped`.
CREATE TABLE wake_pauses (
    agent_id  text NOT NULL,
    tier      text NOT NULL CHECK (tier IN ('all', 'whisper', 'surface', 'full')),
    paused_by text NOT NULL CHECK (btrim(paused_by) <> ''),
    paused_at timestamptz NOT NULL,
    until     timestamptz CHECK (until > paused_at),
    reason    text,
    PRIMARY KEY (agent_id, tier)
);

-- `wake at`: one wake at a time. `wake_id` is the wake's id from the start, so the wake has at
-- most one ledger row; the replica whose conditional UPDATE sets `claimed_at` runs it.
CREATE TABLE wake_oneshots (
    wake_id      uuid PRIMARY KEY,
    agent_id     text NOT NULL,
    tier         text NOT NULL CHECK (tier IN ('whisper', 'surface', 'full')),
    fire_at      timestamptz NOT NULL,
    note         text,
    created_by   text NOT NULL CHECK (btrim(created_by) <> ''),
    created_at   timestamptz NOT NULL,
    claimed_by   text,
    claimed_at   timestamptz,
    cancelled_by text,
    cancelled_at timestamptz,
    CHECK ((claimed_by IS NULL) = (claimed_at IS NULL)),
    CHECK ((cancelled_by IS NULL) = (cancelled_at IS NULL)),
    CHECK (claimed_at IS NULL OR cancelled_at IS NULL)
);

CREATE INDEX wake_oneshots_pending ON wake_oneshots (fire_at) WHERE claimed_at IS NULL AND cancelled_at IS NULL;

-- The delivery outbox: one row per (wake, route), written in the transaction that settles the
-- wake, under its fence. The daemon's sender delivers each at least once (the wake id is the
-- receiver's idempotency key), retrying with backoff, and gives up (`dead`) after the route's
-- max_attempts. `locked_until` keeps two replicas from sending the same row at once.
CREATE TABLE wake_outbox (
    id              bigserial PRIMARY KEY,
    wake_id         uuid NOT NULL,
    route           text NOT NULL,
    agent_id        text NOT NULL,
    tier            text NOT NULL CHECK (tier IN ('whisper', 'surface', 'full')),
    payload         jsonb NOT NULL,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'dead')),
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    created_at      timestamptz NOT NULL,
    next_attempt_at timestamptz NOT NULL,
    locked_by       text,
    locked_until    timestamptz,
    last_error      text,
    sent_at         timestamptz,
    UNIQUE (wake_id, route),
    CHECK ((state = 'sent') = (sent_at IS NOT NULL))
);

CREATE INDEX wake_outbox_due ON wake_outbox (next_attempt_at) WHERE state = 'pending';
