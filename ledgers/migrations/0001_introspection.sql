-- One row per wake attempt: what the wake saw (blocks), what it held (tools), how it ended.
CREATE TABLE wake_introspection_ledger (
    wake_id             uuid PRIMARY KEY,
    agent_id            text NOT NULL,
    tier                text NOT NULL CHECK (tier IN ('whisper', 'surface', 'full')),
    trigger             text NOT NULL CHECK (trigger IN ('schedule', 'manual', 'catch_up', 'escalation')),
    scheduled_for       timestamptz,
    status              text NOT NULL DEFAULT 'started' CHECK (
                            status IN ('started', 'completed', 'quiet', 'failed', 'aborted', 'halted',
                                       'abandoned', 'skipped')),
    started_at          timestamptz NOT NULL DEFAULT now(),
    finished_at         timestamptz,
    -- NULL only for an attempt that ended before its manifest existed (failed, skipped, aborted)
    manifest_root       text CHECK (manifest_root ~ '^[0-9a-f]{64}$'),
    -- {block name: {hash, cache_tier, retrieval, result, reason, latency_ms, rows}}
    blocks              jsonb NOT NULL DEFAULT '{}',
    active_tools_count  integer NOT NULL DEFAULT 0 CHECK (active_tools_count >= 0),
    active_tool_names   text[] NOT NULL DEFAULT '{}',
    -- {tool name: sha256 of its canonical declaration}
    tool_hashes         jsonb NOT NULL DEFAULT '{}',
    registry_tool_count integer NOT NULL DEFAULT 0 CHECK (registry_tool_count >= active_tools_count),
    fence               bigint,
    host                text NOT NULL,
    pid                 integer NOT NULL,
    version             text NOT NULL,
    config_hash         text NOT NULL,
    diff                jsonb,
    note                text,
    error               text,
    CHECK (array_length(active_tool_names, 1) IS NOT DISTINCT FROM NULLIF(active_tools_count, 0)),
    CHECK ((status = 'started') = (finished_at IS NULL)),
    CHECK (manifest_root IS NOT NULL OR status IN ('failed', 'skipped', 'aborted')),
    CHECK (trigger <> 'manual' OR scheduled_for IS NULL),
    CHECK (trigger NOT IN ('schedule', 'catch_up') OR scheduled_for IS NOT NULL)
);

-- A scheduled slot is claimed once across every replica and every restart.
CREATE UNIQUE INDEX wake_introspection_slot
    ON wake_introspection_ledger (agent_id, tier, scheduled_for)
    WHERE scheduled_for IS NOT NULL;

CREATE INDEX wake_introspection_agent_recent
    ON wake_introspection_ledger (agent_id, started_at DESC);
