-- name: record
-- One flush of a wake's transcript, in one statement inside the wake's fenced transaction: the
-- new bodies (each once), the new messages, the new calls, and the row's transcript root over
-- everything recorded so far. No row back: the wake's row is not open.
WITH contents AS (
    INSERT INTO manifest_contents (sha256, kind, body)
    SELECT * FROM unnest($2::text[], $3::text[], $4::text[])
    ON CONFLICT (sha256) DO NOTHING
), messages AS (
    INSERT INTO wake_transcript (wake_id, seq, turn, role, sha256, chars, cut)
    SELECT $1, * FROM unnest($5::int[], $6::int[], $7::text[], $8::text[], $9::int[], $10::bool[])
), calls AS (
    INSERT INTO wake_tool_calls (wake_id, seq, turn, call_id, tool, arguments_sha256, answer_seq, outcome, latency_ms)
    SELECT $1, * FROM unnest($11::int[], $12::int[], $13::text[], $14::text[], $15::text[], $16::int[], $17::text[], $18::float8[])
)
UPDATE wake_introspection_ledger SET transcript_root = $19
 WHERE wake_id = $1 AND status = 'started'
RETURNING wake_id

-- name: messages
-- A wake's conversation in order, with each message's stored body (NULL: the body is missing).
SELECT t.seq, t.turn, t.role, t.sha256, t.chars, t.cut, c.kind, c.body
  FROM wake_transcript t LEFT JOIN manifest_contents c ON c.sha256 = t.sha256
 WHERE t.wake_id = $1
 ORDER BY t.seq

-- name: calls
-- A wake's tool calls in order, with the arguments' stored body.
SELECT k.seq, k.turn, k.call_id, k.tool, k.arguments_sha256, k.answer_seq, k.outcome, k.latency_ms, c.kind, c.body
  FROM wake_tool_calls k LEFT JOIN manifest_contents c ON c.sha256 = k.arguments_sha256
 WHERE k.wake_id = $1
 ORDER BY k.seq
