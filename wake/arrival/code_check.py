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

from codecheck import typed_anchors, verify, workspace
from ledgers import fact_checks, facts
from untrusted import spotlight
from wake import logs
from wake.arrival.engine import clip
from wake.config import Config
from wake.context import WakeContext

log = logs.get("wake.verify")
LABEL_CHARS = 300  # a verdict's evidence on a fact's line is clipped to this
READ_FACTOR = 4    # with a workspace the block reads this many times the facts it shows

# The process's workspaces: one `Workspace` per repository and TTL, whose HEAD and fingerprints
# every wake of the process shares (the daemon warms them at start).
WORKSPACES = workspace.PROCESS


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
    verify.warm()  # the check's imports, before any budget's clock starts
    try:
        await ws.fingerprint_within(timeout_s)
    except workspace.WorkspaceError:
        pass  # the facts block says "could not check: ..." for it


def has_code_anchors(stored: Any) -> bool:
    """Whether a fact's stored anchors include a code anchor (an `absent` wraps one)."""
    return any(isinstance(a, dict) and a.get("type") in (*typed_anchors.CODE_TYPES, typed_anchors.ABSENT) for a in stored or ())


@dataclass(frozen=True, kw_only=True)
class Checked:
    """The facts block's rows after the check (the window: the newest live facts that survive it,
    with their chains), the verdict of each live fact read, and the counts the header gives."""

    rows: list[facts.ArrivalFact]
    verdicts: dict[uuid.UUID, verify.Verdict] = field(default_factory=dict)
    head: str | None = None
    elapsed_ms: float = 0.0
    refuted: int = 0            # live facts read and left out, refuted at HEAD
    not_reached: int = 0        # live facts the budget did not reach (shown, marked so)
    shown: frozenset[uuid.UUID] = frozenset()

    def count(self, status: str) -> int:
        """How many shown facts have that verdict (refuted: how many were left out)."""
        if status == verify.REFUTED:
            return self.refuted
        return sum(1 for k, v in self.verdicts.items() if k in self.shown and v.status == status)

    def summary(self) -> str:
        """`code anchors checked at HEAD 1a2b3c4d: 2 verified, 1 partly anchored (not settled), 1 refuted (left out),
        1 inconclusive (1 with no code anchor)` (the partly anchored part only when there are some)."""
        if not self.verdicts:
            return ""
        at = f" at HEAD {self.head[:8]}" if self.head else ""
        bare = sum(1 for k, v in self.verdicts.items() if k in self.shown and v.evidence == verify.NO_CODE_ANCHOR)
        reached = f", {self.not_reached} not reached within the budget" if self.not_reached else ""
        partly = self.count(verify.PARTLY)
        return (f"code anchors checked{at}: {self.count(verify.VERIFIED)} verified, "
                + (f"{partly} partly anchored (not settled), " if partly else "")
                + f"{self.count(verify.REFUTED)} refuted (left out), {self.count(verify.INCONCLUSIVE)} inconclusive"
                + (f" ({bare} with no code anchor)" if bare else "") + reached)


def window(rows: Sequence[facts.ArrivalFact], verdicts: dict[uuid.UUID, verify.Verdict], shown: int) -> list[facts.ArrivalFact]:
    """The newest `shown` live facts that are not refuted, each with its supersession chain: a
    refuted fact takes no place, so an older one that survives the check takes it."""
    kept: list[facts.ArrivalFact] = []
    heads = 0
    keeping = False
    for r in rows:
        if r.depth == 0:
            verdict = verdicts.get(r.fact_id)
            keeping = heads < shown and not (verdict is not None and verdict.status == verify.REFUTED)
            heads += keeping
        if keeping:
            kept.append(r)
    return kept


def read_limit(ctx: WakeContext, shown: int) -> int:
    """How many live facts the block reads to fill `shown` places: with a workspace, `READ_FACTOR`
    times as many, so that refuted ones leave room for older facts that survive the check."""
    return shown * READ_FACTOR if workspace_of(ctx.config, ctx.agent_id) is not None else shown


async def _refuted_before(ctx: WakeContext, head: str, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    async with ctx.stores.pg_conn() as conn:
        return await fact_checks.refuted_at(conn, ctx.agent_id, head, ids)


async def check(ctx: WakeContext, rows: list[facts.ArrivalFact], shown: int) -> Checked:
    """Check the live facts' code anchors within the agent's budget and choose the window after
    it; leave the recording for the wake's row (`WakeContext.with_row`: `fact_checks` names the
    wake, so it is written in the transaction that inserts the wake's row; a dry run inserts none
    and records nothing). A fact whose latest check refuted it at this HEAD is not checked again
    (a fingerprint, and so a verdict, is fixed per HEAD); a fact with no code anchor is
    inconclusive, `no code anchor`, and nothing is recorded for it."""
    ws = workspace_of(ctx.config, ctx.agent_id)
    if ws is None:  # verify-on-read is the agent's when it has a workspace
        return Checked(rows=window(rows, {}, shown))
    heads = [r for r in rows if r.depth == 0]
    anchored = [r for r in heads if has_code_anchors(r.anchors)]

    async def known(head: str) -> dict[int, verify.Verdict]:
        before = await _refuted_before(ctx, head, [r.fact_id for r in anchored])
        return {i: _refuted_before_verdict(head) for i, r in enumerate(anchored) if r.fact_id in before}

    result = await verify.check(ws, [(r.anchors, r.fact_value) for r in anchored], budget_ms=ctx.agent.verify.budget_ms,
                                known=known)
    verdicts = {r.fact_id: v for r, v in zip(anchored, result.verdicts, strict=True)}
    bare = verify.Verdict(status=verify.INCONCLUSIVE, evidence=verify.NO_CODE_ANCHOR, head=result.head)
    verdicts |= {r.fact_id: bare for r in heads if r.fact_id not in verdicts}
    kept = window(rows, verdicts, shown)
    made = {r.fact_id: v for i, (r, v) in enumerate(zip(anchored, result.verdicts, strict=True))
            if i not in result.known and not v.evidence.startswith("not reached within")}
    checked = Checked(rows=kept, verdicts=verdicts, head=result.head, elapsed_ms=result.elapsed_ms,
                      refuted=sum(1 for v in verdicts.values() if v.status == verify.REFUTED),
                      not_reached=sum(1 for r in kept if r.depth == 0 and verdicts[r.fact_id].evidence.startswith("not reached")),
                      shown=frozenset(r.fact_id for r in kept if r.depth == 0))

    async def write(conn: asyncpg.Connection) -> None:
        await record(ctx, made, conn)

    ctx.with_row.append(write)
    log.info("facts.checked", agent=ctx.agent_id, head=result.head, verified=checked.count(verify.VERIFIED),
             partly=checked.count(verify.PARTLY), refuted=checked.refuted, inconclusive=checked.count(verify.INCONCLUSIVE), known=len(result.known),
             not_reached=checked.not_reached, elapsed_ms=round(result.elapsed_ms, 2))
    return checked


def _refuted_before_verdict(head: str) -> verify.Verdict:
    return verify.Verdict(status=verify.REFUTED, evidence="refuted at this HEAD by an earlier check", head=head)


async def record(ctx: WakeContext, verdicts: dict[uuid.UUID, verify.Verdict], conn: asyncpg.Connection) -> int:
    """Record the checks (a refuted one writes its retraction, once per fact and cause); returns
    how many retractions are new."""
    new = 0
    for fact_id, verdict in verdicts.items():
        done = await fact_checks.record(conn, agent_id=ctx.agent_id, fact_id=fact_id, verdict=verdict, checked_at=ctx.now,
                                        wake_id=ctx.wake_id, maturity_days=ctx.settings.falsifier_maturity_days)
        new += done.new_retraction
    log.info("facts.recorded", agent=ctx.agent_id, checks=len(verdicts), new_retractions=new)
    return new


def verdict_mark(verdict: verify.Verdict) -> str:
    """The one rendering of a verdict on a fact's line: the harness's mark, ` ⟦verified @1a2b3c4d⟧`,
    ` ⟦inconclusive (no code anchor)⟧` (its evidence clipped; the computation is `codecheck.verify`'s)."""
    return spotlight.mark(clip(verdict.label(), LABEL_CHARS))


def label(row: facts.ArrivalFact, checked: Checked) -> str:
    """What a live fact's line carries after its passport: its verdict's mark, or nothing for a
    predecessor in a chain or an agent with no workspace."""
    verdict = checked.verdicts.get(row.fact_id) if row.depth == 0 else None
    return f" {verdict_mark(verdict)}" if verdict is not None else ""


def line(row: facts.ArrivalFact, checked: Checked, marks: spotlight.Marks) -> str:
    """A fact's line in the block (its key, value and anchors marked data, each cut to its
    length: `facts.render_line`), then its verdict."""
    return facts.render_line(row, marks) + label(row, checked)
