-- Verify-on-read III (codecheck.typed_anchors): anchor kinds for what facts claim, and a verdict scoped
-- to its anchors.
--
-- The stored shape, as 0017 made it, with three more code anchors: `dir` (a directory: `file` no
-- longer holds for one), `signature` (a callable's parameters, in `params`) and `value` (a
-- constant's literal, in `value`). `absent` wraps file, dir, import, symbol, env or package, as
-- before plus dir. It only accepts more than before, so every row facts_anchors_typed validated
-- still passes it.
CREATE OR REPLACE FUNCTION fact_anchor_ok(a jsonb, top boolean) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT CASE
    WHEN jsonb_typeof(a) <> 'object' THEN false
    WHEN NOT (a->>'type') = ANY (CASE WHEN top
                                      THEN ARRAY['file', 'dir', 'import', 'symbol', 'env', 'package', 'signature', 'value',
                                                 'message', 'wake', 'url']
                                      ELSE ARRAY['file', 'dir', 'import', 'symbol', 'env', 'package'] END) THEN false
    WHEN jsonb_typeof(a->'ref') IS DISTINCT FROM 'string' OR length(a->>'ref') = 0 THEN false
    WHEN a ? 'where' AND (a->>'type' NOT IN ('import', 'env') OR jsonb_typeof(a->'where') <> 'string'
                          OR length(a->>'where') = 0) THEN false
    WHEN a ? 'ecosystem' AND (a->>'type' <> 'package' OR jsonb_typeof(a->'ecosystem') <> 'string'
                              OR a->>'ecosystem' NOT IN ('python', 'npm')) THEN false
    WHEN a ? 'scope' AND (a->>'type' <> 'package' OR jsonb_typeof(a->'scope') <> 'string'
                          OR NOT (a->>'scope' IN ('required', 'optional', 'dev', 'test')
                                  OR a->>'scope' ~ '^extra:[a-z0-9]([a-z0-9-]*[a-z0-9])?$')) THEN false
    WHEN (a->>'type' = 'signature') <> (a ? 'params') THEN false
    WHEN a ? 'params' AND jsonb_typeof(a->'params') <> 'string' THEN false
    WHEN (a->>'type' = 'value') <> (a ? 'value') THEN false
    WHEN a ? 'value' AND jsonb_typeof(a->'value') <> 'string' THEN false
    WHEN a ? 'inferred' AND (NOT top OR jsonb_typeof(a->'inferred') <> 'boolean') THEN false
    ELSE NOT EXISTS (SELECT 1 FROM jsonb_object_keys(a) k
                      WHERE k NOT IN ('type', 'ref', 'where', 'ecosystem', 'scope', 'params', 'value', 'inferred'))
END
$$;

-- A check whose anchors all hold while the fact's value states names or numbers none of them
-- covers (codecheck.coverage) is `partly`: shown "partly anchored (… not checked)", never as settled.
ALTER TABLE fact_checks DROP CONSTRAINT fact_checks_status_check;
ALTER TABLE fact_checks ADD CONSTRAINT fact_checks_status_check
    CHECK (status IN ('verified', 'partly', 'refuted', 'inconclusive'));
