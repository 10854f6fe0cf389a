"""Ledgers: SQL migrations and one module per ledger. Uses neither `wake` nor `surfaces`."""
