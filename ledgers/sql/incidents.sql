-- name: open_or_count
-- A failing row: count it on its open incident, else open one (`opened` says which).
WITH counted AS (
    UPDATE wake_incidents SET rows_seen = rows_seen + 1, last_wake_id = $4, last_seen_at = $6
     WHERE agent_id = $1 AND tier = $2 AND signature = $3 AND closed_at IS NULL
    RETURNING id, false AS opened, rows_seen
), opened AS (
    INSERT INTO wake_incidents (agent_id, tier, signature, sample_error, first_wake_id, last_wake_id, opened_at, last_seen_at)
    SELECT $1, $2, $3, $5, $4, $4, $6, $6
     WHERE NOT EXISTS (SELECT 1 FROM counted)
    ON CONFLICT (agent_id, tier, signature) WHERE closed_at IS NULL DO NOTHING
    RETURNING id, true AS opened, rows_seen
)
SELECT * FROM counted UNION ALL SELECT * FROM opened

-- name: close_open
-- A success of the tier closes every open incident of it.
UPDATE wake_incidents SET closed_at = $3, closed_by_wake = $4
 WHERE agent_id = $1 AND tier = $2 AND closed_at IS NULL
RETURNING id, agent_id, tier, signature, sample_error, first_wake_id, last_wake_id, rows_seen, opened_at, last_seen_at,
          closed_at, closed_by_wake, acked_by, acked_at

-- name: consecutive_failures
-- The tier's settled rows since its newest completed or quiet one, skipped rows aside.
SELECT count(*) FROM wake_introspection_ledger
 WHERE agent_id = $1 AND tier = $2 AND status IN ('failed', 'aborted', 'abandoned', 'missed')
   AND started_at > COALESCE((SELECT max(started_at) FROM wake_introspection_ledger
                               WHERE agent_id = $1 AND tier = $2 AND status IN ('completed', 'quiet')), '-infinity'::timestamptz)

-- name: ack
-- $4: the agent it must be of (the console acts in one agent's page), or NULL (the CLI: any)
UPDATE wake_incidents SET acked_by = $2, acked_at = $3 WHERE id = $1 AND acked_by IS NULL AND ($4::text IS NULL OR agent_id = $4)
RETURNING id

-- name: listing
SELECT * FROM wake_incidents WHERE $1::bool OR closed_at IS NULL ORDER BY opened_at DESC, id DESC LIMIT $2

-- name: get
SELECT * FROM wake_incidents WHERE id = $1

-- name: open_counts
SELECT agent_id, count(*) AS open FROM wake_incidents WHERE closed_at IS NULL GROUP BY agent_id

-- name: open_once
-- A dead-man incident (no row of its own to count): opened if none of its signature is open, else
-- nothing (every replica's check of an overdue tier meets the one open incident). NULL: it was open.
INSERT INTO wake_incidents (agent_id, tier, signature, sample_error, first_wake_id, last_wake_id, opened_at, last_seen_at)
VALUES ($1, $2, $3, $5, $4, $4, $6, $6)
ON CONFLICT (agent_id, tier, signature) WHERE closed_at IS NULL DO NOTHING
RETURNING id

-- name: of_agent
-- The console's agent page: one agent's open incidents, the newest first.
SELECT * FROM wake_incidents WHERE agent_id = $1 AND closed_at IS NULL ORDER BY opened_at DESC, id DESC LIMIT $2

-- name: overlapping
-- The console's timeline: the incidents of these agents whose rows fall between two instants
-- (their first row at or before the end, their last at or after the start), to mark the rows.
SELECT * FROM wake_incidents WHERE agent_id = ANY($1::text[]) AND opened_at <= $3 AND last_seen_at >= $2 ORDER BY id LIMIT $4
