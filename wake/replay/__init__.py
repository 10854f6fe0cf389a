"""Replay and evaluation (docs/replay.md): a recorded wake's first request rebuilt from the ledger
and its model loop run again against a candidate, stored apart from the agent's ledgers."""
