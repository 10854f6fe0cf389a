-- Approvals expire (docs/approvals.md, "Expiry"): a call still `pending` `[tools] approval_ttl`
-- after it was asked (default 7 days) is `expired` and never runs; an operator's decision on it is
-- refused. Expiry is a decision of the harness, written by the module that writes operators'
-- decisions (ledgers/approvals.py): `decided_by` names the harness (`wake-expiry`), `decided_at` is
-- when the expiry was recorded, and `decision_seal` seals the decision `expired`
-- (wake_decision_text, migration 0022), so `wake verify --chain` vouches for it as for an
-- operator's, and a row made `expired` any other way is unsealed.
ALTER TABLE tool_approvals
    DROP CONSTRAINT tool_approvals_state_check,
    ADD CONSTRAINT tool_approvals_state_check
        CHECK (state IN ('pending', 'approved', 'rejected', 'running', 'ran', 'not_run', 'interrupted', 'expired'));
