// The graph schema: every statement is idempotent (IF NOT EXISTS), and named after the object it
// creates. Run by `wake migrate` and,
// with postgres.auto_migrate on, when `wake up` or `wake daemon` starts.

// name: wake_agent_id
CREATE CONSTRAINT wake_agent_id IF NOT EXISTS FOR (a:Agent) REQUIRE a.id IS UNIQUE

// name: wake_entity_key
CREATE CONSTRAINT wake_entity_key IF NOT EXISTS FOR (e:Entity) REQUIRE (e.agent_id, e.name) IS UNIQUE

// name: wake_fence_agent
CREATE CONSTRAINT wake_fence_agent IF NOT EXISTS FOR (f:Fence) REQUIRE f.agent_id IS UNIQUE

// name: wake_entity_kind
CREATE INDEX wake_entity_kind IF NOT EXISTS FOR (e:Entity) ON (e.agent_id, e.kind)
