-- name: tool_role
-- The tool role of this database once the setup made it (NOLOGIN: an older setup's login role is
-- set up again); no row before.
SELECT rolname FROM pg_roles WHERE rolname = 'wake_tool_' || substr(md5(current_database()), 1, 12) AND NOT rolcanlogin

-- name: agent_login
-- Agent $1's login role (a member of the tool role) and its password (generated when the role was
-- made, kept only here); no row when either is missing or the login does not name its agent yet
-- (`ENTER` makes and names them).
SELECT l.role_name, l.password
  FROM wake_tool_login l JOIN pg_roles r ON r.rolname = l.role_name
 WHERE l.role_name = 'wake_tool_' || substr(md5(current_database()), 1, 12) || '_' || substr(md5($1), 1, 12)
   AND l.scoped_agent = $1

-- name: privileges
-- Every table of the schema and the tool role's privileges on it, as sorted GRANT clauses
-- (`SELECT`, `UPDATE (agent_id)`): what `ledgers.scope.PLANES` decides.
SELECT c.relname,
       coalesce((SELECT array_agg(x ORDER BY x COLLATE "C") FROM (
           SELECT e.privilege_type AS x FROM aclexplode(c.relacl) e WHERE e.grantee = r.oid
           UNION ALL
           SELECT e.privilege_type || ' (' || a.attname || ')' FROM pg_attribute a, aclexplode(a.attacl) e
            WHERE a.attrelid = c.oid AND NOT a.attisdropped AND e.grantee = r.oid) s), '{}'::text[]) AS grants
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
  CROSS JOIN pg_roles r
 WHERE c.relkind IN ('r', 'p') AND r.rolname = 'wake_tool_' || substr(md5(current_database()), 1, 12)
 ORDER BY c.relname

-- name: unscoped_tables
-- Agent tables (a column `agent_id`) a tool connection could read without its agent's policy.
SELECT c.relname
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'agent_id' AND NOT a.attisdropped
 WHERE c.relkind IN ('r', 'p')
   AND NOT (c.relrowsecurity AND EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = 'wake_agent_scope'))
 ORDER BY c.relname

-- name: scoped_agent
-- The agent this session is scoped to: its login role's (what every policy compares with).
SELECT wake_scoped_agent()

-- name: started_by_host
-- The agent's rows left `started`, with the process that wrote each: a daemon starting on the same
-- host closes those whose process is dead (`abandon_dead`) without waiting for the lease's TTL.
SELECT agent_id, wake_id, host, pid FROM wake_introspection_ledger WHERE status = 'started' AND host = $1

-- name: abandon_started_pids
-- Close the agent's `started` rows written on host $3 by the (dead) processes $4.
UPDATE wake_introspection_ledger
   SET status = 'abandoned', finished_at = now(), error = $2
 WHERE agent_id = $1 AND status = 'started' AND host = $3 AND pid = ANY($4::integer[])
RETURNING wake_id, tier, host, pid, fence
