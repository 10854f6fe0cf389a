-- The newest fencing token seen per agent. A write made under an older fence is refused
-- (DESIGN step 3): the check runs in the writing transaction and locks this row, so a newer
-- holder's advance waits until the older write has committed or rolled back.
CREATE TABLE agent_fences (
    agent_id   text PRIMARY KEY,
    fence      bigint NOT NULL CHECK (fence > 0)
);
