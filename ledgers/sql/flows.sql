-- name: raise_finding
-- A toxic flow a tier's binding holds; once per (agent, tier, flow) while open, and not at all once accepted.
INSERT INTO tool_flow_findings (agent_id, tier, flow_id, untrusted, private, egress, policy, raised_at)
SELECT $1, $2, $3, $4::text[], $5::text[], $6::text[], $7, $8
 WHERE NOT EXISTS (SELECT 1 FROM tool_flow_findings WHERE agent_id = $1 AND tier = $2 AND flow_id = $3 AND state = 'accepted')
ON CONFLICT (agent_id, tier, flow_id) WHERE state = 'open' DO NOTHING
RETURNING id

-- name: accepted
-- The flows accepted at this tier.
SELECT flow_id FROM tool_flow_findings WHERE agent_id = $1 AND tier = $2 AND state = 'accepted'

-- name: findings
-- `wake tools findings`: the toxic flows, newest first.
SELECT id, agent_id, tier, flow_id, untrusted, private, egress, policy, raised_at, state, accepted_by, accepted_at
  FROM tool_flow_findings
 WHERE ($1::boolean OR state = 'open')
 ORDER BY raised_at DESC, id DESC
 LIMIT $2

-- name: accept
-- `wake tools accept-flow`: the open finding of the flow at the tier is accepted, with who and when.
UPDATE tool_flow_findings SET state = 'accepted', accepted_by = $4, accepted_at = $5
 WHERE agent_id = $1 AND tier = $2 AND flow_id = $3 AND state = 'open'
RETURNING id, agent_id, tier, flow_id, untrusted, private, egress, policy, raised_at, state, accepted_by, accepted_at

-- name: last_state
-- The flow the tier's last wake held.
SELECT flow_id, untrusted, private, egress FROM tool_flow_state WHERE agent_id = $1 AND tier = $2

-- name: save_state
INSERT INTO tool_flow_state (agent_id, tier, flow_id, untrusted, private, egress)
VALUES ($1, $2, $3, $4::text[], $5::text[], $6::text[])
ON CONFLICT (agent_id, tier) DO UPDATE
   SET flow_id = EXCLUDED.flow_id, untrusted = EXCLUDED.untrusted, private = EXCLUDED.private, egress = EXCLUDED.egress

-- name: open_of_agent
-- The console's agent page: the agent's open toxic flows, oldest first.
SELECT id, agent_id, tier, flow_id, untrusted, private, egress, policy, raised_at, state, accepted_by, accepted_at
  FROM tool_flow_findings
 WHERE agent_id = $1 AND state = 'open'
 ORDER BY raised_at, id
