-- The retraction ledger (seed 000, section 5): a disproven belief, what it stood on, why it was
-- wrong, what is held instead, and a typed falsifier whose two observations cannot be the same.
CREATE TABLE retraction_ledger (
    id                            uuid PRIMARY KEY,
    agent_id                      text NOT NULL,
    claim_verbatim                text NOT NULL CHECK (btrim(claim_verbatim) <> ''),
    stood_on                      text NOT NULL CHECK (btrim(stood_on) <> ''),
    why_wrong                     text NOT NULL CHECK (btrim(why_wrong) <> ''),
    corrected_claim               text NOT NULL CHECK (btrim(corrected_claim) <> ''),
    caught_by                     text NOT NULL DEFAULT 'self'
                                  CHECK (caught_by IN ('self', 'human', 'together', 'reality')),
    row_class                     text NOT NULL DEFAULT 'claim' CHECK (row_class IN ('claim', 'send')),
    -- The typed falsifier: what to do, what is seen if the retraction stands (verdict overturned),
    -- what is seen if the original claim was right after all (verdict upheld).
    test_procedure                text NOT NULL CHECK (btrim(test_procedure) <> ''),
    expected_retraction_pass_obs  text NOT NULL CHECK (btrim(expected_retraction_pass_obs) <> ''),
    overturn_retraction_condition text NOT NULL CHECK (btrim(overturn_retraction_condition) <> ''),
    verdict                       text NOT NULL DEFAULT 'unchecked'
                                  CHECK (verdict IN ('unchecked', 'upheld', 'overturned', 'unresolvable')),
    corrected_at                  timestamptz NOT NULL,
    matures_at                    timestamptz NOT NULL,
    falsifier_checked_at          timestamptz,
    falsifier_outcome             text,
    -- An optional machine-checkable probe of expected_retraction_pass_obs: the harness runs it
    -- when the falsifier is due. verified / verified_missing = the pass observation holds.
    probe_target                  text,
    probe_mode                    text CHECK (probe_mode IN ('exists', 'missing', 'contains')),
    probe_needle                  text,
    probe_negate                  boolean NOT NULL DEFAULT false,
    created_at                    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT retraction_polarity_distinct CHECK (
        regexp_replace(lower(btrim(expected_retraction_pass_obs)), '\s+', ' ', 'g')
        <> regexp_replace(lower(btrim(overturn_retraction_condition)), '\s+', ' ', 'g')),
    CONSTRAINT retraction_matures_after_correction CHECK (matures_at >= corrected_at),
    CONSTRAINT retraction_settled_when_checked CHECK ((verdict = 'unchecked') = (falsifier_checked_at IS NULL)),
    CONSTRAINT retraction_settled_with_outcome CHECK (
        verdict = 'unchecked' OR (falsifier_outcome IS NOT NULL AND btrim(falsifier_outcome) <> '')),
    CONSTRAINT retraction_probe_whole CHECK ((probe_target IS NULL) = (probe_mode IS NULL)),
    CONSTRAINT retraction_probe_needle CHECK (
        (probe_mode IS NOT DISTINCT FROM 'contains') = (probe_needle IS NOT NULL) AND probe_needle IS DISTINCT FROM ''),
    CONSTRAINT retraction_probe_negate CHECK (NOT probe_negate OR probe_mode IS NOT DISTINCT FROM 'contains')
);

CREATE INDEX retraction_ledger_due ON retraction_ledger (agent_id, matures_at) WHERE verdict = 'unchecked';
CREATE INDEX retraction_ledger_recent ON retraction_ledger (agent_id, corrected_at DESC);

-- Every run of the claim-probe instrument leaves a row: what it checked, what it found, and
-- whether the instrument passed its dual-needle controls in that run.
CREATE TABLE claim_probe_records (
    id               uuid PRIMARY KEY,
    agent_id         text NOT NULL,
    wake_id          uuid,
    retraction_id    uuid REFERENCES retraction_ledger (id) ON DELETE SET NULL,
    target           text NOT NULL,
    resolved_path    text,
    mode             text NOT NULL CHECK (mode IN ('exists', 'missing', 'contains')),
    needle           text,
    negate           boolean NOT NULL DEFAULT false,
    assertion        text,
    verdict          text NOT NULL CHECK (verdict IN ('verified', 'verified_missing', 'falsified', 'error')),
    -- {path, size_bytes, needle, match_count, mode, negate, cause}
    evidence         jsonb NOT NULL,
    instrument_state text NOT NULL CHECK (instrument_state IN ('passed', 'failed')),
    -- [{name, on, expect, got, match_count, ok}]
    controls         jsonb NOT NULL DEFAULT '[]',
    checked_at       timestamptz NOT NULL,
    -- An instrument that failed its controls never reports a verdict other than error.
    CONSTRAINT claim_probe_untrusted_is_error CHECK (instrument_state = 'passed' OR verdict = 'error'),
    CONSTRAINT claim_probe_needle CHECK ((mode = 'contains') = (needle IS NOT NULL) AND needle IS DISTINCT FROM ''),
    CONSTRAINT claim_probe_negate CHECK (NOT negate OR mode = 'contains')
);

CREATE INDEX claim_probe_records_recent ON claim_probe_records (agent_id, checked_at DESC);
CREATE INDEX claim_probe_records_retraction ON claim_probe_records (retraction_id, checked_at DESC)
    WHERE retraction_id IS NOT NULL;
