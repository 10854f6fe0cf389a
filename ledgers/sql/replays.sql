-- name: store_contents
-- The replay's bodies (blocks, tools, messages, arguments), each once under its SHA-256.
INSERT INTO wake_replay_contents (sha256, kind, body)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
ON CONFLICT (sha256) DO NOTHING

-- name: insert
INSERT INTO wake_replays (
    replay_id, wake_id, agent_id, tier, route, model, candidate, live_readonly, request_sha256, request_matches, manifest,
    manifest_root, transcript_root, status, stop_reason, note, error, final_text, prompt_tokens, completion_tokens, cached_tokens,
    cost_usd, turns, tool_calls, refusals, out_of_recording, live_calls, report, duration_ms, started_at, finished_at
) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11::jsonb, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24,
          $25, $26, $27, $28::jsonb, $29, $30, $31)

-- name: insert_messages
INSERT INTO wake_replay_transcript (replay_id, seq, turn, role, sha256, chars, cut)
SELECT $1, * FROM unnest($2::int[], $3::int[], $4::text[], $5::text[], $6::int[], $7::bool[])

-- name: insert_calls
INSERT INTO wake_replay_tool_calls (replay_id, seq, turn, call_id, tool, arguments_sha256, answer_seq, outcome, answered_from, mutates, latency_ms)
SELECT $1, * FROM unnest($2::int[], $3::int[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[], $9::text[], $10::bool[], $11::float8[])

-- name: get
SELECT replay_id, wake_id, agent_id, tier, route, model, candidate, live_readonly, request_sha256, request_matches, manifest,
       manifest_root, transcript_root, status, stop_reason, note, error, final_text, prompt_tokens, completion_tokens, cached_tokens,
       cost_usd, turns, tool_calls, refusals, out_of_recording, live_calls, report, duration_ms, started_at, finished_at
  FROM wake_replays WHERE replay_id = $1

-- name: recent
-- The newest replays (of one wake when $1 is set, of one agent when $3 is), newest first.
SELECT replay_id, wake_id, agent_id, tier, route, model, candidate, live_readonly, request_sha256, request_matches, manifest,
       manifest_root, transcript_root, status, stop_reason, note, error, final_text, prompt_tokens, completion_tokens, cached_tokens,
       cost_usd, turns, tool_calls, refusals, out_of_recording, live_calls, report, duration_ms, started_at, finished_at
  FROM wake_replays WHERE ($1::uuid IS NULL OR wake_id = $1) AND ($3::text IS NULL OR agent_id = $3)
 ORDER BY started_at DESC, replay_id
 LIMIT $2

-- name: find_by_prefix
-- Replays whose id lies in [$1, $2], the range an id prefix spans (ledgers.ids), newest first, with
-- the exact number that match; with $4, only that agent's.
SELECT replay_id, count(*) OVER () AS total
  FROM wake_replays
 WHERE replay_id BETWEEN $1 AND $2 AND ($4::text IS NULL OR agent_id = $4)
 ORDER BY started_at DESC, replay_id
 LIMIT $3

-- name: messages
SELECT t.seq, t.turn, t.role, t.sha256, t.chars, t.cut, c.kind, c.body
  FROM wake_replay_transcript t LEFT JOIN wake_replay_contents c ON c.sha256 = t.sha256
 WHERE t.replay_id = $1
 ORDER BY t.seq

-- name: calls
SELECT k.seq, k.turn, k.call_id, k.tool, k.arguments_sha256, k.answer_seq, k.outcome, k.answered_from, k.mutates, k.latency_ms,
       c.kind, c.body
  FROM wake_replay_tool_calls k LEFT JOIN wake_replay_contents c ON c.sha256 = k.arguments_sha256
 WHERE k.replay_id = $1
 ORDER BY k.seq

-- name: selectable
-- Settled wakes that called a model (a replay runs their loop again), oldest first: of the
-- agent, tier, status given (NULL: any), started at or after $4.
SELECT wake_id, started_at FROM wake_introspection_ledger
 WHERE status <> 'started' AND model IS NOT NULL
   AND ($1::text IS NULL OR agent_id = $1) AND ($2::text IS NULL OR tier = $2) AND ($3::text IS NULL OR status = $3)
   AND ($4::timestamptz IS NULL OR started_at >= $4)
 ORDER BY started_at, wake_id
 LIMIT $5

-- name: manifest_bodies
-- The bodies a replay's manifest names (its blocks' and tools' texts), by hash.
SELECT sha256, kind, body FROM wake_replay_contents WHERE sha256 = ANY($1::text[])

-- name: insert_eval
INSERT INTO wake_replay_evals (eval_id, agent_id, wakes, threshold, candidate, regressed, scorecard, started_at, finished_at)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7::jsonb, $8, $9)

-- name: evals_of_agent
-- An agent's stored scorecards, newest first.
SELECT eval_id, agent_id, wakes, threshold, candidate, regressed, scorecard, started_at, finished_at
  FROM wake_replay_evals WHERE agent_id = $1
 ORDER BY finished_at DESC, eval_id
 LIMIT $2

-- name: eval_of_agent
SELECT eval_id, agent_id, wakes, threshold, candidate, regressed, scorecard, started_at, finished_at
  FROM wake_replay_evals WHERE eval_id = $1 AND agent_id = $2
