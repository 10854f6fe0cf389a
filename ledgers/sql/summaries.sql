-- name: fold
-- Replace an aspect's text with its next version; returns the new version.
INSERT INTO living_summaries AS s (agent_id, aspect, version, content, folded_at)
VALUES ($1, $2, 1, $3, $4)
ON CONFLICT (agent_id, aspect) DO UPDATE
   SET version = s.version + 1, content = EXCLUDED.content, folded_at = EXCLUDED.folded_at
RETURNING version

-- name: trail_append
INSERT INTO living_summary_trail (agent_id, aspect, version, merged_deltas, folded_at)
VALUES ($1, $2, $3, $4::jsonb, $5)
RETURNING trail_id

-- name: current
-- Each aspect's text with the deltas its last fold merged ("what changed since the last fold").
SELECT s.aspect, s.version, s.content, s.folded_at,
       t.trail_id, t.merged_deltas, t.folded_at AS trail_folded_at
  FROM living_summaries s
  LEFT JOIN living_summary_trail t
    ON t.agent_id = s.agent_id AND t.aspect = s.aspect AND t.version = s.version
 WHERE s.agent_id = $1
 ORDER BY s.aspect
