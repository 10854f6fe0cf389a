-- name: insert
INSERT INTO wake_introspection_ledger (
    wake_id, agent_id, tier, trigger, scheduled_for, status, started_at, finished_at,
    manifest_root, blocks, active_tools_count, active_tool_names, tool_hashes,
    registry_tool_count, fence, host, pid, version, config_hash, diff, note, error, escalation_cause, arrival_order, trace_id
) VALUES (
    $1, $2, $3, $4, $5, $6, $7, CASE WHEN $6 = 'started' THEN NULL ELSE now() END,
    $8, $9::jsonb, $10, $11, $12::jsonb, $13, $14, $15, $16, $17, $18, $19::jsonb, $20, $21, $22, $23, $24
)

-- name: record_thinking
-- Steps 8-9 on a started row: the route, usage totals, the loop's counts and how it stopped.
UPDATE wake_introspection_ledger
   SET model = $2, prompt_tokens = $3, completion_tokens = $4, cached_tokens = $5, cost_usd = $6,
       turns = $7, tool_calls = $8, refusals = $9, stop_reason = $10
 WHERE wake_id = $1 AND status = 'started'
RETURNING wake_id

-- name: record_final_text
UPDATE wake_introspection_ledger SET final_text = $2 WHERE wake_id = $1 RETURNING wake_id

-- name: record_unchecked_claims
-- How many absence claims of the final text spoke about blocks that could not be checked.
UPDATE wake_introspection_ledger SET unchecked_absence_claims = $2 WHERE wake_id = $1 RETURNING wake_id

-- name: get
SELECT * FROM wake_introspection_ledger WHERE wake_id = $1

-- name: find_by_prefix
-- Wakes whose id lies in [$1, $2], the range an id prefix spans (ledgers.ids), newest first, with
-- the exact number that match; with $4, only that agent's (another agent's wake is not there to match).
SELECT wake_id, count(*) OVER () AS total
  FROM wake_introspection_ledger
 WHERE wake_id BETWEEN $1 AND $2 AND ($4::text IS NULL OR agent_id = $4)
 ORDER BY started_at DESC
 LIMIT $3

-- name: previous_settled_both
-- The wakes a new one is compared with, in one row (a part of `ledgers.queries.together`: a wake
-- reads it beside its other ledgers' rows): the agent's newest settled wake started before $3
-- and its tier's ($2), each a row of `Compared`'s fields in order (NULL: none), and, for the
-- recent-wakes block, the agent's $4 newest of any status, newest first, each a row of
-- `RecentLine`'s fields in order ($4 = 0 reads none). Every whisper reads it, so it reads the
-- columns the comparison and the block use, and no more: not a full wake's final text, nor a
-- stored diff.
SELECT (SELECT ROW(wake_id, tier, status, started_at, manifest_root, blocks, tool_hashes)
          FROM wake_introspection_ledger
         WHERE agent_id = $1 AND started_at < $3 AND status NOT IN ('started', 'skipped') AND manifest_root IS NOT NULL
         ORDER BY started_at DESC LIMIT 1) AS previous_of_agent,
       (SELECT ROW(wake_id, tier, status, started_at, manifest_root, blocks, tool_hashes)
          FROM wake_introspection_ledger
         WHERE agent_id = $1 AND tier = $2 AND started_at < $3 AND status NOT IN ('started', 'skipped') AND manifest_root IS NOT NULL
         ORDER BY started_at DESC LIMIT 1) AS previous_of_tier,
       ARRAY(SELECT ROW(wake_id, tier, trigger, status, started_at, active_tools_count, stop_reason, note, error)
               FROM wake_introspection_ledger
              WHERE agent_id = $1
              ORDER BY started_at DESC LIMIT $4) AS recent_wakes

-- name: insert_settled_fenced
-- A wake that calls no model (halted, pre-checked, gated, or harness-only) is recorded already
-- settled, with its totals ($25-$33; $24 the trace id), in one statement, written only while $14 is the agent's
-- newest fence (NULL: unfenced); the fence row is locked FOR SHARE, so a newer holder's advance waits.
INSERT INTO wake_introspection_ledger (
    wake_id, agent_id, tier, trigger, scheduled_for, status, started_at, finished_at,
    manifest_root, blocks, active_tools_count, active_tool_names, tool_hashes,
    registry_tool_count, fence, host, pid, version, config_hash, diff, note, error, escalation_cause, arrival_order,
    model, prompt_tokens, completion_tokens, cached_tokens, cost_usd, turns, tool_calls, refusals, stop_reason, trace_id
)
SELECT $1, $2, $3, $4, $5, $6, $7, now(),
       $8, $9::jsonb, $10, $11, $12::jsonb, $13, $14, $15, $16, $17, $18, $19::jsonb, $20, $21, $22, $23,
       $25, $26, $27, $28, $29, $30, $31, $32, $33, $24
 WHERE $14::bigint IS NULL
    OR EXISTS (SELECT 1 FROM agent_fences WHERE agent_id = $2 AND fence = $14 FOR SHARE)
RETURNING wake_id

-- name: insert_settled_linked
-- `insert_settled_fenced`, its contents ($34-$36: sha256, kind, body) and its chain link in one
-- statement, so a wake that calls no model is recorded in one round trip and one commit. The
-- agent's chain head is locked FOR UPDATE (links of one agent stay one at a time) and the link is
-- `introspection.chain_of` in SQL: sha256(previous link || root) as hex. Nothing is written when
-- the fence is stale (`fenced` 0) or the agent has no head yet (`heads` 0: the caller links
-- the slow way, which creates it). `incidents_open`: whether the tier had an open incident as the
-- row was written (read, not changed: `wake.run.incident_policy` closes them, a round trip it
-- spares a quiet whisper when there are none).
WITH head AS (
    SELECT seq, chain FROM agent_chain_heads WHERE agent_id = $2 FOR UPDATE
), fenced AS (
    SELECT 1 AS ok WHERE $14::bigint IS NULL
        OR EXISTS (SELECT 1 FROM agent_fences WHERE agent_id = $2 AND fence = $14 FOR SHARE)
), link AS (
    SELECT h.seq + 1 AS seq, encode(sha256(convert_to(h.chain || coalesce($8::text, ''), 'UTF8')), 'hex') AS chain
      FROM head AS h, fenced
), inserted AS (
    INSERT INTO wake_introspection_ledger (
        wake_id, agent_id, tier, trigger, scheduled_for, status, started_at, finished_at,
        manifest_root, blocks, active_tools_count, active_tool_names, tool_hashes,
        registry_tool_count, fence, host, pid, version, config_hash, diff, note, error, escalation_cause, arrival_order,
        model, prompt_tokens, completion_tokens, cached_tokens, cost_usd, turns, tool_calls, refusals, stop_reason, trace_id,
        chain_seq, chain
    )
    SELECT $1, $2, $3, $4, $5, $6, $7, now(),
           $8, $9::jsonb, $10, $11, $12::jsonb, $13, $14, $15, $16, $17, $18, $19::jsonb, $20, $21, $22, $23,
           $25, $26, $27, $28, $29, $30, $31, $32, $33, $24,
           l.seq, l.chain
      FROM link AS l
    RETURNING chain_seq, chain
), moved AS (
    UPDATE agent_chain_heads AS h SET seq = i.chain_seq, chain = i.chain
      FROM inserted AS i
     WHERE h.agent_id = $2
    RETURNING h.seq
), stored AS (
    INSERT INTO manifest_contents (sha256, kind, body)
    SELECT c.sha256, c.kind, c.body FROM unnest($34::text[], $35::text[], $36::text[]) AS c (sha256, kind, body)
     WHERE EXISTS (SELECT 1 FROM inserted)
    ON CONFLICT (sha256) DO NOTHING
)
SELECT (SELECT count(*) FROM head) AS heads, (SELECT count(*) FROM fenced) AS fenced,
       (SELECT chain FROM inserted) AS chain, (SELECT count(*) FROM moved) AS moved,
       EXISTS (SELECT 1 FROM wake_incidents WHERE agent_id = $2 AND tier = $3 AND closed_at IS NULL) AS incidents_open

-- name: settle_fenced
-- Step 10 in one statement: close a started row, with the loop's totals when $4 is true, only
-- while $3 is the agent's newest fence (NULL: unfenced). No row back: not open, or stale.
UPDATE wake_introspection_ledger AS w
   SET status = $5, finished_at = now(), note = COALESCE($6, w.note), error = $7,
       model = CASE WHEN $4 THEN $8 ELSE w.model END,
       prompt_tokens = CASE WHEN $4 THEN $9 ELSE w.prompt_tokens END,
       completion_tokens = CASE WHEN $4 THEN $10 ELSE w.completion_tokens END,
       cached_tokens = CASE WHEN $4 THEN $11 ELSE w.cached_tokens END,
       cost_usd = CASE WHEN $4 THEN $12 ELSE w.cost_usd END,
       turns = CASE WHEN $4 THEN $13 ELSE w.turns END,
       tool_calls = CASE WHEN $4 THEN $14 ELSE w.tool_calls END,
       refusals = CASE WHEN $4 THEN $15 ELSE w.refusals END,
       stop_reason = CASE WHEN $4 THEN $16 ELSE w.stop_reason END
 WHERE w.wake_id = $1 AND w.agent_id = $2 AND w.status = 'started'
   AND ($3::bigint IS NULL OR EXISTS (SELECT 1 FROM agent_fences WHERE agent_id = $2 AND fence = $3 FOR SHARE))
RETURNING w.wake_id

-- name: recent
-- The newest wakes, newest first: `introspection.recent` puts `AND column = $n` in place of the
-- mark for each filter given (agent, tier, status, trigger; `queries.filtered`), so each
-- combination plans with its index: the agent's (agent_id, started_at DESC), its tier's
-- (agent_id, tier, started_at DESC), or with no agent (started_at DESC) (migration 0029).
SELECT wake_id, agent_id, tier, trigger, scheduled_for, status, started_at, finished_at,
       manifest_root, active_tools_count, registry_tool_count, note, error,
       model, prompt_tokens, completion_tokens, cached_tokens, cost_usd, turns, tool_calls, refusals,
       stop_reason, final_text, escalation_cause
  FROM wake_introspection_ledger
 WHERE true /* filters */
 ORDER BY started_at DESC
 LIMIT $1

-- name: last_two
-- `wake diff`'s default pair: the agent's last two settled wakes of tier $2 (NULL: the tier of
-- its newest one), or ($3) of any tier. A whisper beside a surface wake differs by design.
WITH settled AS (
    SELECT wake_id, tier, started_at FROM wake_introspection_ledger
     WHERE agent_id = $1 AND manifest_root IS NOT NULL AND status <> 'started'
)
SELECT wake_id FROM settled
 WHERE $3::bool OR tier = coalesce($2::text, (SELECT tier FROM settled ORDER BY started_at DESC LIMIT 1))
 ORDER BY started_at DESC
 LIMIT 2

-- name: running
-- The agent's wake in progress (its newest row still `started`): whom a busy slot names.
SELECT wake_id, tier, trigger, started_at, host, pid FROM wake_introspection_ledger
 WHERE agent_id = $1 AND status = 'started'
 ORDER BY started_at DESC
 LIMIT 1

-- name: abandon_started
-- Close the agent's rows left `started` by a holder whose lease is gone (run under the new
-- holder's fence, so only the lease holder ever does it).
UPDATE wake_introspection_ledger
   SET status = 'abandoned', finished_at = now(), error = $2
 WHERE agent_id = $1 AND status = 'started'
RETURNING wake_id, tier, host, pid, fence

-- name: agents_with_started
SELECT DISTINCT agent_id FROM wake_introspection_ledger WHERE status = 'started'

-- name: store_contents
-- Each block text and tool declaration once, under its SHA-256; a repeat costs nothing.
INSERT INTO manifest_contents (sha256, kind, body)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
ON CONFLICT (sha256) DO NOTHING

-- name: contents
SELECT sha256, kind, body FROM manifest_contents WHERE sha256 = ANY($1::text[])

-- name: arrival_order
SELECT arrival_order, blocks FROM wake_introspection_ledger WHERE wake_id = $1

-- name: chain_head_lock
-- The agent's newest link, locked until the caller's transaction ends (created at seq 0), and
-- the manifest and transcript roots of row $3 when it is settled and not yet linked (`linkable`).
INSERT INTO agent_chain_heads (agent_id, seq, chain) VALUES ($1, 0, $2)
ON CONFLICT (agent_id) DO UPDATE SET agent_id = EXCLUDED.agent_id
RETURNING seq, chain,
          (SELECT manifest_root FROM wake_introspection_ledger WHERE wake_id = $3 AND chain IS NULL AND status <> 'started') AS manifest_root,
          (SELECT transcript_root FROM wake_introspection_ledger WHERE wake_id = $3 AND chain IS NULL AND status <> 'started') AS transcript_root,
          EXISTS (SELECT 1 FROM wake_introspection_ledger WHERE wake_id = $3 AND chain IS NULL AND status <> 'started') AS linkable

-- name: chain_link
-- The row takes link $3 at number $2, and the agent's head ($4) moves to it, in one statement.
WITH linked AS (
    UPDATE wake_introspection_ledger SET chain_seq = $2, chain = $3
     WHERE wake_id = $1 AND chain IS NULL AND status <> 'started'
    RETURNING wake_id
)
UPDATE agent_chain_heads SET seq = $2, chain = $3
 WHERE agent_id = $4 AND EXISTS (SELECT 1 FROM linked)
RETURNING seq

-- name: chain_head
SELECT seq, chain FROM agent_chain_heads WHERE agent_id = $1

-- name: chain_rows
-- An agent's linked rows in link order (`wake verify --chain`).
SELECT wake_id, chain_seq, chain, manifest_root, transcript_root, status, started_at FROM wake_introspection_ledger
 WHERE agent_id = $1 AND chain_seq IS NOT NULL
 ORDER BY chain_seq

-- name: chain_agents
SELECT agent_id FROM agent_chain_heads ORDER BY agent_id

-- name: last_settled
-- The dead-man check's read (docs/incidents.md): for each (agent $1[i], tier $2[i]) the newest row
-- of a wake that ran (status in $3: `ledgers.vocab.RAN`; a skipped or missed slot did not run, so
-- it is no sign of life), and the newest slot held back by a pause since (`skipped: paused: …`: a
-- paused tier is silent on purpose), each by the (agent_id, started_at DESC) index and bounded by
-- the first.
SELECT a.agent_id, a.tier, l.wake_id, l.status, l.started_at, l.finished_at, p.started_at AS paused_at
  FROM unnest($1::text[], $2::text[]) AS a(agent_id, tier)
  LEFT JOIN LATERAL (
      SELECT wake_id, status, started_at, finished_at FROM wake_introspection_ledger w
       WHERE w.agent_id = a.agent_id AND w.tier = a.tier AND w.status = ANY($3::text[])
       ORDER BY w.started_at DESC
       LIMIT 1
  ) l ON true
  LEFT JOIN LATERAL (
      SELECT started_at FROM wake_introspection_ledger w
       WHERE w.agent_id = a.agent_id AND w.tier = a.tier AND w.status = 'skipped' AND w.note LIKE 'skipped: paused:%'
         AND w.started_at > coalesce(l.started_at, '-infinity'::timestamptz)
       ORDER BY w.started_at DESC
       LIMIT 1
  ) p ON true
