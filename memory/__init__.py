"""The agent's memory: a git repository of markdown files with YAML frontmatter, and the rules
of the Cloister canary that audits every change to it (docs/memory.md).

The lowest layer with `codecheck`: nothing here imports `wake`, `surfaces` or `ledgers`, and it
runs no SQL. `config` holds the plain, frozen settings; `paths` and `frontmatter` are the rules a
write must pass before it is committed; `layout` is the bootstrap tree; `repo` is the repository
itself (one commit per write); `cloister` is the canary, which audits what changed since the last
audit. Its findings and the writes are recorded in PostgreSQL by `ledgers.memory_ledger`, under
the wake's fence; `wake.arrival.memory_render` turns both into the `memory` and `cloister` blocks.
"""
