-- Placeholder so this branch's 0012 applies in order; the lead drops it at merge (other branches own this number).
SELECT 1;
