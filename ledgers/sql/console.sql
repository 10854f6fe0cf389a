-- name: daily_costs
-- Each of an agent's local days since $3 (the agent's zone in $2): its wakes, cost and tokens.
-- The day is formatted in SQL, never converted through a time zone in Python. The days are made
-- first, from $3's local day to the agent's newest wake's, each as its two instants (a DST day is
-- 23 or 25 hours); then each day's wakes are summed through the covering index of migration 0030
-- (an index-only read, no conversion per row: converting each of 16,000 rows' instants to a local
-- day took most of this read). A day with no wake is not a row.
WITH bounds AS (
    SELECT date_trunc('day', $3::timestamptz AT TIME ZONE $2) AS first,
           date_trunc('day', (SELECT max(started_at) FROM wake_introspection_ledger WHERE agent_id = $1) AT TIME ZONE $2) AS last
), days AS (
    SELECT d AS local_day, greatest(d AT TIME ZONE $2, $3::timestamptz) AS lo, (d + interval '1 day') AT TIME ZONE $2 AS hi
      FROM bounds, generate_series(bounds.first, bounds.last, interval '1 day') AS d
)
SELECT to_char(days.local_day, 'YYYY-MM-DD') AS day, w.wakes, w.thought, w.cost_usd, w.prompt_tokens, w.completion_tokens
  FROM days CROSS JOIN LATERAL (
       SELECT count(*) AS wakes,
              count(*) FILTER (WHERE model IS NOT NULL) AS thought,
              coalesce(sum(cost_usd), 0) AS cost_usd,
              coalesce(sum(prompt_tokens), 0) AS prompt_tokens,
              coalesce(sum(completion_tokens), 0) AS completion_tokens
         FROM wake_introspection_ledger
        WHERE agent_id = $1 AND started_at >= days.lo AND started_at < days.hi
       ) AS w
 WHERE w.wakes > 0
 ORDER BY days.local_day DESC

-- name: wake_actions
-- The confirmed mutating calls of one wake ($2), found through the agent's recent-actions index:
-- a wake's actions lie between its start ($3) and its end ($4).
SELECT action_id, surface, tool, summary, arguments, acted_at
  FROM last_actions
 WHERE agent_id = $1 AND acted_at BETWEEN $3 AND $4 AND wake_id = $2
 ORDER BY acted_at, action_id
