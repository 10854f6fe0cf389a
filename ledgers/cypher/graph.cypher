// The agent's entity graph (docs/graph.md has the model). Every query is scoped to one agent.

// name: fence
// The first statement of every graph write transaction. Returns the agent's newest fence before
// this write; the SET takes the node's write lock until commit, so writers of one agent serialize.
// The caller rolls back when `newest > $fence`.
MERGE (f:Fence {agent_id: $agent_id})
  ON CREATE SET f.fence = $fence
WITH f, f.fence AS newest
SET f.fence = CASE WHEN newest > $fence THEN newest ELSE $fence END, f.updated_at = $now
RETURN newest

// name: anchors
// The entities the agent's recent facts, open commitments and last actions point at, newest first.
MATCH (:Agent {id: $agent_id})-[x:FACT|COMMITMENT|ACTION]->(e:Entity {agent_id: $agent_id})
WHERE (type(x) = 'COMMITMENT' AND coalesce(x.open, true)) OR (type(x) <> 'COMMITMENT' AND x.at >= $since)
WITH e, collect(DISTINCT type(x)) AS roles, max(x.at) AS last
RETURN e.name AS name, e.kind AS kind, roles, last
ORDER BY last DESC, name
LIMIT $limit

// name: view_count
// Exact totals of the block's view: anchors, and the distinct entities one hop from them.
MATCH (:Agent {id: $agent_id})-[x:FACT|COMMITMENT|ACTION]->(e:Entity {agent_id: $agent_id})
WHERE (type(x) = 'COMMITMENT' AND coalesce(x.open, true)) OR (type(x) <> 'COMMITMENT' AND x.at >= $since)
WITH collect(DISTINCT e) AS anchors
UNWIND anchors AS e
OPTIONAL MATCH (e)-[]-(n:Entity {agent_id: $agent_id})
WHERE NOT n IN anchors
RETURN size(anchors) AS anchors, count(DISTINCT n) AS neighbours

// name: around
// One hop from the given entities to other entities of the same agent, newest link first.
UNWIND $names AS anchor
MATCH (e:Entity {agent_id: $agent_id, name: anchor})-[r]-(n:Entity {agent_id: $agent_id})
RETURN anchor, type(r) AS rel, startNode(r) = e AS outgoing, n.name AS name, n.kind AS kind, r.created_at AS at
ORDER BY at DESC, anchor, rel, name
LIMIT $limit

// name: neighbors
// One hop around one entity, optionally only relationships of one type.
MATCH (e:Entity {agent_id: $agent_id, name: $name})-[r]-(n:Entity {agent_id: $agent_id})
WHERE $rel IS NULL OR type(r) = $rel
RETURN type(r) AS rel, startNode(r) = e AS outgoing, n.name AS name, n.kind AS kind, r.created_at AS at
ORDER BY at DESC, rel, name
LIMIT $limit

// name: neighbor_count
MATCH (e:Entity {agent_id: $agent_id, name: $name})-[r]-(n:Entity {agent_id: $agent_id})
WHERE $rel IS NULL OR type(r) = $rel
RETURN count(r) AS total

// name: entity
MATCH (e:Entity {agent_id: $agent_id, name: $name})
RETURN e.name AS name, e.kind AS kind

// name: link
// Both entities are created when missing (a kind given later fills in a missing one); the
// relationship is created once. The agent records an ACTION anchor on both ends.
MERGE (a:Agent {id: $agent_id})
MERGE (s:Entity {agent_id: $agent_id, name: $source})
  ON CREATE SET s.kind = $source_kind, s.created_at = $now
SET s.kind = coalesce(s.kind, $source_kind), s.updated_at = $now
MERGE (t:Entity {agent_id: $agent_id, name: $target})
  ON CREATE SET t.kind = $target_kind, t.created_at = $now
SET t.kind = coalesce(t.kind, $target_kind), t.updated_at = $now
MERGE (s)-[r:$($rel)]->(t)
  ON CREATE SET r.created_at = $now, r.wake_id = $wake_id, r.fence = $fence, r.created = true
  ON MATCH SET r.created = false
WITH a, s, t, r, r.created AS created
REMOVE r.created
MERGE (a)-[xs:ACTION {ref: $ref}]->(s) SET xs.at = $now
MERGE (a)-[xt:ACTION {ref: $ref}]->(t) SET xt.at = $now
RETURN created

// name: unlink
// Deletes the relationship (never the entities); an ACTION anchor is recorded only if something
// was deleted.
MATCH (s:Entity {agent_id: $agent_id, name: $source})-[r]->(t:Entity {agent_id: $agent_id, name: $target})
WHERE type(r) = $rel
WITH s, t, collect(r) AS found
FOREACH (r IN found | DELETE r)
WITH s, t, size(found) AS removed
WHERE removed > 0
MERGE (a:Agent {id: $agent_id})
MERGE (a)-[xs:ACTION {ref: $ref}]->(s) SET xs.at = $now
MERGE (a)-[xt:ACTION {ref: $ref}]->(t) SET xt.at = $now
RETURN removed

// name: anchor
// How another ledger marks an entity as the subject of a fact, an open commitment or an action
// (`$role` is FACT, COMMITMENT or ACTION; `$ref` names the ledger row).
MERGE (a:Agent {id: $agent_id})
MERGE (e:Entity {agent_id: $agent_id, name: $name})
  ON CREATE SET e.kind = $kind, e.created_at = $now
SET e.kind = coalesce(e.kind, $kind), e.updated_at = $now
MERGE (a)-[x:$($role) {ref: $ref}]->(e)
SET x.at = $at, x.open = $open
RETURN e.name AS name

// name: fact_anchor
// The entity a fact row anchors (`$ref` = `fact:<id>`): a superseding fact keeps its subject.
MATCH (:Agent {id: $agent_id})-[x:FACT {ref: $ref}]->(e:Entity {agent_id: $agent_id})
RETURN e.name AS name, e.kind AS kind
ORDER BY x.at DESC
LIMIT 1

// name: close_commitment
// A closed commitment no longer anchors the block: its COMMITMENT anchors (`$ref` =
// `commitment:<id>`) get `open = false`; the entity and its other anchors stay.
MATCH (:Agent {id: $agent_id})-[x:COMMITMENT {ref: $ref}]->(e:Entity {agent_id: $agent_id})
SET x.open = false
RETURN e.name AS name
ORDER BY name
