"""The `wake` commands as a table: each command's name, the module and attribute that define it, and
the one line `wake --help` lists for it. The group reads the table, so `wake --help` and
`wake --version` import no command, and a command imports its module (and the steps that module
uses) only when it runs or its own `--help` is asked for. A unit test holds the table to the
commands themselves (the same lines, every command of `wake.cli` listed), so it cannot drift."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click


@dataclass(frozen=True)
class Entry:
    target: str  # "module:attribute", the click command
    help: str  # the command's short help: the first sentence of its docstring, as click cuts it

    def load(self) -> click.Command:
        module, _, attribute = self.target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command), self.target
        return command


COMMANDS: Mapping[str, Entry] = {
    "actions": Entry(
        "wake.cli.actions:actions_cmd",
        "The agent's confirmed mutating actions (`last_actions`), newest first, with their total: each successful call of a tool "
        "declared `mutates`, its surface, arguments, wake and fence.",
    ),
    "approvals": Entry(
        "wake.cli.approvals:approvals_group",
        "Tool calls that wait for an operator: pending (a decision is due), approved (they run at the agent's next wake that holds "
        "the tool) and running, and those this listing found past `[tools] approval_ttl` and expired; `--all` adds the decided, "
        "expired and finished ones.",
    ),
    "at": Entry("wake.cli.controls:at_cmd", "Ask for one wake at WHEN (an ISO time, HH:MM or a duration from now)."),
    "console": Entry(
        "wake.cli.console:console_cmd",
        "Serve the operator console: the timeline, each wake, each agent, and the operator's actions, until Ctrl-C or SIGTERM.",
    ),
    "costs": Entry(
        "wake.cli.costs:costs_cmd",
        "What the wakes cost, from the ledger: tokens, turns and cost per day, tier or agent, the wakes by outcome (silent ones "
        "too), those that made no model call, and the daily caps' headroom.",
    ),
    "daemon": Entry("wake.cli.daemon:daemon_cmd", "Run the scheduler: every agent's tiers on their schedules, until SIGTERM (docs/daemon.md)."),
    "demo": Entry("wake.cli.ledger:demo_group", "Demo data and a demo wake for a first look."),
    "diff": Entry("wake.cli.wakes:diff_cmd", "Diff two wakes' tools and blocks."),
    "doctor": Entry("wake.cli.install:doctor_cmd", "Check the config, each store's reachability and latency, the schema and the versions."),
    "engines": Entry(
        "wake.cli.engines:engines_group",
        "The embedded engines (no DSN configured): they linger engines.idle_s after the last command.",
    ),
    "eval": Entry(
        "wake.cli.replay:eval_cmd",
        "Replay a selection of recorded wakes against a candidate and score each pair without a judge; exit 1 when a check regresses.",
    ),
    "facts": Entry(
        "wake.cli.ledger:facts_cmd",
        "The agent's facts with their whole passports, newest first (active and superseded; --all for every status).",
    ),
    "incidents": Entry(
        "wake.cli.incidents:incidents_group",
        "Open incidents: a tier's failing rows of one error signature, counted, each with its first and last wake; `--all` adds "
        "closed ones.",
    ),
    "ledger": Entry("wake.cli.wakes:ledger_cmd", "A table of recent wakes: time, agent, tier, trigger, status, tools, duration, root prefix."),
    "logs": Entry("wake.observe.logread:logs_command", "Read wake's JSON logs from FILE or stdin and show them as a terminal would, filtered."),
    "model": Entry(
        "wake.cli.model:model_group",
        "The embedded model: llama-server and SmolLM2-135M in the user's cache, for a route of `kind = \"embedded\"` and `wake demo wake`.",
    ),
    "mcp": Entry("wake.cli.mcp_serve:mcp_group", "wake as an MCP server: the ledgers of one agent, read-only, for a chat surface."),
    "memory": Entry("wake.cli.memory:memory_group", "The agent's memory repository and its Cloister findings."),
    "migrate": Entry(
        "wake.cli.install:migrate_cmd",
        "Apply pending database migrations (safe to run concurrently), and, when Neo4j is configured, create the graph's missing "
        "constraints and indexes (idempotent).",
    ),
    "outbox": Entry(
        "wake.cli.controls:outbox_cmd",
        "Deliveries not delivered yet: pending (with their attempts and next try) and dead (with the last error).",
    ),
    "pause": Entry(
        "wake.cli.controls:pause_cmd",
        "Pause an agent (or one of its tiers): its slots and one-shots are recorded `skipped` (reason `paused`) on every replica "
        "until `wake resume` or --until.",
    ),
    "probe": Entry("wake.cli.epistemic:probe_cmd", "Probe a claim about a file, record it, print the verdict and evidence."),
    "probes": Entry("wake.cli.epistemic:probes_cmd", "Recent claim-probe records, newest first."),
    "registry": Entry("wake.cli.up:registry_cmd", "The capability map: every tool, its surfaces, which tiers bind it, counts, inert declarations."),
    "replay": Entry(
        "wake.cli.replay:replay_group",
        "Replay a recorded wake against a candidate (route, instructions, config); nothing is written to the agent's ledgers.",
    ),
    "resume": Entry("wake.cli.controls:resume_cmd", "Lift an agent's pauses; its next slots run as scheduled."),
    "retract": Entry("wake.cli.epistemic:retract_cmd", "Record a retraction with its typed falsifier."),
    "retractions": Entry("wake.cli.epistemic:retractions_cmd", "The retraction ledger, newest corrections first, with the exact total."),
    "settle": Entry(
        "wake.cli.ledger:settle_cmd",
        "Record the agent's latest settled state (the `settled_state` table): the first line of its settled-facts block from the "
        "next wake on.",
    ),
    "show": Entry("wake.cli.wakes:show_cmd", "Show everything recorded about one wake or one stored replay (an id or a unique prefix)."),
    "status": Entry("wake.cli.daemon:status_cmd", "Live daemon replicas, the wakes running now, the leases held, the next fire per agent and tier."),
    "tell": Entry("wake.cli.ledger:tell_cmd", "Record a message from a human to the agent, verbatim (human_contact)."),
    "tools": Entry(
        "wake.cli.tools:tools_group", "MCP tool pins and toxic flows: the findings a changed declaration or a binding raised, and accepting one.",
    ),
    "trigger": Entry(
        "wake.cli.daemon:trigger_cmd",
        "Ask the running daemon, through Redis, to run a wake now; print its id and wait for the outcome.",
    ),
    "up": Entry("wake.cli.up:up_cmd", "Run one wake now, in this process (trigger `manual`), and print what it saw and held."),
    "verify": Entry(
        "wake.cli.up:verify_cmd",
        "Recompute a wake's block and tool hashes from their stored content, then its root, and name every part that differs; or,"
        " with --chain, walk the hash chain and check every anchored head (with --anchor, anchor the heads first).",
    ),
    "workspace": Entry("wake.cli.workspace:workspace_group", "The agent's workspace: the git repository its facts are checked against."),
}


# The commands that serve until stopped: their logs are their output, at the configured level on
# a terminal too; every other command is one-shot, and logs at warning on a terminal unless -v.
SERVERS = frozenset({"daemon", "console", "mcp"})
# the commands that run wakes, and so trace them when the OTEL_* variables ask (docs/traces.md)
TRACED = frozenset({"daemon", "up"})


class LazyGroup(click.Group):
    """A click group whose commands are `COMMANDS`: listed from the table, loaded when resolved."""

    def __init__(self, *args: Any, table: Mapping[str, Entry] = COMMANDS, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.table = table

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.table})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.table:
            self.add_command(self.table[cmd_name].load(), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, from the table's lines: no command is imported to list it."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, self._short_help(ctx, name, limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def _short_help(self, ctx: click.Context, name: str, limit: int) -> str:
        entry = self.table.get(name)
        if entry is None:  # added by hand (a test's group): click's own line
            command = self.get_command(ctx, name)
            return command.get_short_help_str(limit) if command else ""
        return click.Command(name, help=entry.help).get_short_help_str(limit)  # cut as click cuts a command's own
