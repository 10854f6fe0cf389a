-- The witness of the hands (docs/ledger.md, "The transcript"): every message a wake's model was
-- sent or answered, in the order it entered the conversation, and every tool call the model made,
-- with its arguments, its answer, its latency and its outcome. The bodies live in
-- manifest_contents under their SHA-256, stored once (kinds 'message': a message as canonical
-- JSON; 'arguments': a call's arguments as the model sent them), each cut at
-- think.transcript_max_chars with a marker that states the cap (the arrival's messages whole) and
-- redacted by the rules of the logs. Every column has a reader (tests/integration/test_column_readers.py).

ALTER TABLE manifest_contents
    DROP CONSTRAINT manifest_contents_kind_check,
    ADD CONSTRAINT manifest_contents_kind_check CHECK (kind IN ('block', 'tool', 'message', 'arguments'));

CREATE TABLE wake_transcript (
    wake_id uuid NOT NULL REFERENCES wake_introspection_ledger (wake_id),
    seq     integer NOT NULL CHECK (seq >= 0),          -- its place in the conversation, from 0
    turn    integer NOT NULL CHECK (turn >= 0),         -- the model turn after which it entered (0: the arrival)
    role    text NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    sha256  text NOT NULL REFERENCES manifest_contents (sha256),
    chars   integer NOT NULL CHECK (chars >= 0),        -- its text's length before the cap
    cut     boolean NOT NULL,                           -- the stored text was cut at the cap
    PRIMARY KEY (wake_id, seq)
);

CREATE TABLE wake_tool_calls (
    wake_id          uuid NOT NULL,
    seq              integer NOT NULL CHECK (seq >= 0), -- its place among the wake's calls, from 0
    turn             integer NOT NULL CHECK (turn >= 1),
    call_id          text NOT NULL,                     -- the id the model gave the call
    tool             text NOT NULL,
    arguments_sha256 text NOT NULL REFERENCES manifest_contents (sha256),
    answer_seq       integer NOT NULL,                  -- the transcript message that answered it
    -- ok: the handler ran and answered; error: it was tried and failed (bad arguments, the
    -- breaker, a timeout, an exception); refused: not in the binding; not_run: the wake was ending
    -- or its tool-call budget was spent
    outcome          text NOT NULL CHECK (outcome IN ('ok', 'error', 'refused', 'not_run')),
    latency_ms       double precision NOT NULL CHECK (latency_ms >= 0),
    PRIMARY KEY (wake_id, seq),
    FOREIGN KEY (wake_id, answer_seq) REFERENCES wake_transcript (wake_id, seq)
);

-- SHA-256 over the transcript's records (ledgers.transcripts.root_of); a settled row's chain link
-- covers it: chain = sha256(previous || manifest_root || transcript_root).
ALTER TABLE wake_introspection_ledger
    ADD COLUMN transcript_root text CHECK (transcript_root ~ '^[0-9a-f]{64}$');
