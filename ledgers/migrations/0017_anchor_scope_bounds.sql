-- Verify-on-read II (codecheck.typed_anchors): a package anchor may say how the package is depended on
-- (`scope`), and a fact's anchors are bounded in number and length.

-- The stored shape, as 0009 made it, with `scope` on a package anchor: required, optional, dev,
-- test, or extra:NAME. It only accepts more than before, so every row facts_anchors_typed
-- validated still passes it.
CREATE OR REPLACE FUNCTION fact_anchor_ok(a jsonb, top boolean) RETURNS boolean
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
    WHEN a ? 'scope' AND (a->>'type' <> 'package' OR jsonb_typeof(a->'scope') <> 'string'
                          OR NOT (a->>'scope' IN ('required', 'optional', 'dev', 'test')
                                  OR a->>'scope' ~ '^extra:[a-z0-9]([a-z0-9-]*[a-z0-9])?$')) THEN false
    WHEN a ? 'inferred' AND (NOT top OR jsonb_typeof(a->'inferred') <> 'boolean') THEN false
    ELSE NOT EXISTS (SELECT 1 FROM jsonb_object_keys(a) k
                      WHERE k NOT IN ('type', 'ref', 'where', 'ecosystem', 'scope', 'inferred'))
END
$$;

-- The bounds every write path holds (codecheck.typed_anchors.MAX_ANCHORS, MAX_TEXT): at most 16 anchors
-- on a fact, a ref or where of at most 500 characters (inside an `absent` wrapper too).
CREATE FUNCTION facts_anchors_bounded(anchors jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT CASE
    WHEN jsonb_typeof(anchors) <> 'array' THEN true  -- the shape is facts_anchors_typed's to refuse
    WHEN jsonb_array_length(anchors) > 16 THEN false
    ELSE NOT EXISTS (
        SELECT 1 FROM jsonb_array_elements(anchors) e(a)
         CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(a) = 'object' AND jsonb_typeof(a->'anchor') = 'object'
                                         THEN a->'anchor' ELSE a END AS inner_anchor) i
         WHERE jsonb_typeof(i.inner_anchor) = 'object'
           AND (length(coalesce(i.inner_anchor->>'ref', '')) > 500 OR length(coalesce(i.inner_anchor->>'where', '')) > 500))
END
$$;

-- NOT VALID: rows written before the bounds are left as they are (the verifier reads at most the
-- first 16 anchors of any row and says so); every row written from now on is held to them.
ALTER TABLE facts ADD CONSTRAINT facts_anchors_bounded CHECK (facts_anchors_bounded(anchors)) NOT VALID;
