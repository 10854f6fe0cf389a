-- Decisions the harness vouches for (docs/isolation.md, "Sealed decisions"): an operator's
-- approval decision and a human message carry an HMAC-SHA256 seal made with a key that only the
-- tables' owner reads. A row written any other way (not by `wake approvals`, `wake tell` or the
-- inbox: a forged decision, a forged message) has no valid seal: an approved call whose decision
-- is not sealed is not run, a `saw` fact cannot cite an unsealed message, and `wake verify --chain`
-- names both. The tool role can read neither the key nor a function that seals; it may ask
-- `wake_sealed` whether a seal is valid, which tells it nothing it could forge one with.

CREATE TABLE wake_seal_key (
    id  boolean PRIMARY KEY DEFAULT true CHECK (id),
    key bytea NOT NULL CHECK (length(key) = 32)
);
REVOKE ALL ON wake_seal_key FROM PUBLIC;
-- 2 x 122 random bits from the server's strong random source (gen_random_uuid, no extension needed)
INSERT INTO wake_seal_key (key) VALUES (decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));

-- HMAC-SHA256 (RFC 2104) of a text's UTF-8 bytes, hex; sha256() is core PostgreSQL (11+).
CREATE FUNCTION wake_hmac(key bytea, message text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT SET search_path = pg_catalog AS $$
DECLARE
    k bytea := CASE WHEN length(key) > 64 THEN sha256(key) ELSE key END;
    ipad bytea;
    opad bytea;
BEGIN
    k := k || decode(repeat('00', 64 - length(k)), 'hex');
    ipad := k;
    opad := k;
    FOR i IN 0..63 LOOP
        ipad := set_byte(ipad, i, get_byte(k, i) # 54);   -- 0x36
        opad := set_byte(opad, i, get_byte(k, i) # 92);   -- 0x5c
    END LOOP;
    RETURN encode(sha256(opad || sha256(ipad || convert_to(message, 'UTF8'))), 'hex');
END $$;

-- What a seal covers: the decision (or message) and every field a forger would change, joined by
-- the unit separator; times as integer microseconds since the epoch (no session time zone).
CREATE FUNCTION wake_decision_text(id bigint, agent_id text, tool text, tool_hash text, arguments jsonb, decision text,
                                   decided_by text, decided_at timestamptz) RETURNS text
    LANGUAGE sql IMMUTABLE SET search_path = pg_catalog AS $$
    SELECT concat_ws(chr(31), 'decision', id::text, agent_id, tool, tool_hash, arguments::text, decision, decided_by,
                     (extract(epoch FROM decided_at) * 1000000)::bigint::text)
$$;

CREATE FUNCTION wake_message_text(message_id uuid, agent_id text, author text, channel text, body text,
                                  received_at timestamptz) RETURNS text
    LANGUAGE sql IMMUTABLE SET search_path = pg_catalog AS $$
    SELECT concat_ws(chr(31), 'message', message_id::text, agent_id, author, channel, body,
                     (extract(epoch FROM received_at) * 1000000)::bigint::text)
$$;

-- Seal a text: reads the key, so only the owner can (not SECURITY DEFINER: the caller's rights).
CREATE FUNCTION wake_seal(message text) RETURNS text
    LANGUAGE sql STABLE SET search_path = pg_catalog AS $$
    SELECT public.wake_hmac(key, message) FROM public.wake_seal_key
$$;
REVOKE ALL ON FUNCTION wake_seal(text) FROM PUBLIC;

-- Whether `seal` is the text's seal; callable by anyone (a tool's own reads check it too).
CREATE FUNCTION wake_sealed(message text, seal text) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog AS $$
    SELECT seal IS NOT NULL AND public.wake_hmac(key, message) = seal FROM public.wake_seal_key
$$;

ALTER TABLE tool_approvals ADD COLUMN decision_seal text;
ALTER TABLE human_contact ADD COLUMN seal text;

-- the rows already stored are vouched for as they stand (they were written before seals existed)
UPDATE tool_approvals
   SET decision_seal = wake_seal(wake_decision_text(id, agent_id, tool, tool_hash, arguments,
                                                    CASE WHEN state = 'rejected' THEN 'rejected' ELSE 'approved' END, decided_by, decided_at))
 WHERE decided_by IS NOT NULL;
UPDATE human_contact SET seal = wake_seal(wake_message_text(message_id, agent_id, author, channel, body, received_at));
