"""The operator console: a small web application over the ledgers (docs/console.md).

`wake console` serves it; so does `wake daemon` when `[console] listen` is set. Its reads go
through `wake.console.data` (the ledger functions the CLI calls), its actions through
`wake.console.form_actions` (the CLI's code paths), its safety is `wake.console.guard`, and its pages
are the Jinja2 templates beside this file."""
