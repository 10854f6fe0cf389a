-- The agent's git-backed memory and its Cloister canary (docs/memory.md). Every column has a
-- reader (tests/integration/test_column_readers.py).

-- One row per commit the memory tool made: the canary counts a commit as the tool's only when it
-- is here (a `Wake-Id` trailer can be forged; this row is written under the wake's fence, in the
-- transaction that made the commit). `wake_id`, `fence` and `tier` are NULL for an operator's
-- revert from the CLI, which no wake made; there is no foreign key to the wake ledger for that reason.
CREATE TABLE memory_writes (
    write_id     bigserial PRIMARY KEY,
    agent_id     text NOT NULL,
    wake_id      uuid,
    fence        bigint,
    tier         text,
    op           text NOT NULL CHECK (op IN ('write', 'append', 'revert')),
    commit_id    text NOT NULL CHECK (commit_id ~ '^[0-9a-f]{40}$'),
    path         text NOT NULL CHECK (length(path) > 0),
    bytes_before integer CHECK (bytes_before >= 0),      -- NULL: the file did not exist
    bytes_after  integer CHECK (bytes_after >= 0),       -- NULL: the commit removed it
    reason       text NOT NULL,
    author       text NOT NULL,
    at           timestamptz NOT NULL,
    UNIQUE (agent_id, commit_id),
    CHECK (op = 'revert' OR wake_id IS NOT NULL)
);

CREATE INDEX memory_writes_agent_recent ON memory_writes (agent_id, at DESC, write_id DESC);

-- What the canary found. `commit_id` NULL: the work tree (an uncommitted change). A finding raised
-- again with the same fingerprint (rule, path, commit, excerpt) is the same finding and is kept
-- once, whatever its state. LOG findings are recorded `logged`: nothing for a human to do.
CREATE TABLE cloister_findings (
    finding_id  bigserial PRIMARY KEY,
    agent_id    text NOT NULL,
    severity    text NOT NULL CHECK (severity IN ('HALT', 'WARN', 'LOG')),
    domain      text NOT NULL,
    path        text NOT NULL,
    commit_id   text CHECK (commit_id ~ '^[0-9a-f]{40}$'),
    excerpt     text NOT NULL,
    rule        text NOT NULL CHECK (length(rule) > 0),
    fingerprint text NOT NULL,
    state       text NOT NULL CHECK (state IN ('open', 'acknowledged', 'reverted', 'logged')),
    acked_by    text,
    note        text,
    at          timestamptz NOT NULL,
    acted_at    timestamptz,
    UNIQUE (agent_id, fingerprint),
    CHECK ((state IN ('acknowledged', 'reverted')) = (acted_at IS NOT NULL AND acked_by IS NOT NULL)),
    CHECK (state <> 'logged' OR severity = 'LOG')
);

-- The wake-start check (has_open_halt) and the cloister block read only the open findings.
CREATE INDEX cloister_findings_open ON cloister_findings (agent_id, severity) WHERE state = 'open';
CREATE INDEX cloister_findings_agent_recent ON cloister_findings (agent_id, at DESC, finding_id DESC);

-- The newest commit each agent's canary has audited: the next audit reads only what came after it.
CREATE TABLE cloister_audits (
    agent_id   text PRIMARY KEY,
    commit_id  text NOT NULL CHECK (commit_id ~ '^[0-9a-f]{40}$'),
    audited_at timestamptz NOT NULL,
    commits    integer NOT NULL CHECK (commits >= 0),   -- commits the audit read
    findings   integer NOT NULL CHECK (findings >= 0)   -- findings it raised (new or already known)
);
