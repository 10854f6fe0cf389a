-- Toxic flows (wake/witness/flows.py): a tier whose binding holds untrusted input, private data
-- and egress. A finding per (agent, tier, flow) while open; accepted by an operator, with who.
CREATE TABLE tool_flow_findings (
    id           bigserial PRIMARY KEY,
    agent_id     text NOT NULL,
    tier         text NOT NULL,
    flow_id      text NOT NULL,
    untrusted    text[] NOT NULL,
    private      text[] NOT NULL,
    egress       text[] NOT NULL,
    policy       text NOT NULL CHECK (policy IN ('refuse', 'warn')),
    raised_at    timestamptz NOT NULL,
    state        text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'accepted')),
    accepted_by  text,
    accepted_at  timestamptz,
    CHECK ((state = 'accepted') = (accepted_by IS NOT NULL AND accepted_at IS NOT NULL))
);
CREATE UNIQUE INDEX tool_flow_findings_one_open ON tool_flow_findings (agent_id, tier, flow_id) WHERE state = 'open';
CREATE UNIQUE INDEX tool_flow_findings_one_accepted ON tool_flow_findings (agent_id, tier, flow_id) WHERE state = 'accepted';

-- The flow each tier's last wake held (none: flow_id NULL), so the binding diff can say when a
-- change created or removed one.
CREATE TABLE tool_flow_state (
    agent_id   text NOT NULL,
    tier       text NOT NULL,
    flow_id    text,
    untrusted  text[] NOT NULL DEFAULT '{}',
    private    text[] NOT NULL DEFAULT '{}',
    egress     text[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (agent_id, tier)
);

-- Anchored chain heads (ledgers/anchors.py): an RFC 3161 timestamp token over an agent's chain
-- head at one link, from an outside timestamp authority.
CREATE TABLE chain_anchors (
    id           bigserial PRIMARY KEY,
    agent_id     text NOT NULL,
    chain_seq    integer NOT NULL,
    chain        text NOT NULL,
    tsa_url      text NOT NULL,
    token        bytea NOT NULL,
    gen_time     timestamptz NOT NULL,
    anchored_at  timestamptz NOT NULL,
    UNIQUE (agent_id, chain_seq)
);
