-- Reserved for a migration another branch adds; this placeholder keeps the numbers without gaps
-- until it lands, and is replaced by it.
SELECT 1;
