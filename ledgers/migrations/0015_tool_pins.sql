-- MCP tool pins: the first canonical declaration seen of each MCP server tool, and the findings a
-- different declaration raises (a rewritten description, a changed schema, a new server version).
-- A pin is process-wide (the registry is), keyed by the server's name and the tool's own name on
-- that server. A finding stays open until an operator accepts the new declaration (`wake tools
-- accept SERVER/TOOL --by NAME`), which moves the pin and records who, when and the diff.
CREATE TABLE mcp_tool_pins (
    server       text        NOT NULL,
    tool         text        NOT NULL,   -- the server's own name for it
    name         text        NOT NULL,   -- the namespaced name the model sees (server__tool)
    hash         text        NOT NULL,   -- SHA-256 of the canonical declaration
    declaration  jsonb       NOT NULL,
    pinned_at    timestamptz NOT NULL,
    pinned_by    text        NOT NULL,   -- 'first seen' or the operator who accepted it
    PRIMARY KEY (server, tool)
);

CREATE TABLE mcp_tool_findings (
    id               bigserial   PRIMARY KEY,
    server           text        NOT NULL,
    tool             text        NOT NULL,
    name             text        NOT NULL,
    policy           text        NOT NULL CHECK (policy IN ('strict', 'warn')),
    pinned_hash      text        NOT NULL,
    seen_hash        text        NOT NULL,
    pinned_declaration jsonb     NOT NULL,
    seen_declaration jsonb       NOT NULL,
    diff             text        NOT NULL,   -- a unified diff of the two canonical declarations
    raised_at        timestamptz NOT NULL,
    state            text        NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'accepted', 'superseded')),
    accepted_by      text,
    accepted_at      timestamptz,
    CHECK ((state = 'accepted') = (accepted_by IS NOT NULL AND accepted_at IS NOT NULL))
);

-- one open finding per tool and declaration seen
CREATE UNIQUE INDEX mcp_tool_findings_open ON mcp_tool_findings (server, tool, seen_hash) WHERE state = 'open';
