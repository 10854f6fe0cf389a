-- A human's message that came in through the daemon's inbox keeps the idempotency key its sender
-- (a relay for Telegram, Slack, mail) gave it: one row per (agent, key), however often the sender
-- retries; a second request with the key is refused and stores nothing.
ALTER TABLE human_contact ADD COLUMN idempotency_key text CHECK (idempotency_key IS NULL OR length(idempotency_key) BETWEEN 1 AND 200);
CREATE UNIQUE INDEX human_contact_idempotency ON human_contact (agent_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
