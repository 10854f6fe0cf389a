"""The agent's memory: a git repository of markdown files with YAML frontmatter, and the
Cloister canary that audits every change to it.

Lower layer: nothing here imports `wake` or `surfaces`. `config` holds the plain, frozen settings;
`paths` and `frontmatter` are the rules a write must pass before it is committed; `repo` is the
repository itself (one commit per write); `cloister` audits what changed since the last audit;
`ledger` records writes and findings in PostgreSQL under the wake's fence; `render` turns both
into the `memory` and `cloister` arrival blocks.
"""
