-- name: insert
INSERT INTO facts (fact_id, agent_id, category, fact_key, fact_value, origin, status, attested_ref,
                   source_ref, supersedes_id, anchors, wake_id, recorded_at)
VALUES (COALESCE($1, gen_random_uuid()), $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12, $13)
RETURNING fact_id

-- name: lock
-- The fact a supersession replaces, locked for the rest of the transaction.
SELECT fact_id, fact_key, category, status
  FROM facts
 WHERE fact_id = $1 AND agent_id = $2
   FOR UPDATE

-- name: active_with_key
SELECT fact_id FROM facts WHERE agent_id = $1 AND fact_key = $2 AND status = 'active'

-- name: mark_superseded
UPDATE facts
   SET status = 'superseded', superseded_at = $3
 WHERE fact_id = $1 AND agent_id = $2 AND status = 'active'
RETURNING fact_id

-- name: for_arrival
-- The agent's newest active facts (at most $3) with their supersession chains (at most $4 links
-- back), passports formatted in SQL in the agent's timezone ($2). `depth` 0 is the live fact.
WITH RECURSIVE chain AS (
    SELECT l.fact_id AS head_id, l.recorded_at AS head_recorded_at, 0 AS depth, l.fact_id, l.supersedes_id
      FROM (SELECT a.fact_id, a.recorded_at, a.supersedes_id
              FROM facts a
             WHERE a.agent_id = $1 AND a.status = 'active'
             ORDER BY a.recorded_at DESC, a.fact_id
             LIMIT $3) l
    UNION ALL
    -- OFFSET 0 keeps each step a primary-key lookup (no hash join over the whole table)
    SELECT c.head_id, c.head_recorded_at, c.depth + 1, p.fact_id, p.supersedes_id
      FROM chain c
     CROSS JOIN LATERAL (SELECT s.fact_id, s.supersedes_id FROM facts s WHERE s.fact_id = c.supersedes_id OFFSET 0) p
     WHERE c.depth < $4
)
SELECT c.head_id, c.depth, f.fact_id, f.category, f.fact_key, f.fact_value, f.origin, f.status,
       -- verify-on-read: a message or wake anchor is checked against its ledger now
       -- (the whole stored anchor is kept: code anchors are checked against the workspace by the caller)
       (SELECT coalesce(jsonb_agg(x.anchor || jsonb_build_object(
                   'check', CASE
                       WHEN x.ref_id IS NULL THEN 'unchecked'
                       WHEN x.anchor->>'type' = 'message' AND EXISTS (
                           SELECT 1 FROM human_contact m WHERE m.message_id = x.ref_id AND m.agent_id = f.agent_id
                       ) THEN 'found'
                       WHEN x.anchor->>'type' = 'wake' AND EXISTS (
                           SELECT 1 FROM wake_introspection_ledger w WHERE w.wake_id = x.ref_id AND w.agent_id = f.agent_id
                       ) THEN 'found'
                       ELSE 'missing' END) ORDER BY x.ord), '[]'::jsonb)
          FROM (SELECT e.anchor, e.ord,
                       CASE WHEN e.anchor->>'type' IN ('message', 'wake')
                             AND e.anchor->>'ref' ~* '^[0-9a-f]{8}-?([0-9a-f]{4}-?){3}[0-9a-f]{12}$'
                            THEN (e.anchor->>'ref')::uuid END AS ref_id
                  FROM jsonb_array_elements(f.anchors) WITH ORDINALITY AS e(anchor, ord)) x) AS anchors,
       to_char(f.recorded_at AT TIME ZONE $2, 'FMDD Mon YYYY') AS recorded_on,
       to_char(f.recorded_at AT TIME ZONE $2, 'YYYY-MM-DD') AS recorded_day,
       to_char(f.superseded_at AT TIME ZONE $2, 'YYYY-MM-DD') AS superseded_day
  FROM chain c
 CROSS JOIN LATERAL (SELECT * FROM facts r WHERE r.fact_id = c.fact_id OFFSET 0) f
 ORDER BY c.head_recorded_at DESC, c.head_id, c.depth

-- name: counts
-- The counts beside the arrival's LIMIT, each reading at most $2 rows (the cap + 1,
-- ledgers.queries.COUNT_READ) however many facts the agent has:
-- `active`: the active facts, counted up to $2 (on the partial index facts_agent_active_recent);
-- `unverified`: those held back among the agent's newest $2 - 1 facts of any status (there is no
-- index on unverified ones, so a bounded count of them has to bound the rows it looks at);
-- `scanned`: how many of the newest facts were looked at, $2 when there are more than $2 - 1.
SELECT (SELECT count(*) FROM (SELECT 1 FROM facts a WHERE a.agent_id = $1 AND a.status = 'active' LIMIT $2) x) AS active,
       count(*) FILTER (WHERE n.status = 'unverified' AND n.k < $2) AS unverified,
       count(*) AS scanned
  FROM (SELECT s.status, row_number() OVER (ORDER BY s.recorded_at DESC, s.fact_id) AS k
          FROM (SELECT f.status, f.recorded_at, f.fact_id
                  FROM facts f
                 WHERE f.agent_id = $1
                 ORDER BY f.recorded_at DESC, f.fact_id
                 LIMIT $2) s) n

-- name: listing
-- Every fact of the agent, any status, for the operator (`wake facts`), newest first.
SELECT f.fact_id, f.agent_id, f.category, f.fact_key, f.fact_value, f.origin, f.status, f.attested_ref,
       f.source_ref, f.supersedes_id, f.anchors, f.wake_id, f.recorded_at, f.superseded_at,
       count(*) OVER () AS total
  FROM facts f
 WHERE f.agent_id = $1 AND ($2::boolean OR f.status IN ('active', 'superseded'))
 ORDER BY f.recorded_at DESC, f.fact_id
 LIMIT $3

-- name: retire
-- Take an active fact out of arrivals without a replacement: overridden, expired or refuted.
UPDATE facts
   SET status = $3
 WHERE fact_id = $1 AND agent_id = $2 AND status = 'active'
RETURNING fact_id
