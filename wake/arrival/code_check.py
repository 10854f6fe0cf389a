"""Verify-on-read in the facts block: each live fact's code anchors checked against the agent's
workspace at git HEAD (`codecheck.verify`), once per retrieval, within `agents.<id>.verify.budget_ms`.

A refuted fact (and the chain under it) leaves the arrival; a verified or inconclusive one keeps
its line with the verdict's label appended; a fact with no code anchors, or any fact of an agent
with no `agents.<id>.workspace`, renders as it always did and is not checked. Every check is recorded in `fact_checks` in the fenced transaction that
inserts the wake's row (a refuted one writes its retraction, once per fact and HEAD); a dry run
checks and records nothing. A workspace that cannot be fingerprinted makes every check inconclusive, never verified.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from codecheck import anchors as anchors_mod
from codecheck import verify, workspace
from ledgers import fact_checks
from wake import logs
from wake.arrival.engine import clip
from wake.config import Config
from wake.context import WakeContext

log = logs.get("wake.verify")
LABEL_CHARS = 300  # a verdict's evidence on a fact's line is clipped to this

# The process's workspaces: one `Workspace` per repository and TTL, whose HEAD and fingerprints
# every wake of the process shares (the daemon warms them at start).
WORKSPACES = workspace.Workspaces()


def workspace_of(config: Config, agent_id: str, workspaces: workspace.Workspaces | None = None) -> workspace.Workspace | None:
    """The agent's workspace (`agents.<id>.workspace`), or None when it has none."""
    path = config.workspace_path(agent_id)
    if path is None:
        return None
    return (workspaces or WORKSPACES).get(path, head_ttl_s=config.agents[agent_id].verify.head_ttl_s)


async def warmed(config: Config, agent_id: str, timeout_s: float) -> None:
    """Build the agent's workspace fingerprint now, waiting at most `timeout_s` (a one-shot wake in
    a fresh process, `wake up`, would otherwise find it cold and every check inconclusive). A
    workspace that cannot be read is left for the check to report."""
    ws = workspace_of(config, agent_id)
    if ws is None:
        return
    try:
        await ws.fingerprint_within(timeout_s)
    except workspace.WorkspaceError:
        pass  # the facts block says "could not check: ..." for it


def has_code_anchors(stored: Any) -> bool:
    """Whether a fact's stored anchors include a code anchor (an `absent` wraps one)."""
    return any(isinstance(a, dict) and a.get("type") in (*anchors_mod.CODE_TYPES, anchors_mod.ABSENT) for a in stored or ())


@dataclass(frozen=True, kw_only=True)
class Checked:
    """The facts block's rows after the check, the verdict of each checked live fact, the counts."""

    rows: list[dict[str, Any]]
    verdicts: dict[uuid.UUID, verify.Verdict] = field(default_factory=dict)
    head: str | None = None
    elapsed_ms: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for v in self.verdicts.values() if v.status == status)

    def summary(self) -> str:
        """`code anchors checked at HEAD 1a2b3c4d: 2 verified, 1 refuted (left out), 1 inconclusive`."""
        if not self.verdicts:
            return ""
        at = f" at HEAD {self.head[:8]}" if self.head else ""
        return (f"code anchors checked{at}: {self.count(verify.VERIFIED)} verified, "
                f"{self.count(verify.REFUTED)} refuted (left out), {self.count(verify.INCONCLUSIVE)} inconclusive")


def without_refuted(rows: Sequence[dict[str, Any]], verdicts: dict[uuid.UUID, verify.Verdict]) -> list[dict[str, Any]]:
    """The rows with every refuted live fact and its supersession chain left out."""
    kept: list[dict[str, Any]] = []
    dropping = False
    for r in rows:
        if r["depth"] == 0:
            verdict = verdicts.get(r["fact_id"])
            dropping = verdict is not None and verdict.status == verify.REFUTED
        if not dropping:
            kept.append(r)
    return kept


async def check(ctx: WakeContext, rows: list[dict[str, Any]]) -> Checked:
    """Check the live facts' code anchors within the agent's budget, and leave their recording for
    the wake's row (`WakeContext.with_row`: `fact_checks` names the wake, so it is written in the
    transaction that inserts the wake's row; a dry run inserts none and records nothing)."""
    ws = workspace_of(ctx.config, ctx.agent_id)
    heads = [r for r in rows if r["depth"] == 0 and has_code_anchors(r["anchors"])]
    if ws is None or not heads:  # verify-on-read is the agent's when it has a workspace
        return Checked(rows=rows)
    result = await verify.check(ws, [(r["anchors"], r["fact_value"]) for r in heads], budget_ms=ctx.agent.verify.budget_ms)
    verdicts = {r["fact_id"]: v for r, v in zip(heads, result.verdicts, strict=True)}
    checked = Checked(rows=without_refuted(rows, verdicts), verdicts=verdicts, head=result.head, elapsed_ms=result.elapsed_ms)

    async def write(conn: asyncpg.Connection) -> None:
        await record(ctx, verdicts, conn)

    ctx.with_row.append(write)
    log.info("facts.checked", agent=ctx.agent_id, head=result.head, verified=checked.count(verify.VERIFIED),
             refuted=checked.count(verify.REFUTED), inconclusive=checked.count(verify.INCONCLUSIVE),
             elapsed_ms=round(result.elapsed_ms, 2))
    return checked


async def record(ctx: WakeContext, verdicts: dict[uuid.UUID, verify.Verdict], conn: asyncpg.Connection) -> int:
    """Record the checks (a refuted one writes its retraction, once per fact and HEAD); returns
    how many retractions are new."""
    new = 0
    for fact_id, verdict in verdicts.items():
        done = await fact_checks.record(conn, agent_id=ctx.agent_id, fact_id=fact_id, verdict=verdict, checked_at=ctx.now,
                                        wake_id=ctx.wake_id, maturity_days=ctx.settings.falsifier_maturity_days)
        new += done.new_retraction
    log.info("facts.recorded", agent=ctx.agent_id, checks=len(verdicts), new_retractions=new)
    return new


def label(row: dict[str, Any], checked: Checked) -> str:
    """What a live fact's line carries after its passport: ` {verified @1a2b3c4d}`, or nothing
    for a fact that was not checked (a predecessor in a chain, or no code anchors)."""
    verdict = checked.verdicts.get(row["fact_id"]) if row["depth"] == 0 else None
    return f" {{{clip(verdict.label(), LABEL_CHARS)}}}" if verdict is not None else ""
