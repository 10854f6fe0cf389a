"""The memory ledgers in PostgreSQL: `memory_writes`, `cloister_findings`, `cloister_audits`.

A memory write is fenced like every other write a wake makes: in one transaction, the agent's
fence row is locked FOR SHARE and checked (`ledgers.fences.check`), then the git commit is made,
then its `memory_writes` row is inserted. A stale fence raises `StaleFence` before the commit, so
it makes none; a newer lease holder's fence advance waits until this transaction has ended. When
the insert fails (or the task is cancelled there), the commit is taken back off the branch. The
git work runs on the event loop: it takes milliseconds, and it is never interrupted half-way.

Call `write`/`append` as the last statement of the wake's fenced transaction (`ctx.write()`): a
failure after them, in the same transaction, would leave a commit with no row, which the canary
then reports as a bypass.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import asyncpg
import structlog

from ledgers import fences, queries, rows
from memory import cloister, provenance
from memory.config import Severity
from memory.errors import MemoryRefused, NotFound
from memory.repo import MemoryRepo, WriteResult

log = structlog.get_logger("ledgers.memory")

FINDING_STATES = ("open", "acknowledged", "reverted", "logged")


_sql = queries.named("memory")


@dataclass(frozen=True, kw_only=True)
class Writer:
    """Who writes: the agent in a wake (`wake_id`, `fence`, `tier`), or an operator (all None);
    and where the content came from (`memory.provenance`: the model's own text unless said, the
    operator's for an operator)."""

    agent_id: str
    wake_id: uuid.UUID | None
    fence: int | None
    tier: str | None
    source: provenance.Provenance | None = None

    def trailers(self) -> dict[str, str]:
        source = self.source or (provenance.OPERATOR_WRITE if self.tier is None else provenance.Provenance())
        return {
            "Wake-Id": str(self.wake_id) if self.wake_id else "-",
            "Fence": str(self.fence) if self.fence is not None else "-",
            "Tier": self.tier or "operator",
            **source.trailers(),
        }


@dataclass(frozen=True, kw_only=True)
class MemoryWrite(rows.Row):
    """A row of `memory_writes`: one commit the memory tool (or an operator's revert) made."""

    write_id: int
    wake_id: uuid.UUID | None
    fence: int | None
    tier: str | None  # None: an operator
    op: str
    commit_id: str
    path: str
    bytes_before: int
    bytes_after: int
    reason: str
    author: str
    at: dt.datetime


@dataclass(frozen=True, kw_only=True)
class FindingRecord(rows.Row):
    """A row of `cloister_findings`: what the canary found, and what a human did about it."""

    finding_id: int
    severity: str
    domain: str
    path: str  # empty: about the whole repository
    commit_id: str | None  # None: an uncommitted change
    excerpt: str
    rule: str
    fingerprint: str
    state: str  # one of FINDING_STATES
    acked_by: str | None
    note: str | None
    at: dt.datetime
    acted_at: dt.datetime | None


@dataclass(frozen=True, kw_only=True)
class OpenFinding(rows.Row):
    """An open finding (any level) as the cloister block shows it."""

    finding_id: int
    severity: str
    domain: str
    path: str
    commit_id: str | None
    excerpt: str
    rule: str
    at: dt.datetime


@dataclass(frozen=True, kw_only=True)
class AuditMark(rows.Row):
    """The agent's last audited commit (`cloister_audits`): what the next canary starts from."""

    commit_id: str
    audited_at: dt.datetime
    commits: int
    findings: int


@dataclass(frozen=True, kw_only=True)
class WriteRecord:
    write_id: int
    result: WriteResult


@dataclass(frozen=True, kw_only=True)
class CanaryResult:
    audit: cloister.Audit
    recorded: int  # findings new to the ledger (one raised again is kept once)
    has_open_halt: bool
    new: tuple[tuple[int, cloister.Finding], ...] = ()  # (finding_id, finding) of each new one
    open: OpenFindings | None = None  # what a canary that recorded nothing read: the cloister block's rows


async def _fenced_commit(
    conn: asyncpg.Connection, repo: MemoryRepo, writer: Writer, commit: Callable[[], WriteResult], *,
    reason: str, author: str, at: dt.datetime,
) -> WriteRecord:
    async with conn.transaction():  # a savepoint inside the wake's fenced transaction
        if writer.fence is not None:
            await fences.check(conn, writer.agent_id, writer.fence)
        result = commit()
        try:
            write_id = await conn.fetchval(
                _sql("record_write"), writer.agent_id, writer.wake_id, writer.fence, writer.tier, result.op,
                result.commit, result.path, result.bytes_before, result.bytes_after, reason, author, at,
            )
        except BaseException:
            repo.undo(result)
            raise
    return WriteRecord(write_id=int(write_id), result=result)


async def write(
    conn: asyncpg.Connection, repo: MemoryRepo, writer: Writer, *, path: str, content: str, reason: str, at: dt.datetime,
) -> WriteRecord:
    """Replace (or create) `path`: the fence check, one commit and its row, in one transaction."""
    return await _fenced_commit(
        conn, repo, writer,
        lambda: repo.write(path, content, reason=reason, author=writer.agent_id, trailers=writer.trailers(), at=at),
        reason=reason, author=writer.agent_id, at=at,
    )


async def append(
    conn: asyncpg.Connection, repo: MemoryRepo, writer: Writer, *, path: str, text: str, reason: str, at: dt.datetime,
) -> WriteRecord:
    return await _fenced_commit(
        conn, repo, writer,
        lambda: repo.append(path, text, reason=reason, author=writer.agent_id, trailers=writer.trailers(), at=at),
        reason=reason, author=writer.agent_id, at=at,
    )


async def recent_writes(
    conn: asyncpg.Connection, agent_id: str, *, path: str | None = None, limit: int = 20,
) -> tuple[list[MemoryWrite], int]:
    """The newest writes (of `path`) and their exact number."""
    return rows.counted(MemoryWrite, await conn.fetch(_sql("recent_writes"), agent_id, path, limit), limit)


async def known_commits(conn: asyncpg.Connection, agent_id: str, commits: Sequence[str]) -> tuple[set[str], set[str]]:
    """Of `commits`: those the memory tool made, and those an operator made (reverts)."""
    if not commits:
        return set(), set()
    rows = await conn.fetch(_sql("known_commits"), agent_id, list(commits))
    tool = {r["commit_id"] for r in rows if r["op"] != "revert"}
    return tool, {r["commit_id"] for r in rows if r["op"] == "revert"}


# ------------------------------------------------------------------ findings


async def record_findings(
    conn: asyncpg.Connection, agent_id: str, findings: Sequence[cloister.Finding], at: dt.datetime,
) -> list[tuple[int, cloister.Finding]]:
    """Record findings, every level open (a LOG one too: it is shown until a human acknowledges it,
    issue 38; `logged` is the state of LOG findings recorded before); returns those new to the
    ledger with their ids. The canary's one writer of findings."""
    new = []
    for f in findings:
        state = "open"
        value = await conn.fetchval(
            _sql("record_finding"), agent_id, f.severity.value, f.domain, f.path, f.commit, f.excerpt, f.rule,
            f.fingerprint, state, at,
        )
        if value is not None:
            new.append((int(value), f))
    return new


async def findings(
    conn: asyncpg.Connection, agent_id: str, *, state: str | None = "open", limit: int = 50,
) -> tuple[list[FindingRecord], int]:
    """Findings in `state` (None: every state), newest first, and their exact number."""
    if state is not None and state not in FINDING_STATES:
        raise ValueError(f"state must be one of {', '.join(FINDING_STATES)}, got {state!r}")
    return rows.counted(FindingRecord, await conn.fetch(_sql("findings"), agent_id, state, limit), limit)


CLOISTER_SHOWN = 20  # the open findings the cloister block lists


@dataclass(frozen=True, kw_only=True)
class OpenFindings:
    """The open findings as the cloister block shows them (`open_findings`), every level."""

    rows: list[OpenFinding]  # at most the limit, HALT first
    total: int  # the number open: HALT, WARN and LOG
    counts: dict[str, int]  # the number of each, HALT and WARN, counted up to queries.COUNT_READ (above COUNT_CAP: "more than")
    audited_commit: str | None  # the agent's last audited commit, read in the same round trip


def open_view_part(agent_id: str, *, limit: int = CLOISTER_SHOWN) -> queries.Part[OpenFindings]:
    """`open_view`'s read, to run alone or beside other ledgers' (`queries.together`)."""
    return queries.Part(_sql("open_findings"), (agent_id, limit, queries.COUNT_READ), _open_view)


async def open_view(conn: asyncpg.Connection, agent_id: str, *, limit: int = CLOISTER_SHOWN) -> OpenFindings:
    """The open findings, their counts (bounded: `queries.COUNT_CAP`) and the last audited
    commit, in one round trip."""
    return await queries.one(conn, open_view_part(agent_id, limit=limit))


def _open_view(row: asyncpg.Record) -> OpenFindings:
    halts, warns, logs = int(row["cloister_open_halts"]), int(row["cloister_open_warns"]), int(row["cloister_open_logs"])
    return OpenFindings(
        rows=[OpenFinding.from_values(f) for f in row["cloister_open_findings"]], total=halts + warns + logs,
        counts={Severity.HALT.value: halts, Severity.WARN.value: warns, Severity.LOG.value: logs}, audited_commit=row["cloister_audited_commit"],
    )


async def open_findings(conn: asyncpg.Connection, agent_id: str, *, limit: int = CLOISTER_SHOWN) -> tuple[list[OpenFinding], int]:
    """The open findings the cloister block shows (HALT first, then WARN, then LOG), and their exact number."""
    view = await open_view(conn, agent_id, limit=limit)
    return view.rows, view.total


async def open_by_path(conn: asyncpg.Connection, agent_id: str, paths: Sequence[str]) -> dict[str, OpenFinding]:
    """The files of `paths` with an open finding (any level), each with its worst one: what the
    memory tools quarantine (docs/memory.md, "What the model sees of stored text")."""
    return {r["path"]: OpenFinding.from_row(r) for r in await conn.fetch(_sql("open_by_path"), agent_id, list(paths))}


async def open_counts_by_agent(conn: asyncpg.Connection, agent_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """The open findings of every level, counted per agent: each of `agent_ids` (zeros included)
    and any other agent with one open (`wake status`)."""
    counts = {a: {s.value: 0 for s in Severity} for a in agent_ids}
    for r in await conn.fetch(_sql("open_counts_by_agent")):
        counts.setdefault(r["agent_id"], {s.value: 0 for s in Severity})[r["severity"]] = int(r["n"])
    return counts


async def open_counts(conn: asyncpg.Connection, agent_id: str) -> dict[str, int]:
    counts = {s.value: 0 for s in Severity}
    counts.update({r["severity"]: int(r["n"]) for r in await conn.fetch(_sql("open_counts"), agent_id)})
    return counts


async def finding(conn: asyncpg.Connection, agent_id: str, finding_id: int) -> FindingRecord:
    row = await conn.fetchrow(_sql("finding"), agent_id, finding_id)
    if row is None:
        raise NotFound("finding.unknown", f"agent {agent_id} has no finding {finding_id}")
    return FindingRecord.from_row(row)


async def _act(
    conn: asyncpg.Connection, agent_id: str, finding_ids: Sequence[int], state: str, *, by: str, note: str | None, at: dt.datetime,
) -> list[int]:
    if not by.strip():
        raise ValueError("say who acts (by)")
    rows = await conn.fetch(_sql("act"), agent_id, list(finding_ids), state, by, note, at)
    return sorted(int(r["finding_id"]) for r in rows)


async def ack(
    conn: asyncpg.Connection, agent_id: str, finding_ids: Sequence[int], *, by: str, note: str | None = None, at: dt.datetime,
) -> list[int]:
    """Acknowledge open findings; returns the ids that were open (the others are left as they were)."""
    return await _act(conn, agent_id, finding_ids, "acknowledged", by=by, note=note, at=at)


async def mark_reverted(
    conn: asyncpg.Connection, agent_id: str, finding_ids: Sequence[int], *, by: str, note: str | None = None, at: dt.datetime,
) -> list[int]:
    return await _act(conn, agent_id, finding_ids, "reverted", by=by, note=note, at=at)


async def has_open_halt(conn: asyncpg.Connection, agent_id: str) -> bool:
    """Whether the agent's wakes must make no model call and bind no writing tool."""
    return bool(await conn.fetchval(_sql("has_open_halt"), agent_id))


async def revert_finding(
    conn: asyncpg.Connection, repo: MemoryRepo, agent_id: str, finding_id: int, *, by: str, note: str | None = None,
    at: dt.datetime,
) -> tuple[str, WriteRecord | None]:
    """An operator undoes what a finding points at: a commit's change to its file is reverted by a
    new commit (recorded, op `revert`), an uncommitted change is discarded from the work tree.
    The finding is marked reverted in the same transaction. Returns what was done."""
    row = await finding(conn, agent_id, finding_id)
    path, commit_id = row.path, row.commit_id
    if not path:
        raise MemoryRefused(
            "revert.repository",
            f"finding {finding_id} ({row.rule}) is about the whole repository, not one file: inspect it with git, then acknowledge it",
        )
    if row.state not in ("open", "acknowledged"):
        raise MemoryRefused("revert.state", f"finding {finding_id} is {row.state}; only an open or acknowledged finding is reverted")
    async with conn.transaction():
        record: WriteRecord | None = None
        if commit_id is None:
            done = f"{path}: {repo.restore(path)}"
        else:
            reason = f"revert {commit_id[:12]} (finding {finding_id}) by {by}" + (f": {note}" if note else "")
            operator = Writer(agent_id=agent_id, wake_id=None, fence=None, tier=None)
            record = await _fenced_commit(
                conn, repo, operator,
                lambda: repo.revert(commit_id, path, reason=reason, author=by, trailers=operator.trailers(), at=at),
                reason=reason, author=by, at=at,
            )
            done = f"{path}: reverted in {record.result.commit[:12]}"
        await mark_reverted(conn, agent_id, [finding_id], by=by, note=f"{done}" + (f"; {note}" if note else ""), at=at)
    return done, record


async def revert_commit(
    conn: asyncpg.Connection, repo: MemoryRepo, agent_id: str, commit: str, *, by: str, path: str | None = None,
    note: str | None = None, at: dt.datetime,
) -> tuple[WriteRecord, list[int]]:
    """An operator undoes what `commit` did to one file (`path`, or the one file it changed) with a
    new commit, recorded with op `revert`; the open and acknowledged findings about that commit and
    file are marked reverted in the same transaction. Returns the write and those findings' ids."""
    if not by.strip():
        raise ValueError("say who acts (by)")
    target = repo.commit(commit)
    changed = [p for p, _ in MemoryRepo.changed_paths(target)]
    if path is None:
        if len(changed) != 1:
            raise MemoryRefused(
                "revert.path", f"commit {str(target.id)[:12]} changed {len(changed)} files ({', '.join(changed) or 'none'}); name one with --path",
            )
        path = changed[0]
    elif path not in changed:
        raise MemoryRefused("revert.path", f"commit {str(target.id)[:12]} did not change {path}; it changed {', '.join(changed) or 'nothing'}")
    sha = str(target.id)
    reason = f"revert {sha[:12]} by {by}" + (f": {note}" if note else "")
    operator = Writer(agent_id=agent_id, wake_id=None, fence=None, tier=None)
    async with conn.transaction():
        record = await _fenced_commit(
            conn, repo, operator,
            lambda: repo.revert(sha, path, reason=reason, author=by, trailers=operator.trailers(), at=at),
            reason=reason, author=by, at=at,
        )
        done = f"{path}: reverted in {record.result.commit[:12]}" + (f"; {note}" if note else "")
        rows = await conn.fetch(_sql("mark_commit_reverted"), agent_id, sha, path, by, done, at)
    return record, sorted(int(r["finding_id"]) for r in rows)


# ------------------------------------------------------------------ the canary


async def last_audit(conn: asyncpg.Connection, agent_id: str) -> AuditMark | None:
    return rows.one_of(AuditMark, await conn.fetchrow(_sql("last_audit"), agent_id))


async def set_audit(conn: asyncpg.Connection, agent_id: str, commit: str, *, at: dt.datetime, commits: int, findings: int) -> None:
    await conn.execute(_sql("set_audit"), agent_id, commit, at, commits, findings)


async def quiet_canary(conn: asyncpg.Connection, repo: MemoryRepo, agent_id: str) -> CanaryResult | None:
    """The canary of a wake that finds nothing to record: the head is the commit last audited and
    the work tree is clean. One read (`open_view`: the last audited commit and the open findings,
    which the cloister block then shows) and no transaction; None when there is something to
    record (run `canary`)."""
    return quiet_over(await open_view(conn, agent_id), repo)


def quiet_over(view: OpenFindings, repo: MemoryRepo) -> CanaryResult | None:
    """`quiet_canary` over its read made already (`open_view`, which a wake makes with its other reads)."""
    scope = cloister.pending(repo, view.audited_commit)
    if scope.head is None or scope.head != view.audited_commit or scope.commits:
        return None
    result = cloister.audit(repo, scope, set(), set())
    if result.findings:
        return None
    return CanaryResult(audit=result, recorded=0, has_open_halt=view.counts[Severity.HALT.value] > 0, open=view)


async def canary(
    conn: asyncpg.Connection, repo: MemoryRepo, agent_id: str, *, at: dt.datetime, fence: int | None = None,
) -> CanaryResult:
    """Audit everything since the agent's last audited commit and the work tree; record the
    findings and the new last audited commit in one transaction: the caller's when it holds one
    (`run_canary`'s, fenced already), else its own, fenced when `fence` is given.
    Run it (or `quiet_canary` first) at the start of every wake, before the arrival reads memory."""
    async with contextlib.nullcontext() if conn.is_in_transaction() else conn.transaction():
        if fence is not None:
            await fences.check(conn, agent_id, fence)
        last = await last_audit(conn, agent_id)
        scope = cloister.pending(repo, last.commit_id if last else None)
        tool, operator = await known_commits(conn, agent_id, scope.commits)
        result = cloister.audit(repo, scope, tool, operator)
        new = await record_findings(conn, agent_id, result.findings, at)
        if scope.head is not None:
            await set_audit(conn, agent_id, scope.head, at=at, commits=len(scope.commits), findings=len(result.findings))
        halted = await has_open_halt(conn, agent_id)
    return CanaryResult(audit=result, recorded=len(new), has_open_halt=halted, new=tuple(new))


Transaction = Callable[[], contextlib.AbstractAsyncContextManager[asyncpg.Connection]]


# -- the canary as the harness and the memory tool run it: read or audit, then log ----------------


async def run_canary(
    read: Transaction | None, write: Transaction, repo: MemoryRepo, *, agent_id: str, wake_id: uuid.UUID | None, at: dt.datetime,
    found: OpenFindings | None = None,
) -> CanaryResult:
    """Run the Cloister canary: a read (`read`) when nothing changed since its last audit, else
    the audit recorded in `write`'s transaction (fenced, for a wake); then log what it found: one
    `cloister.audited` line, and one `cloister.finding` line per finding new to the ledger.
    `read=None`: something has just changed (a write), so skip the read. `found`: that read made
    already (`open_view`, with the wake's other reads), so not made again."""
    quiet = None
    if found is not None:
        quiet = quiet_over(found, repo)
    elif read is not None:
        async with read() as conn:
            quiet = await quiet_canary(conn, repo, agent_id)
    if quiet is not None:
        result = quiet
    else:
        async with write() as conn:
            result = await canary(conn, repo, agent_id, at=at)
    wake = str(wake_id) if wake_id else None
    for finding_id, f in result.new:
        if f.severity == Severity.LOG:
            log.info("cloister.finding", agent=agent_id, wake_id=wake, finding_id=finding_id, severity=f.severity.value, domain=f.domain,
                     rule=f.rule, path=f.path, commit=f.commit)
        else:
            log.warning("cloister.finding", agent=agent_id, wake_id=wake, finding_id=finding_id, severity=f.severity.value,
                        domain=f.domain, rule=f.rule, path=f.path, commit=f.commit)
    scope = result.audit.range
    log.info(
        "cloister.audited", agent=agent_id, wake_id=wake, head=scope.head, commits=len(scope.commits),
        findings=len(result.audit.findings), new=result.recorded, halted=result.has_open_halt,
    )
    return result


async def halt_reason(conn: asyncpg.Connection, agent_id: str) -> str | None:
    """`cloister HALT #12 fields.changed in system/persona/persona.md` for the oldest open HALT
    (and how many more there are), or None when no HALT is open."""
    return halt_reason_in(await open_view(conn, agent_id, limit=1))


def halt_reason_in(view: OpenFindings) -> str | None:
    """`halt_reason` over the open findings read already (`open_view`: HALT first)."""
    if not view.rows or view.rows[0].severity != Severity.HALT:
        return None
    halts = view.counts[Severity.HALT]
    row = view.rows[0]
    more = f" (and {halts - 1} more HALT)" if halts > 1 else ""
    return f"cloister HALT #{row.finding_id} {row.rule} in {row.path or 'the whole repository'}{more}"
