"""The code check behind verify-on-read (docs/verify.md): a fact's typed anchors checked against
the agent's workspace at its HEAD commit, never against a working tree.

The lowest layer with `memory`: nothing here imports `wake`, `surfaces` or `ledgers`, and it runs
no SQL. `fingerprint` reads a commit's tree into the index a check needs (modules, symbols,
imports, dependencies); `builds` and `build_worker` build one, in a worker process by default;
`workspace` keeps it per HEAD; `anchors` are the typed claims a fact can carry; `verify` decides
each one (verified, refuted or inconclusive). Verdicts are stored by `ledgers.fact_checks`.
"""
