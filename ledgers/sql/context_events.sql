-- name: record_turn
INSERT INTO wake_turns (wake_id, turn, agent_id, prompt_tokens, context_window, pressure, counted, max_tokens, at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (wake_id, turn) DO NOTHING

-- name: turns
SELECT wake_id, turn, agent_id, prompt_tokens, context_window, pressure, counted, max_tokens, at
  FROM wake_turns WHERE wake_id = $1 ORDER BY turn

-- name: last_wake_peak
-- The agent's newest wake with turns: its id, peak pressure and turn count.
SELECT wake_id, max(pressure) AS peak, count(*) AS turns, max(at) AS at
  FROM wake_turns WHERE agent_id = $1
 GROUP BY wake_id ORDER BY max(at) DESC LIMIT 1

-- name: archive
INSERT INTO conversation_archive (wake_id, segment, agent_id, strategy, messages, archived_at)
VALUES ($1, $2, $3, $4, $5::jsonb, $6)

-- name: archived
SELECT wake_id, segment, agent_id, strategy, messages, archived_at
  FROM conversation_archive WHERE wake_id = $1 AND segment = $2 AND agent_id = $3

-- name: record
INSERT INTO context_events (agent_id, wake_id, turn, kind, strategy, pressure_before, pressure_after, reason, detail, at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10)
RETURNING event_id

-- name: recent
SELECT event_id, agent_id, wake_id, turn, kind, strategy, pressure_before, pressure_after, reason, detail, at
  FROM context_events WHERE agent_id = $1 AND at >= $2 ORDER BY at DESC, event_id DESC LIMIT $3

-- name: settings
-- The agent's own settings: the newest value of each key it set.
SELECT DISTINCT ON (detail->>'key') detail->>'key' AS key, detail->'value' AS value
  FROM context_events WHERE agent_id = $1 AND kind = 'config_set'
 ORDER BY detail->>'key', at DESC, event_id DESC

-- name: raise_peak
UPDATE wake_introspection_ledger SET peak_pressure = GREATEST(COALESCE(peak_pressure, 0), $2) WHERE wake_id = $1

-- name: peak
SELECT peak_pressure FROM wake_introspection_ledger WHERE wake_id = $1
