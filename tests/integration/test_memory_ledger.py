"""The memory ledgers on real PostgreSQL and real git: fenced writes (a stale fence makes no
commit), the canary's findings recorded once, acknowledged and reverted, and the last audited
commit that keeps each audit to what is new."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import asyncpg
import pytest

from ledgers import fences
from ledgers import memory_ledger as ledger
from ledgers.errors import StaleFence
from memory.repo import MemoryRepo
from tests.support.memory_git import NOW, doc, git, open_repo, requires_git

pytestmark = requires_git
AGENT = "ani"


def writer(fence: int | None = 1) -> ledger.Writer:
    return ledger.Writer(agent_id=AGENT, wake_id=uuid.uuid4(), fence=fence, tier="full")


async def fenced_write(conn: asyncpg.Connection, repo: MemoryRepo, who: ledger.Writer, path: str, content: str) -> ledger.WriteRecord:
    async with conn.transaction():
        return await ledger.write(conn, repo, who, path=path, content=content, reason="test", at=NOW)


async def test_a_write_is_one_commit_and_one_row_with_the_wake_on_both(conn: asyncpg.Connection, tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    await fences.advance(conn, AGENT, 1)
    who = writer()
    done = await fenced_write(conn, repo, who, "reference/a.md", doc("a", "one\n"))
    async with conn.transaction():
        appended = await ledger.append(conn, repo, who, path="reference/a.md", text="two", reason="more", at=NOW)
    rows, total = await ledger.recent_writes(conn, AGENT)
    assert total == 2 and [r.commit_id for r in rows] == [appended.result.commit, done.result.commit]
    newest = rows[0]
    assert (newest.wake_id, newest.fence, newest.tier, newest.op, newest.path, newest.author, newest.reason) == (
        who.wake_id, 1, "full", "append", "reference/a.md", AGENT, "more",
    )
    assert newest.bytes_before == done.result.bytes_after and newest.bytes_after == len(repo.read("reference/a.md").text)
    assert newest.at == NOW
    assert (await ledger.recent_writes(conn, AGENT, path="reference/zzz.md")) == ([], 0)
    trailers = git(repo, "log", "-1", "--format=%(trailers:key=Wake-Id,valueonly)%(trailers:key=Fence,valueonly)").split()
    assert trailers == [str(who.wake_id), "1"]


async def test_a_stale_fence_makes_no_commit(conn: asyncpg.Connection, tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    await fences.advance(conn, AGENT, 1)
    await fences.advance(conn, AGENT, 2)  # a newer wake took the lease
    head = repo.head()
    with pytest.raises(StaleFence):
        await fenced_write(conn, repo, writer(fence=1), "reference/a.md", doc("a"))
    assert repo.head() == head and git(repo, "rev-list", "--count", "HEAD").strip() == "1"
    assert git(repo, "status", "--porcelain") == ""
    assert await ledger.recent_writes(conn, AGENT) == ([], 0)
    await fenced_write(conn, repo, writer(fence=2), "reference/a.md", doc("a"))
    assert repo.head() != head


async def test_a_commit_whose_row_cannot_be_kept_is_taken_back(conn: asyncpg.Connection, tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    head = repo.head()
    no_wake = ledger.Writer(agent_id=AGENT, wake_id=None, fence=None, tier="full")  # a write needs its wake
    with pytest.raises(asyncpg.CheckViolationError):
        await fenced_write(conn, repo, no_wake, "reference/a.md", doc("a"))
    assert repo.head() == head and not (repo.workdir / "reference" / "a.md").exists()
    assert git(repo, "status", "--porcelain") == ""


async def _canary(conn: asyncpg.Connection, repo: MemoryRepo, at: dt.datetime = NOW) -> ledger.CanaryResult:
    return await ledger.canary(conn, repo, AGENT, at=at)


async def test_the_canary_records_each_finding_once_and_moves_its_mark(conn: asyncpg.Connection, tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    first = await _canary(conn, repo)
    assert first.audit.findings == () and not first.has_open_halt
    mark = await ledger.last_audit(conn, AGENT)
    assert mark is not None and mark.commit_id == repo.head() and mark.commits == 1 and mark.findings == 0
    assert mark.audited_at == NOW
    await fences.advance(conn, AGENT, 1)
    await fenced_write(conn, repo, writer(), "reference/tool.md", doc("the tool's own"))
    persona = repo.workdir / "system" / "persona" / "persona.md"
    persona.write_text(persona.read_text().replace("## Scope\n\n(not written yet)", "## Scope\n\nAnything."))
    git(repo, "commit", "-q", "-am", "quietly")
    (repo.workdir / "reference" / "stray.md").write_text("untracked")
    second = await _canary(conn, repo)
    assert second.has_open_halt and second.recorded == len(second.audit.findings)
    found = {(f.rule, f.path) for f in second.audit.findings}
    assert found == {("bypass.commit", "system/persona/persona.md"), ("fields.changed", "system/persona/persona.md"),
                     ("worktree.untracked", "reference/stray.md")}
    again = await _canary(conn, repo)
    assert again.recorded == 0 and again.audit.range.commits == ()  # the stray file is the same finding
    rows, total = await ledger.findings(conn, AGENT, state=None)
    assert total == 3
    assert {r.state for r in rows if r.severity == "LOG"} == {"open"}  # every level is open until a human acts (issue 38)
    open_rows, open_total = await ledger.findings(conn, AGENT)
    assert open_total == 3 and {r.severity for r in open_rows} == {"HALT", "LOG"}
    assert await ledger.open_counts(conn, AGENT) == {"HALT": 2, "WARN": 0, "LOG": 1}
    shown, shown_total = await ledger.open_findings(conn, AGENT, limit=1)
    assert shown_total == 3 and len(shown) == 1 and shown[0].severity == "HALT"
    with pytest.raises(ValueError):
        await ledger.findings(conn, AGENT, state="closed")


async def test_ack_clears_the_halt_and_a_journal_edit_is_a_warn_until_acknowledged(conn: asyncpg.Connection, tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    await _canary(conn, repo)
    await fences.advance(conn, AGENT, 1)
    async with conn.transaction():
        await ledger.append(conn, repo, writer(), path="journal/2026-05-06.md", text="first", reason="j", at=NOW)
    text = repo.read("journal/2026-05-06.md").text
    await fenced_write(conn, repo, writer(), "journal/2026-05-06.md", text.replace("first", "rewritten"))
    result = await _canary(conn, repo)
    assert [(f.severity.value, f.rule) for f in result.audit.findings] == [("WARN", "journal.rewritten")]
    assert not result.has_open_halt
    (warn,), _ = await ledger.open_findings(conn, AGENT)
    later = NOW + dt.timedelta(hours=1)
    assert await ledger.ack(conn, AGENT, [warn.finding_id], by="casey", note="a typo fix", at=later) == [warn.finding_id]
    assert await ledger.ack(conn, AGENT, [warn.finding_id], by="casey", at=later) == []  # only open ones
    row = await ledger.finding(conn, AGENT, warn.finding_id)
    assert (row.state, row.acked_by, row.note, row.acted_at) == ("acknowledged", "casey", "a typo fix", later)
    assert await ledger.open_findings(conn, AGENT) == ([], 0)


async def test_an_operator_revert_undoes_the_bypass_and_is_not_itself_a_finding(conn: asyncpg.Connection, tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    await _canary(conn, repo)
    original = repo.read("system/persona/persona.md").text
    (repo.workdir / "system" / "persona" / "persona.md").write_text(doc("someone else", "## Identity\n\nA stranger.\n"))
    git(repo, "commit", "-q", "-am", "become someone else")
    (repo.workdir / "system" / "human" / "human.md").write_text(doc("not the human"))
    assert (await _canary(conn, repo)).has_open_halt
    rows, _ = await ledger.findings(conn, AGENT)
    by_rule = {(r.rule, r.path): r for r in rows}
    bypass = by_rule[("bypass.commit", "system/persona/persona.md")]
    done, record = await ledger.revert_finding(conn, repo, AGENT, bypass.finding_id, by="casey", note="not who she is", at=NOW)
    assert record is not None and record.result.op == "revert" and "reverted in" in done
    assert repo.read("system/persona/persona.md").text == original
    worktree = by_rule[("worktree.modified", "system/human/human.md")]
    done, record = await ledger.revert_finding(conn, repo, AGENT, worktree.finding_id, by="casey", at=NOW)
    assert record is None and "restored" in done and git(repo, "status", "--porcelain") == ""
    assert (await ledger.finding(conn, AGENT, bypass.finding_id)).state == "reverted"
    others = [r.finding_id for r in rows if r.state == "open" and r.finding_id not in (bypass.finding_id, worktree.finding_id)]
    await ledger.ack(conn, AGENT, others, by="casey", note="reverted with the bypass", at=NOW)
    assert not await ledger.has_open_halt(conn, AGENT)
    after = await _canary(conn, repo)
    assert after.audit.findings == () and not after.has_open_halt  # the operator's commit is not audited
    revert_row = (await ledger.recent_writes(conn, AGENT))[0][0]
    assert (revert_row.op, revert_row.wake_id, revert_row.author) == ("revert", None, "casey")


async def test_a_rewritten_history_cannot_be_reverted_file_by_file(conn: asyncpg.Connection, tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    await fences.advance(conn, AGENT, 1)
    await fenced_write(conn, repo, writer(), "reference/a.md", doc("a"))
    await _canary(conn, repo)
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    result = await _canary(conn, repo)
    assert result.has_open_halt
    (row,), _ = await ledger.findings(conn, AGENT)
    assert row.rule == "history.rewritten" and row.commit_id == repo.head()
    with pytest.raises(ledger.MemoryRefused) as refused:
        await ledger.revert_finding(conn, repo, AGENT, row.finding_id, by="casey", at=NOW)
    assert refused.value.rule == "revert.repository"
