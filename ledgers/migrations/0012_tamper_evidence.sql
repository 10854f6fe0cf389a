-- The wake ledger made tamper-evident (docs/ledger.md); `missed` is 0011's. Every column has
-- a reader (tests/integration/test_column_readers.py).

-- Each block's text and each tool's canonical declaration, stored once under its SHA-256 and
-- shared by every wake that saw it: `wake verify` recomputes every hash of a row from here, and
-- `wake show --arrival` prints the arrival a past wake saw. Most blocks repeat from wake to wake,
-- so this grows with what changed, not with the number of wakes.
CREATE TABLE manifest_contents (
    sha256 text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    kind   text NOT NULL CHECK (kind IN ('block', 'tool')),
    body   text NOT NULL
);

-- A hash chain per agent over its settled rows: chain = sha256(previous chain || manifest root),
-- linked in the transaction that settles the row, numbered by `chain_seq` (1, 2, ...). Rewriting
-- any row breaks its link and every later one; `wake verify --chain` walks it.
ALTER TABLE wake_introspection_ledger
    ADD COLUMN chain_seq bigint CHECK (chain_seq > 0),
    ADD COLUMN chain text CHECK (chain ~ '^[0-9a-f]{64}$'),
    -- the block names in prompt order: the arrival `wake show --arrival` prints
    ADD COLUMN arrival_order text[] NOT NULL DEFAULT '{}',
    ADD CONSTRAINT wake_introspection_chain_linked CHECK ((chain IS NULL) = (chain_seq IS NULL));

CREATE UNIQUE INDEX wake_introspection_chain ON wake_introspection_ledger (agent_id, chain_seq) WHERE chain_seq IS NOT NULL;

-- The newest link of each agent's chain. Its row is locked by every link, so an agent's rows
-- are linked one at a time whichever process settles them.
CREATE TABLE agent_chain_heads (
    agent_id text PRIMARY KEY,
    seq      bigint NOT NULL CHECK (seq >= 0),
    chain    text NOT NULL CHECK (chain ~ '^[0-9a-f]{64}$')
);
