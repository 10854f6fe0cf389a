"""The memory tools: `memory` (reads and writes) and `memory_read` (reads only), over the agent's
git-backed memory (the `memory` package, docs/memory.md).

`memory` mutates and is bound from the surface tier up; `memory_read` is bound at every wake tier,
so a whisper reads its memory without being able to change it. Every `write` and `append` is one
commit (author: the agent; trailers Wake-Id, Fence, Tier, and Source with Source-Ref: where its text
came from, `memory.provenance`) made in the wake's fenced transaction
(`ctx.write()`) and recorded in `memory_writes`: a write from a wake whose fence is no longer the
agent's newest makes no commit. The frontmatter and path rules run before the commit; a refusal
is a `ToolInputError` whose message ends in the rule's name (`[frontmatter.description]`).

After every write the Cloister canary audits what changed (the write itself, and anything that
bypassed the tool meanwhile); while a HALT finding is open, writes are refused
(`[cloister.halt]`). The harness runs the same canary at the start of every wake (`ledgers.memory_ledger.run_canary`).
"""

from __future__ import annotations

from typing import Any

import structlog

from ledgers import memory_ledger, memory_sources
from ledgers.errors import StaleFence
from memory import provenance
from memory.errors import MemoryRefused
from memory.repo import MemoryRepo
from surfaces import context_tools
from surfaces.context import ToolContext
from surfaces.conversation import Conversation
from surfaces.errors import ContextToolError, ToolInputError
from surfaces.registry import Tool, tool
from untrusted import spotlight

log = structlog.get_logger("surfaces.memory_tools")

READS = ("read", "ls", "status", "diff", "audit", "search")
WRITES = ("write", "append")
FINDINGS_SHOWN = 20
QUARANTINE_EXCERPT_CHARS = 160  # of a quarantined file's finding, its invisible characters made visible
QUARANTINED = "quarantined: an open Cloister finding; its text is withheld until a human acknowledges the finding (wake memory ack)"

def finding_json(row: memory_ledger.FindingRecord) -> dict[str, object]:
    return {
        "id": row.finding_id, "severity": row.severity, "domain": row.domain, "path": row.path, "commit": row.commit_id,
        "rule": row.rule, "at": row.at.isoformat(), "excerpt": row.excerpt,
    }


# -- reads ----------------------------------------------------------------------------------------


def _repo(ctx: ToolContext) -> MemoryRepo:
    repo = ctx.memory
    if repo is None:
        raise ToolInputError("memory is not available in this wake: it is off for this agent, or its canary could not run [memory.off]")
    return repo


def _need(command: str, **given: str | None) -> None:
    missing = [name for name, value in given.items() if value is None or not str(value).strip()]
    if missing:
        raise ToolInputError(f"{command} needs {' and '.join(missing)}")


async def _status(ctx: ToolContext, repo: MemoryRepo) -> dict[str, object]:
    status = repo.status()
    async with ctx.read() as conn:
        counts = await memory_ledger.open_counts(conn, ctx.agent_id)
    return {
        "head": status.head, "files": status.files, "bytes": status.bytes, "head_attached": status.head_attached,
        "uncommitted": [{"path": c.path, "state": c.state} for c in status.changes],
        "open_findings": {"HALT": counts["HALT"], "WARN": counts["WARN"]},
        # the context window: this wake's pressure, why max_tokens narrowed, the last compaction, the audit
        "context": await context_tools.status(ctx),
    }


async def _audit(ctx: ToolContext, path: str | None) -> dict[str, object]:
    async with ctx.read() as conn:
        last = await memory_ledger.last_audit(conn, ctx.agent_id)
        rows, total = await memory_ledger.findings(conn, ctx.agent_id, state="open", limit=FINDINGS_SHOWN if path is None else 1000)
    if path is not None:
        rows = [r for r in rows if r.path == path]
        total = len(rows)
    return {
        "last_audit": None if last is None else {
            "commit": last.commit_id, "at": last.audited_at.isoformat(), "commits": last.commits, "findings": last.findings,
        },
        "open_findings": total, "findings": [finding_json(r) for r in rows[:FINDINGS_SHOWN]],
    }


async def _read(ctx: ToolContext, command: str, path: str | None, query: str | None) -> object:
    if command == "search" and query is not None and query.strip().startswith("archive:"):
        try:  # a segment the wake's own compaction archived (docs/context.md), not a memory file
            return await context_tools.search(ctx, query)
        except ContextToolError as exc:
            raise ToolInputError(str(exc)) from exc
    repo = _repo(ctx)
    if command == "read":
        _need("read", path=path)
        assert path is not None
        view = repo.read(path)
        held = await _quarantined(ctx, [view.path])
        if view.path in held:
            return quarantine_view(view.path, held[view.path])
        return {"path": view.path, "description": view.description, "bytes": view.bytes, "read_only": view.read_only,
                "commit": view.commit, "text": view.text}
    if command == "ls":
        entries = repo.ls(path or "")
        held = await _quarantined(ctx, [e.path for e in entries])
        return {"dir": path or "", "total": len(entries), "files": [
            {"path": e.path, "description": e.description, "bytes": e.bytes, "read_only": e.read_only} if e.path not in held
            else {"path": e.path, "bytes": e.bytes, "read_only": e.read_only, "quarantined": _finding_kind(held[e.path])}
            for e in entries
        ]}
    if command == "search":
        _need("search", query=query)
        assert query is not None
        hits, total = repo.search(query, path or "")
        held = await _quarantined(ctx, sorted({h.path for h in hits}))
        return {"query": query, "total": total, "hits": [
            {"path": h.path, "line": h.line, "text": h.text} if h.path not in held
            else {"path": h.path, "line": h.line, "quarantined": _finding_kind(held[h.path])} for h in hits
        ]}
    if command == "diff":
        return {"path": path, "diff": await _diff(ctx, repo, path)}
    if command == "status":
        return await _status(ctx, repo)
    return await _audit(ctx, path)


async def _quarantined(ctx: ToolContext, paths: list[str]) -> dict[str, memory_ledger.OpenFinding]:
    """The files of `paths` with an open finding (any level): the model gets their quarantine view, never their text."""
    if not paths:
        return {}
    async with ctx.read() as conn:
        return await memory_ledger.open_by_path(conn, ctx.agent_id, paths)


def _finding_kind(row: memory_ledger.OpenFinding) -> str:
    return f"open {row.severity} finding #{row.finding_id} {spotlight.neutral(row.rule)}"


def quarantine_view(path: str, row: memory_ledger.OpenFinding) -> dict[str, object]:
    """What the memory tools answer for a file with an open finding: its name, the finding's kind and
    a short excerpt of what was flagged (one line, its invisible and control characters shown as
    `<U+XXXX>`): never the file's text or description."""
    return {
        "path": path, "quarantined": True, "note": QUARANTINED,
        "finding": {"id": row.finding_id, "severity": row.severity, "rule": spotlight.neutral(row.rule)},
        "excerpt": spotlight.neutral(spotlight.clipped(row.excerpt or "", QUARANTINE_EXCERPT_CHARS)),
    }


async def _diff(ctx: ToolContext, repo: MemoryRepo, path: str | None) -> str:
    """The last change (of `path`, or the tip), each quarantined file's part replaced by a line saying so."""
    parts = repo.diff_by_path(path)
    held = await _quarantined(ctx, sorted({p for p, _ in parts}))
    text = "".join(diff if p not in held else f"{spotlight.neutral(p)}: {_finding_kind(held[p])}; {QUARANTINED}\n" for p, diff in parts)
    return text or "(no change)"


# -- writes ---------------------------------------------------------------------------------------

HUMAN_MESSAGES = 50  # the newest messages from humans a write is checked against
OWN_TOOLS = frozenset({"memory", "memory_read"})  # reading memory back is not a source: its commits say theirs


def tool_origins(conversation: Conversation | None) -> list[provenance.Origin]:
    """The answers of the tools this wake has called so far (the memory tools' own aside)."""
    if conversation is None:
        return []
    names: dict[str, str] = {}
    found: list[provenance.Origin] = []
    for message in conversation.messages[conversation.base:]:
        for call in message.get("tool_calls") or ():
            names[str(call.get("id"))] = str((call.get("function") or {}).get("name") or "tool")
        if message.get("role") == "tool":
            name = names.get(str(message.get("tool_call_id")), str(message.get("name") or "tool"))
            if name not in OWN_TOOLS:
                text = "\n".join(provenance.strings(message.get("content")))
                found.append(provenance.Origin(source=provenance.TOOL_RESULT, ref=name, text=text))
    return found


async def _provenance(ctx: ToolContext, body: str) -> provenance.Provenance:
    """Where the text a write commits came from (`memory.provenance`): the tools' answers this
    wake, the humans' newest messages, else the model itself."""
    origins = tool_origins(ctx.conversation)
    async with ctx.read() as conn:
        said = await memory_sources.human_messages(conn, ctx.agent_id, HUMAN_MESSAGES)
    origins += [provenance.Origin(source=provenance.HUMAN, ref=f"message {m.message_id}", text=m.body) for m in said]
    return provenance.classify(body, origins)



async def _write(ctx: ToolContext, command: str, path: str | None, content: str | None, text: str | None, reason: str | None) -> object:
    repo = _repo(ctx)
    body = content if command == "write" else text
    _need(command, path=path, **{"content" if command == "write" else "text": body})
    assert path is not None and body is not None
    source = await _provenance(ctx, body)
    writer = memory_ledger.Writer(agent_id=ctx.agent_id, wake_id=ctx.wake_id, fence=ctx.fence, tier=str(ctx.tier), source=source)
    why = (reason or "").strip() or f"{command} by the agent"
    async with ctx.write() as conn:
        if await memory_ledger.has_open_halt(conn, ctx.agent_id):
            raise ToolInputError("a HALT finding is open: memory is not written until a human acts (wake memory ack / revert) [cloister.halt]")
        if command == "write":
            record = await memory_ledger.write(conn, repo, writer, path=path, content=body, reason=why, at=ctx.now)
        else:
            record = await memory_ledger.append(conn, repo, writer, path=path, text=body, reason=why, at=ctx.now)
    done = record.result
    log.info(
        "memory.written", agent=ctx.agent_id, wake_id=str(ctx.wake_id), op=done.op, path=done.path, commit=done.commit,
        bytes_before=done.bytes_before, bytes_after=done.bytes_after, source=list(source.sources), source_refs=list(source.refs),
    )
    answer: dict[str, Any] = {
        "op": done.op, "path": done.path, "commit": done.commit, "bytes_before": done.bytes_before, "bytes_after": done.bytes_after,
        "source": list(source.sources),
    }
    try:
        # just written: no quiet read; the findings and the audit are the control plane, the harness's to write
        result = await memory_ledger.run_canary(None, ctx.harness_write, repo, agent_id=ctx.agent_id, wake_id=ctx.wake_id, at=ctx.now)
    except StaleFence:
        raise
    except Exception as exc:  # the write is made; the next wake's canary audits it
        answer["cloister"] = {"error": f"the canary could not run after this write: {type(exc).__name__}: {exc}"}
        return answer
    answer["cloister"] = {
        "new_findings": [{"id": i, "severity": f.severity.value, "rule": f.rule, "path": f.path} for i, f in result.new],
        "halt": result.has_open_halt,
    }
    if result.has_open_halt:
        answer["cloister"]["note"] = "a HALT finding is open: further memory writes are refused, and the next wakes think only after a human acts"
    return answer


async def _run(
    ctx: ToolContext, allowed: tuple[str, ...], command: str, path: str | None, content: str | None, text: str | None,
    query: str | None, reason: str | None,
) -> object:
    if command not in allowed:
        raise ToolInputError(f"unknown command {command!r}; expected one of {', '.join(allowed)}")
    try:
        if command in WRITES:
            return await _write(ctx, command, path, content, text, reason)
        return await _read(ctx, command, path, query)
    except MemoryRefused as exc:
        log.info("memory.refused", agent=ctx.agent_id, wake_id=str(ctx.wake_id), command=command, path=path, rule=exc.rule)
        raise ToolInputError(str(exc)) from None


# -- the tools ------------------------------------------------------------------------------------

_READ_PROPERTIES: dict[str, object] = {
    "path": {
        "type": "string",
        "description": "A file for read, write, append, diff and audit (e.g. reference/garden.md); a directory for ls and search (default: all).",
    },
    "query": {"type": "string", "description": "search: the text to look for (case-insensitive), line by line."},
}
_WRITE_PROPERTIES: dict[str, object] = {
    "content": {
        "type": "string",
        "description": "write: the whole new file, opening with a YAML frontmatter that has a description "
        "('---\\ndescription: what this file holds\\n---\\n...').",
    },
    "text": {"type": "string", "description": "append: the text to add at the end (a journal entry is headed with its time)."},
    "reason": {"type": "string", "description": "write, append: why, in one line; it goes in the commit message."},
}
_LAYOUT = (
    "Layout: system/persona/ (who you are: identity, principles, scope; a change waits for a human), system/human/, "
    "system/project/, system/state.md (phase, focus), reference/ (anything worth keeping), journal/YYYY-MM-DD.md (appended)."
)


# The tools that write memory: a tier whose memory is read-only (`memory.writable = false`, a
# whisper's default) does not bind them; `memory_read` stays.
WRITING_TOOLS = frozenset({"memory"})


@tool(
    name="memory",
    description="Your long-term memory: markdown files with a frontmatter description, in git. Commands: write PATH CONTENT "
    "(replace or create a file), append PATH TEXT, read PATH, ls [DIR], status, diff [PATH], audit [PATH] (open Cloister "
    "findings), search QUERY (or archive:<wake>-seg-<n>, a segment a compaction archived). Status also gives the context "
    "window's pressure and its audit. Every write is one commit, checked before it is made. " + _LAYOUT,
    parameters={
        "type": "object",
        "properties": {"command": {"type": "string", "enum": [*WRITES, *READS]}, **_READ_PROPERTIES, **_WRITE_PROPERTIES},
        "required": ["command"],
        "additionalProperties": False,
    },
    surfaces={"chat", "wake.surface"},
    mutates=True,
)
async def memory(
    ctx: ToolContext, command: str, path: str | None = None, content: str | None = None, text: str | None = None,
    query: str | None = None, reason: str | None = None,
) -> object:
    return await _run(ctx, (*WRITES, *READS), command, path, content, text, query, reason)


@tool(
    name="memory_read",
    description="Read your long-term memory (markdown files with a frontmatter description, in git) without changing it. "
    "Commands: read PATH, ls [DIR], status (with the context window's pressure and its audit), diff [PATH], audit [PATH] "
    "(open Cloister findings), search QUERY (or archive:<wake>-seg-<n>). " + _LAYOUT,
    parameters={
        "type": "object",
        "properties": {"command": {"type": "string", "enum": list(READS)}, **_READ_PROPERTIES},
        "required": ["command"],
        "additionalProperties": False,
    },
    surfaces={"chat", "wake"},
)
async def memory_read(ctx: ToolContext, command: str, path: str | None = None, query: str | None = None) -> object:
    return await _run(ctx, READS, command, path, None, None, query, None)


TOOLS: tuple[Tool, ...] = (memory, memory_read)
