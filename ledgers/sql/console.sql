-- name: daily_costs
-- Each of an agent's local days since $3 (the agent's zone in $2): its wakes, cost and tokens.
-- The day is formatted in SQL, never converted through a time zone in Python.
SELECT to_char(started_at AT TIME ZONE $2, 'YYYY-MM-DD') AS day,
       count(*) AS wakes,
       count(*) FILTER (WHERE model IS NOT NULL) AS thought,
       coalesce(sum(cost_usd), 0) AS cost_usd,
       coalesce(sum(prompt_tokens), 0) AS prompt_tokens,
       coalesce(sum(completion_tokens), 0) AS completion_tokens
  FROM wake_introspection_ledger
 WHERE agent_id = $1 AND started_at >= $3
 GROUP BY 1
 ORDER BY 1 DESC

-- name: wake_actions
-- The confirmed mutating calls of one wake ($2), found through the agent's recent-actions index:
-- a wake's actions lie between its start ($3) and its end ($4).
SELECT action_id, surface, tool, summary, arguments, acted_at
  FROM last_actions
 WHERE agent_id = $1 AND acted_at BETWEEN $3 AND $4 AND wake_id = $2
 ORDER BY acted_at, action_id
