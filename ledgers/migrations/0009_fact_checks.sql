-- Verify-on-read against the agent's workspace (ledgers/verify.py): the shape of typed anchors on
-- facts, and every check of a fact's code anchors at a git HEAD.

-- One anchor's shape, for the CHECK below. `top` is false inside an `absent` wrapper, where only
-- code anchors belong and `inferred` does not. Each step is a CASE so no function meets a value of
-- the wrong JSON type (AND does not promise an order of evaluation).
CREATE FUNCTION fact_anchor_ok(a jsonb, top boolean) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT CASE
    WHEN jsonb_typeof(a) <> 'object' THEN false
    WHEN NOT (a->>'type') = ANY (CASE WHEN top
                                      THEN ARRAY['file', 'import', 'symbol', 'env', 'package', 'message', 'wake', 'url']
                                      ELSE ARRAY['file', 'import', 'symbol', 'env', 'package'] END) THEN false
    WHEN jsonb_typeof(a->'ref') IS DISTINCT FROM 'string' OR length(a->>'ref') = 0 THEN false
    WHEN a ? 'where' AND (a->>'type' NOT IN ('import', 'env') OR jsonb_typeof(a->'where') <> 'string'
                          OR length(a->>'where') = 0) THEN false
    WHEN a ? 'ecosystem' AND (a->>'type' <> 'package' OR jsonb_typeof(a->'ecosystem') <> 'string'
                              OR a->>'ecosystem' NOT IN ('python', 'npm')) THEN false
    WHEN a ? 'inferred' AND (NOT top OR jsonb_typeof(a->'inferred') <> 'boolean') THEN false
    ELSE NOT EXISTS (SELECT 1 FROM jsonb_object_keys(a) k WHERE k NOT IN ('type', 'ref', 'where', 'ecosystem', 'inferred'))
END
$$;

-- A fact's anchors: a list of anchors, or of `absent` wrappers around one code anchor.
CREATE FUNCTION facts_anchors_ok(anchors jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT CASE
    WHEN jsonb_typeof(anchors) <> 'array' THEN false
    ELSE NOT EXISTS (
        SELECT 1 FROM jsonb_array_elements(anchors) e(a)
         WHERE NOT CASE
             WHEN jsonb_typeof(a) = 'object' AND a->>'type' = 'absent' THEN
                 NOT EXISTS (SELECT 1 FROM jsonb_object_keys(a) k WHERE k NOT IN ('type', 'anchor', 'inferred'))
                 AND CASE WHEN a ? 'inferred' THEN jsonb_typeof(a->'inferred') = 'boolean' ELSE true END
                 AND coalesce(fact_anchor_ok(a->'anchor', false), false)
             ELSE coalesce(fact_anchor_ok(a, true), false)
         END)
END
$$;

-- Every row written so far went through ledgers.facts.check_anchors, whose shape
-- ({"type": file|message|wake|url, "ref": a non-blank string}) this accepts, so the constraint is
-- added validated. A row written around the ledger in another shape stops this migration in its
-- own transaction, naming facts_anchors_typed: nothing is applied; fix that row and migrate again.
ALTER TABLE facts ADD CONSTRAINT facts_anchors_typed CHECK (facts_anchors_ok(anchors));

-- One row per check of a fact's code anchors: what was found, at which HEAD, by which wake.
-- A refuted check always names its retraction (caught_by 'reality', one per fact and HEAD).
CREATE TABLE fact_checks (
    check_id      bigserial PRIMARY KEY,
    fact_id       uuid NOT NULL REFERENCES facts (fact_id),
    agent_id      text NOT NULL,
    status        text NOT NULL CHECK (status IN ('verified', 'refuted', 'inconclusive')),
    evidence      text NOT NULL CHECK (btrim(evidence) <> ''),
    -- the commit checked against (SHA-1 or SHA-256 hex); none when the workspace could not be read
    head          text CHECK (head ~ '^[0-9a-f]{40}([0-9a-f]{24})?$'),
    checked_at    timestamptz NOT NULL,
    wake_id       uuid REFERENCES wake_introspection_ledger (wake_id),
    retraction_id uuid REFERENCES retraction_ledger (id),
    CONSTRAINT fact_checks_verdict_names_head CHECK (status = 'inconclusive' OR head IS NOT NULL),
    CONSTRAINT fact_checks_refuted_retracts CHECK ((status = 'refuted') = (retraction_id IS NOT NULL))
);

CREATE INDEX fact_checks_fact_recent ON fact_checks (fact_id, checked_at DESC);
CREATE INDEX fact_checks_agent_recent ON fact_checks (agent_id, checked_at DESC);
CREATE INDEX fact_checks_retraction ON fact_checks (retraction_id) WHERE retraction_id IS NOT NULL;
