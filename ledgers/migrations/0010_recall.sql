-- Recall: full-text search over what the agent holds from before (docs/recall.md), and the mark
-- on a daybook entry written while a block it speaks about could not be checked. Every column
-- has a reader (tests/integration/test_column_readers.py).

-- Expression GIN indexes, one per text search configuration wake ships indexed: 'simple' (the
-- default: no stemming, any language) and 'english', on the ledgers that grow (an agent has at
-- most two living summaries: their primary key finds them). The recall query names the agent's
-- configuration as a constant of the plan, so the index of that configuration serves it; any
-- other configuration still works, unindexed. The expressions here and in ledgers/sql/recall.sql
-- must stay the same text. A fact's key is split at '.', '_' and '-' (`anna.shift` is two words).
CREATE INDEX daybook_recall_simple ON daybook USING gin (to_tsvector('simple'::regconfig, entry));
CREATE INDEX daybook_recall_english ON daybook USING gin (to_tsvector('english'::regconfig, entry));
CREATE INDEX facts_recall_simple ON facts USING gin (to_tsvector('simple'::regconfig, translate(fact_key, '._-', '   ') || ' ' || fact_value));
CREATE INDEX facts_recall_english ON facts USING gin (to_tsvector('english'::regconfig, translate(fact_key, '._-', '   ') || ' ' || fact_value));
CREATE INDEX human_contact_recall_simple ON human_contact USING gin (to_tsvector('simple'::regconfig, body));
CREATE INDEX human_contact_recall_english ON human_contact USING gin (to_tsvector('english'::regconfig, body));

-- A wake's final text that claims the absence of what a block covers ("nothing is due") while
-- that block could not be checked is kept, marked with those blocks: it is not evidence of absence.
ALTER TABLE daybook
    ADD COLUMN unchecked_blocks text[] NOT NULL DEFAULT '{}';

-- How many absence claims of the wake's final text were made about blocks that had failed.
ALTER TABLE wake_introspection_ledger
    ADD COLUMN unchecked_absence_claims integer NOT NULL DEFAULT 0 CHECK (unchecked_absence_claims >= 0);
