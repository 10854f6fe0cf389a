-- The epistemic ledgers a wake reads and writes (issue 5; seed 000 sections 3 and 4):
-- the raw messages facts cite, facts with provenance passports, commitments, the settled state,
-- living summaries and their fold trail, and the daybook. Every column has a reader
-- (tests/integration/test_column_readers.py).

-- Raw messages from humans, verbatim. A `saw` fact cites one (facts.source_ref) and is attested
-- only against its body.
CREATE TABLE human_contact (
    message_id  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    agent_id    text NOT NULL,
    author      text NOT NULL,
    channel     text NOT NULL,                 -- where it came in: 'chat', 'email', 'cli', ...
    body        text NOT NULL,
    received_at timestamptz NOT NULL
);

CREATE INDEX human_contact_agent_recent ON human_contact (agent_id, received_at DESC);

-- Facts with provenance passports. `origin` is stamped at write time and never changes:
-- did = the agent's own action or lookup, saw = told by a human or observed from outside.
CREATE TABLE facts (
    fact_id       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    agent_id      text NOT NULL,
    category      text NOT NULL DEFAULT 'general',
    fact_key      text NOT NULL CHECK (length(fact_key) > 0),
    fact_value    text NOT NULL CHECK (length(fact_value) > 0),
    origin        text NOT NULL CHECK (origin IN ('did', 'saw')),
    status        text NOT NULL DEFAULT 'active'
                  CHECK (status IN ('active', 'overridden', 'superseded', 'expired', 'unverified', 'refuted')),
    -- the message that attests the value; set only when the value passed attestation against it
    attested_ref  uuid REFERENCES human_contact (message_id),
    -- the message the fact cites (required for `saw`)
    source_ref    uuid REFERENCES human_contact (message_id),
    supersedes_id uuid REFERENCES facts (fact_id),
    -- typed anchors for verify-on-read: [{"type": "file"|"message"|"wake"|"url", "ref": "..."}]
    anchors       jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(anchors) = 'array'),
    wake_id       uuid REFERENCES wake_introspection_ledger (wake_id),
    recorded_at   timestamptz NOT NULL,
    superseded_at timestamptz,
    CHECK (origin <> 'saw' OR source_ref IS NOT NULL),
    CHECK (attested_ref IS NULL OR attested_ref = source_ref),
    -- quarantine at the schema level: an active `saw` fact is always an attested one
    CHECK (origin <> 'saw' OR status <> 'active' OR attested_ref IS NOT NULL),
    CHECK ((status = 'superseded') = (superseded_at IS NOT NULL))
);

-- One active fact per key: a new value supersedes the old one, it does not sit beside it.
CREATE UNIQUE INDEX facts_one_active_key ON facts (agent_id, fact_key) WHERE status = 'active';
CREATE INDEX facts_agent_recent ON facts (agent_id, recorded_at DESC);
CREATE INDEX facts_agent_active_recent ON facts (agent_id, recorded_at DESC) WHERE status = 'active';
CREATE INDEX facts_supersedes ON facts (supersedes_id) WHERE supersedes_id IS NOT NULL;

-- Open commitments: the settled-facts block shows the three newest with the exact total.
CREATE TABLE commitments (
    commitment_id bigserial PRIMARY KEY,
    agent_id      text NOT NULL,
    title         text NOT NULL CHECK (length(title) > 0),
    due_on        date,                        -- a calendar day: formatted in SQL, never shifted
    status        text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'done', 'dropped')),
    outcome       text,
    wake_id       uuid REFERENCES wake_introspection_ledger (wake_id),
    created_at    timestamptz NOT NULL,
    completed_at  timestamptz,
    CHECK ((status = 'open') = (completed_at IS NULL))
);

CREATE INDEX commitments_agent_open ON commitments (agent_id, created_at DESC) WHERE status = 'open';

-- The default settled-state table: the latest row is the first line of the settled-facts block
-- (an operator may point `agents.<id>.settled_state_source` at their own table instead).
CREATE TABLE settled_state (
    state_id   bigserial PRIMARY KEY,
    agent_id   text NOT NULL,
    subject    text NOT NULL,
    state      text NOT NULL,
    state_on   date NOT NULL,                  -- the day the state is about
    settled_at timestamptz NOT NULL
);

CREATE INDEX settled_state_agent_recent ON settled_state (agent_id, state_on DESC, settled_at DESC);

-- Living summaries: the current text of each aspect, and one trail row per fold with what the
-- fold merged. The summaries block reads the newest trail row ("what changed since the last fold").
CREATE TABLE living_summaries (
    agent_id  text NOT NULL,
    aspect    text NOT NULL CHECK (aspect IN ('life_lately', 'presence')),
    version   integer NOT NULL CHECK (version > 0),
    content   text NOT NULL,
    folded_at timestamptz NOT NULL,
    PRIMARY KEY (agent_id, aspect)
);

CREATE TABLE living_summary_trail (
    trail_id      bigserial PRIMARY KEY,
    agent_id      text NOT NULL,
    aspect        text NOT NULL CHECK (aspect IN ('life_lately', 'presence')),
    version       integer NOT NULL CHECK (version > 0),
    merged_deltas jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(merged_deltas) = 'array'),
    folded_at     timestamptz NOT NULL,
    UNIQUE (agent_id, aspect, version)
);

-- The daybook: what a wake wrote at its end (the model loop appends the final assistant text).
CREATE TABLE daybook (
    entry_id   bigserial PRIMARY KEY,
    agent_id   text NOT NULL,
    wake_id    uuid REFERENCES wake_introspection_ledger (wake_id),
    entry      text NOT NULL CHECK (length(entry) > 0),
    written_at timestamptz NOT NULL
);

CREATE INDEX daybook_agent_recent ON daybook (agent_id, written_at DESC);
