-- name: totals
-- `wake costs`: what the settled wakes since $3 cost, grouped by $5 (`day`: the local date of the
-- wake's start in its agent's zone, $1/$2 pairing each agent with its zone; `tier`; `agent`),
-- only agent $4 when it is not NULL. Every row counts, the quiet ones too (an ok_token answer
-- spent its tokens); `outcomes` is each status's count. `gated`, `prechecked` and `capped` are
-- the wakes that ended before any model call (the whisper gate, a pre-check's exit 1, a spent
-- daily cap); `ok_token` the quiet wakes whose answer was the tier's ok_token.
WITH zones AS (
    SELECT * FROM unnest($1::text[], $2::text[]) AS z(agent_id, zone)
), rows AS (
    SELECT CASE $5::text
               WHEN 'day' THEN to_char(l.started_at AT TIME ZONE coalesce(z.zone, 'UTC'), 'YYYY-MM-DD')
               WHEN 'tier' THEN l.tier
               ELSE l.agent_id
           END AS key,
           l.status, l.stop_reason, l.prompt_tokens, l.cached_tokens, l.completion_tokens, l.cost_usd, l.turns
      FROM wake_introspection_ledger l
      LEFT JOIN zones z ON z.agent_id = l.agent_id
     WHERE l.started_at >= $3 AND ($4::text IS NULL OR l.agent_id = $4)
), by_status AS (
    SELECT key, status, count(*) AS n,
           sum(prompt_tokens) AS prompt_tokens, sum(cached_tokens) AS cached_tokens,
           sum(completion_tokens) AS completion_tokens, sum(cost_usd) AS cost_usd, sum(turns) AS turns,
           count(*) FILTER (WHERE stop_reason = 'gate') AS gated,
           count(*) FILTER (WHERE stop_reason = 'precheck' AND status = 'quiet') AS prechecked,
           count(*) FILTER (WHERE stop_reason = 'nothing_to_report') AS ok_token,
           count(*) FILTER (WHERE stop_reason = 'daily_cap') AS capped
      FROM rows
     GROUP BY key, status
)
SELECT key, sum(n)::integer AS wakes, jsonb_object_agg(status, n ORDER BY status) AS outcomes,
       sum(prompt_tokens)::bigint AS prompt_tokens, sum(cached_tokens)::bigint AS cached_tokens,
       sum(completion_tokens)::bigint AS completion_tokens, sum(cost_usd) AS cost_usd, sum(turns)::integer AS turns,
       sum(gated)::integer AS gated, sum(prechecked)::integer AS prechecked, sum(ok_token)::integer AS ok_token,
       sum(capped)::integer AS capped
  FROM by_status
 GROUP BY key
 ORDER BY key

-- name: spent_today
-- Each agent's spending in its own local day so far ($1/$2: agent, zone; $3: now), from its rows:
-- what the daily cap (counted in Redis per call) has left, as the ledger sees it.
SELECT z.agent_id, coalesce(sum(l.cost_usd), 0)::numeric(14, 8) AS spent_usd
  FROM unnest($1::text[], $2::text[]) AS z(agent_id, zone)
  LEFT JOIN wake_introspection_ledger l
    ON l.agent_id = z.agent_id
   AND l.started_at >= (date_trunc('day', $3::timestamptz AT TIME ZONE z.zone) AT TIME ZONE z.zone)
 GROUP BY z.agent_id
 ORDER BY z.agent_id
