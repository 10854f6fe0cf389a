-- name: raise_finding
-- A toxic flow a tier's binding holds; once per (agent, tier, flow) while open, and not at all once accepted.
INSERT INTO tool_flow_findings (agent_id, tier, flow_id, untrusted, private, egress, policy, raised_at)
SELECT $1, $2, $3, $4::text[], $5::text[], $6::text[], $7, $8
 WHERE NOT EXISTS (SELECT 1 FROM tool_flow_findings WHERE agent_id = $1 AND tier = $2 AND flow_id = $3 AND state = 'accepted')
ON CONFLICT (agent_id, tier, flow_id) WHERE state = 'open' DO NOTHING
RETURNING id

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

-- name: tier_flows
-- What vetting a tier's binding reads, in one row (a part of `ledgers.queries.together`: a wake
-- reads it beside its other ledgers' rows): the flow the tier's last wake held (`tool_flow_vetted`
-- false: no wake of the tier was vetted yet), and the flows accepted at the tier.
SELECT s.agent_id IS NOT NULL AS tool_flow_vetted, s.flow_id AS tool_flow_id, s.untrusted AS tool_flow_untrusted,
       s.private AS tool_flow_private, s.egress AS tool_flow_egress,
       ARRAY(SELECT flow_id FROM tool_flow_findings WHERE agent_id = $1 AND tier = $2 AND state = 'accepted') AS tool_flows_accepted
  FROM (SELECT 1) AS one
  LEFT JOIN tool_flow_state AS s ON s.agent_id = $1 AND s.tier = $2

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
