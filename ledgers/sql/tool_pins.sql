-- name: pins_of
-- The pins of these servers' tools.
SELECT server, tool, name, hash, declaration, pinned_at, pinned_by FROM mcp_tool_pins
 WHERE server = ANY($1::text[])
 ORDER BY server, tool

-- name: pin_first
-- The first declaration seen of a tool is pinned; a pin that exists is left alone.
INSERT INTO mcp_tool_pins (server, tool, name, hash, declaration, pinned_at, pinned_by)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, 'first seen')
ON CONFLICT (server, tool) DO NOTHING

-- name: raise_finding
-- A declaration that differs from its pin; once per (tool, declaration seen) while open.
INSERT INTO mcp_tool_findings (server, tool, name, policy, pinned_hash, seen_hash, pinned_declaration, seen_declaration, diff, raised_at)
VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb, $9, $10)
ON CONFLICT (server, tool, seen_hash) WHERE state = 'open' DO NOTHING
RETURNING id

-- name: open_findings
-- The open findings of these servers ($1 NULL: of every server).
SELECT id, server, tool, name, policy, pinned_hash, seen_hash, diff, raised_at FROM mcp_tool_findings
 WHERE state = 'open' AND ($1::text[] IS NULL OR server = ANY($1::text[]))
 ORDER BY raised_at, id

-- name: findings
-- `wake tools findings`: every finding, newest first.
SELECT id, server, tool, name, policy, pinned_hash, seen_hash, pinned_declaration, seen_declaration, diff, raised_at,
       state, accepted_by, accepted_at
  FROM mcp_tool_findings
 WHERE ($1::boolean OR state = 'open')
 ORDER BY raised_at DESC, id DESC
 LIMIT $2

-- name: accept
-- `wake tools accept`: the newest open finding of the tool is accepted, the pin moves to its
-- declaration, and the tool's other open findings are superseded; one statement.
WITH chosen AS (
    SELECT id, server, tool, name, seen_hash, seen_declaration FROM mcp_tool_findings
     WHERE state = 'open' AND server = $1 AND tool = $2
     ORDER BY raised_at DESC, id DESC
     LIMIT 1
), accepted AS (
    UPDATE mcp_tool_findings f SET state = 'accepted', accepted_by = $3, accepted_at = $4
      FROM chosen WHERE f.id = chosen.id
    RETURNING f.id, f.pinned_hash, f.seen_hash, f.diff
), repinned AS (
    UPDATE mcp_tool_pins p SET hash = chosen.seen_hash, declaration = chosen.seen_declaration, name = chosen.name,
           pinned_at = $4, pinned_by = $3
      FROM chosen WHERE p.server = chosen.server AND p.tool = chosen.tool
    RETURNING p.server
), superseded AS (
    UPDATE mcp_tool_findings f SET state = 'superseded'
      FROM chosen WHERE f.state = 'open' AND f.server = chosen.server AND f.tool = chosen.tool AND f.id <> chosen.id
    RETURNING f.id
)
SELECT a.id, a.pinned_hash, a.seen_hash, a.diff, (SELECT count(*) FROM repinned) AS repinned,
       (SELECT count(*) FROM superseded) AS superseded
  FROM accepted a
