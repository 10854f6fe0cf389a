-- Steps 8-9 on the wake's row: the model route, the usage totals, the loop's counts, how the loop
-- stopped, the final assistant text (the daybook entry) and, for a promoted wake, its cause.
ALTER TABLE wake_introspection_ledger
    ADD COLUMN model             text,
    ADD COLUMN prompt_tokens     integer NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
    ADD COLUMN completion_tokens integer NOT NULL DEFAULT 0 CHECK (completion_tokens >= 0),
    ADD COLUMN cached_tokens     integer NOT NULL DEFAULT 0 CHECK (cached_tokens >= 0 AND cached_tokens <= prompt_tokens),
    ADD COLUMN cost_usd          numeric(14, 8) NOT NULL DEFAULT 0 CHECK (cost_usd >= 0),
    ADD COLUMN turns             integer NOT NULL DEFAULT 0 CHECK (turns >= 0),
    ADD COLUMN tool_calls        integer NOT NULL DEFAULT 0 CHECK (tool_calls >= 0),
    ADD COLUMN refusals          integer NOT NULL DEFAULT 0 CHECK (refusals >= 0 AND refusals <= tool_calls),
    -- done | max_turns | max_tool_calls | max_output_tokens | max_cost_usd | daily_cap |
    -- repeated_call | context_window | gate | escalated | error | aborted; NULL for a harness-only wake
    ADD COLUMN stop_reason       text,
    ADD COLUMN final_text        text,
    ADD COLUMN escalation_cause  text,
    ADD CONSTRAINT wake_introspection_escalation_cause CHECK ((trigger = 'escalation') = (escalation_cause IS NOT NULL));
