-- name: record_write
INSERT INTO memory_writes (agent_id, wake_id, fence, tier, op, commit_id, path, bytes_before, bytes_after, reason, author, at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
RETURNING write_id

-- name: known_commits
-- Which of the commits an audit is about to read the memory tool (or an operator) made.
SELECT commit_id, op FROM memory_writes WHERE agent_id = $1 AND commit_id = ANY($2::text[])

-- name: recent_writes
-- The newest writes (of one path when $2 is not NULL), at most $3, and the exact number.
SELECT write_id, wake_id, fence, tier, op, commit_id, path, bytes_before, bytes_after, reason, author, at,
       count(*) OVER () AS total
  FROM memory_writes
 WHERE agent_id = $1 AND ($2::text IS NULL OR path = $2)
 ORDER BY at DESC, write_id DESC
 LIMIT $3

-- name: record_finding
-- A finding already recorded (the same fingerprint, whatever its state) is not recorded again.
INSERT INTO cloister_findings (agent_id, severity, domain, path, commit_id, excerpt, rule, fingerprint, state, at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (agent_id, fingerprint) DO NOTHING
RETURNING finding_id

-- name: findings
-- The newest findings in state $2 (every state when NULL), at most $3, and the exact number.
SELECT finding_id, severity, domain, path, commit_id, excerpt, rule, fingerprint, state, acked_by, note, at, acted_at,
       count(*) OVER () AS total
  FROM cloister_findings
 WHERE agent_id = $1 AND ($2::text IS NULL OR state = $2)
 ORDER BY at DESC, finding_id DESC
 LIMIT $3

-- name: open_findings
-- What the cloister block shows, and what a wake's canary reads, in one row (a part of
-- `ledgers.queries.together`: the wake reads it beside its other ledgers' rows): the agent's last
-- audited commit; the number of open HALT, WARN and LOG findings, each counted up to $3 (the cap
-- + 1, ledgers.queries.COUNT_READ) on the open-findings index; and the open findings themselves,
-- HALT first, then WARN, then LOG, oldest first within each, at most $2, each a row of
-- `OpenFinding`'s fields in order.
SELECT (SELECT commit_id FROM cloister_audits WHERE agent_id = $1) AS cloister_audited_commit,
       (SELECT count(*) FROM (SELECT 1 FROM cloister_findings
                               WHERE agent_id = $1 AND state = 'open' AND severity = 'HALT' LIMIT $3) AS n) AS cloister_open_halts,
       (SELECT count(*) FROM (SELECT 1 FROM cloister_findings
                               WHERE agent_id = $1 AND state = 'open' AND severity = 'WARN' LIMIT $3) AS n) AS cloister_open_warns,
       (SELECT count(*) FROM (SELECT 1 FROM cloister_findings
                               WHERE agent_id = $1 AND state = 'open' AND severity = 'LOG' LIMIT $3) AS n) AS cloister_open_logs,
       ARRAY(SELECT ROW(finding_id, severity, domain, path, commit_id, excerpt, rule, at)
               FROM cloister_findings
              WHERE agent_id = $1 AND state = 'open'
              ORDER BY severity = 'HALT' DESC, severity = 'WARN' DESC, at, finding_id
              LIMIT $2) AS cloister_open_findings

-- name: open_by_path
-- Each of the files $2 with an open finding: its worst open finding (HALT, then WARN, then LOG; the oldest).
SELECT DISTINCT ON (path) finding_id, severity, domain, path, commit_id, excerpt, rule, at
  FROM cloister_findings
 WHERE agent_id = $1 AND state = 'open' AND path = ANY($2::text[])
 ORDER BY path, severity = 'HALT' DESC, severity = 'WARN' DESC, at, finding_id

-- name: open_counts_by_agent
SELECT agent_id, severity, count(*) AS n FROM cloister_findings WHERE state = 'open' GROUP BY agent_id, severity

-- name: open_counts
SELECT severity, count(*) AS n FROM cloister_findings WHERE agent_id = $1 AND state = 'open' GROUP BY severity

-- name: finding
SELECT finding_id, severity, domain, path, commit_id, excerpt, rule, fingerprint, state, acked_by, note, at, acted_at
  FROM cloister_findings
 WHERE agent_id = $1 AND finding_id = $2

-- name: act
-- A human acts on findings: acknowledged (only open ones) or reverted (open or acknowledged ones).
UPDATE cloister_findings
   SET state = $3, acked_by = $4, note = $5, acted_at = $6
 WHERE agent_id = $1 AND finding_id = ANY($2::bigint[])
   AND (state = 'open' OR ($3 = 'reverted' AND state = 'acknowledged'))
RETURNING finding_id

-- name: has_open_halt
SELECT EXISTS (SELECT 1 FROM cloister_findings WHERE agent_id = $1 AND state = 'open' AND severity = 'HALT')

-- name: last_audit
SELECT commit_id, audited_at, commits, findings FROM cloister_audits WHERE agent_id = $1

-- name: set_audit
INSERT INTO cloister_audits AS a (agent_id, commit_id, audited_at, commits, findings)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (agent_id) DO UPDATE
   SET commit_id = EXCLUDED.commit_id, audited_at = EXCLUDED.audited_at,
       commits = EXCLUDED.commits, findings = EXCLUDED.findings

-- name: mark_commit_reverted
-- An operator reverted what one commit did to one file: its open and acknowledged findings there are settled.
UPDATE cloister_findings
   SET state = 'reverted', acked_by = $4, note = $5, acted_at = $6
 WHERE agent_id = $1 AND commit_id = $2 AND path = $3 AND state IN ('open', 'acknowledged')
RETURNING finding_id
