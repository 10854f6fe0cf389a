-- name: probe
-- Before a search: how many nodes the query parses to in the agent's configuration ($2; 0 = no
-- searchable word), and how many of the agent's newest $4 daybook entries use its terms (a
-- continuing topic).
WITH q AS (SELECT websearch_to_tsquery($2::regconfig, $3) AS query)
SELECT numnode(q.query) AS terms,
       (SELECT count(*)
          FROM (SELECT d.entry FROM daybook d WHERE d.agent_id = $1 ORDER BY d.written_at DESC, d.entry_id DESC LIMIT $4) n
         WHERE to_tsvector($2::regconfig, n.entry) @@ q.query) AS recent_uses
  FROM q

-- name: search
-- The best $4 matches of the query ($3, web-search syntax) in the agent's ($1) daybook, facts,
-- human contact and living summaries, in configuration $2, each with its provenance: the ledger,
-- who wrote it (`author_kind` agent or human; `owner`, the named human, read from stored columns
-- only), when, and whether it is the agent's own earlier answer. The to_tsvector expressions are
-- those of the GIN indexes (migration 0011): keep them the same text. The tsquery is written in
-- each WHERE (not joined from a CTE) so that, planned with $2 and $3 as constants, it is an index
-- condition. Ranking re-reads each match's text, so only the newest $5 matches of each ledger are
-- ranked: a common word costs at most that many. The MATERIALIZED CTEs find every match through
-- the index first (a bitmap scan); without them the planner may walk the agent's rows newest
-- first and parse each one's text until it has $5. OFFSET 0 keeps each row a primary-key lookup.
WITH day AS MATERIALIZED (
    SELECT x.entry_id, x.written_at
      FROM daybook x
     WHERE x.agent_id = $1 AND to_tsvector($2::regconfig, x.entry) @@ websearch_to_tsquery($2::regconfig, $3)
), fac AS MATERIALIZED (
    SELECT x.fact_id, x.recorded_at
      FROM facts x
     WHERE x.agent_id = $1 AND x.status IN ('active', 'superseded')
       AND to_tsvector($2::regconfig, translate(x.fact_key, '._-', '   ') || ' ' || x.fact_value) @@ websearch_to_tsquery($2::regconfig, $3)
), hum AS MATERIALIZED (
    SELECT x.message_id, x.received_at
      FROM human_contact x
     WHERE x.agent_id = $1 AND to_tsvector($2::regconfig, x.body) @@ websearch_to_tsquery($2::regconfig, $3)
)
SELECT r.ledger, r.ref, r.body, r.author_kind, r.owner, r.at, r.own_answer, r.derived, r.unchecked_blocks, r.rank
  FROM (
    (SELECT 'daybook' AS ledger, d.entry_id::text AS ref, d.entry AS body, 'agent' AS author_kind, NULL::text AS owner,
            d.written_at AS at, true AS own_answer, false AS derived, d.unchecked_blocks,
            ts_rank_cd(to_tsvector($2::regconfig, d.entry), websearch_to_tsquery($2::regconfig, $3)) AS rank
       FROM (SELECT entry_id FROM day ORDER BY written_at DESC LIMIT $5) w
      CROSS JOIN LATERAL (SELECT * FROM daybook y WHERE y.entry_id = w.entry_id OFFSET 0) d
      ORDER BY rank DESC, d.written_at DESC
      LIMIT $4)
    UNION ALL
    (SELECT 'facts', f.fact_id::text, f.fact_key || ': ' || f.fact_value || CASE WHEN f.status = 'superseded' THEN ' [superseded]' ELSE '' END,
            CASE WHEN f.origin = 'saw' THEN 'human' ELSE 'agent' END, m.author,
            f.recorded_at, false, false, '{}'::text[],
            ts_rank_cd(to_tsvector($2::regconfig, translate(f.fact_key, '._-', '   ') || ' ' || f.fact_value), websearch_to_tsquery($2::regconfig, $3)) AS rank
       FROM (SELECT fact_id FROM fac ORDER BY recorded_at DESC LIMIT $5) w
      CROSS JOIN LATERAL (SELECT * FROM facts y WHERE y.fact_id = w.fact_id OFFSET 0) f
       LEFT JOIN human_contact m ON m.message_id = f.source_ref AND m.agent_id = f.agent_id AND f.origin = 'saw'
      ORDER BY rank DESC, f.recorded_at DESC
      LIMIT $4)
    UNION ALL
    (SELECT 'human_contact', h.message_id::text, h.body, 'human', h.author, h.received_at, false, false, '{}'::text[],
            ts_rank_cd(to_tsvector($2::regconfig, h.body), websearch_to_tsquery($2::regconfig, $3)) AS rank
       FROM (SELECT message_id FROM hum ORDER BY received_at DESC LIMIT $5) w
      CROSS JOIN LATERAL (SELECT * FROM human_contact y WHERE y.message_id = w.message_id OFFSET 0) h
      ORDER BY rank DESC, h.received_at DESC
      LIMIT $4)
    UNION ALL
    (SELECT 'living_summaries', s.aspect || ' v' || s.version, s.content, 'agent', NULL::text, s.folded_at, false, true, '{}'::text[],
            ts_rank_cd(to_tsvector($2::regconfig, s.content), websearch_to_tsquery($2::regconfig, $3)) AS rank
       FROM living_summaries s
      WHERE s.agent_id = $1 AND to_tsvector($2::regconfig, s.content) @@ websearch_to_tsquery($2::regconfig, $3)
      ORDER BY rank DESC, s.folded_at DESC
      LIMIT $4)
  ) r
 ORDER BY r.rank DESC, r.at DESC
 LIMIT $4
