"""The canary cannot be wedged by what a hand commit puts in memory: a NUL byte, invalid UTF-8, a
50 MB file, a symlink out of the repository. Each is a finding about its file, stored escaped and
bounded; reverting it (or removing the file) clears it, and the next audit runs."""

from __future__ import annotations

import os
from pathlib import Path

import asyncpg

from ledgers import memory_ledger as ledger
from memory.config import MemoryConfig
from tests.support.memory_git import NOW, doc, git, open_repo, requires_git

pytestmark = requires_git
AGENT = "ani"


def _commit_by_hand(workdir: Path, path: str, data: bytes | None = None, *, link: str | None = None) -> str:
    target = workdir / path
    target.parent.mkdir(parents=True, exist_ok=True)
    if link is not None:
        os.symlink(link, target)
    else:
        assert data is not None
        target.write_bytes(data)
    git(workdir, "add", path)
    git(workdir, "commit", "-q", "-m", f"by hand: {path}")
    return git(workdir, "rev-parse", "HEAD").strip()


async def test_nul_invalid_utf8_a_huge_file_and_a_symlink_out_are_findings_and_a_revert_clears_them(
    conn: asyncpg.Connection, tmp_path: Path,
) -> None:
    config = MemoryConfig()
    repo = open_repo(tmp_path, config)
    await ledger.canary(conn, repo, AGENT, at=NOW)
    persona = (repo.workdir / "system/persona/persona.md").read_bytes()
    nul = _commit_by_hand(repo.workdir, "system/persona/persona.md", persona + b"\nidentity: \x00 someone else\n")
    _commit_by_hand(repo.workdir, "reference/latin1.md", doc("café").encode("utf-8") + b"caf\xe9 \xff\xfe\n")
    _commit_by_hand(repo.workdir, "reference/big.md", doc("big").encode() + b"x" * 80 + b"\n" + b"y" * (50 * 1024 * 1024))
    _commit_by_hand(repo.workdir, "reference/passwd.md", link="/etc/passwd")

    result = await ledger.canary(conn, repo, AGENT, at=NOW)
    rows, _ = await ledger.findings(conn, AGENT, state=None, limit=100)
    by_path = {r.path for r in rows}
    assert {"system/persona/persona.md", "reference/latin1.md", "reference/big.md", "reference/passwd.md"} <= by_path
    for row in rows:
        assert "\x00" not in row.excerpt and len(row.excerpt) <= config.excerpt_max_chars
    assert any("\\x00" in r.excerpt for r in rows if r.path == "system/persona/persona.md")
    assert any(r.rule == "file.too_large" and r.path == "reference/big.md" for r in rows)
    assert "root:" not in "".join(r.excerpt for r in rows)  # the link's target is named, never read
    assert result.has_open_halt and await ledger.halt_reason(conn, AGENT) is not None

    # the operator reverts the NUL commit; the HALT is cleared and the next audit runs clean of it
    _, reverted = await ledger.revert_commit(conn, repo, AGENT, nul, by="casey", at=NOW)
    assert reverted
    git(repo.workdir, "rm", "-q", "reference/big.md")
    git(repo.workdir, "commit", "-q", "-m", "by hand: the big file goes")
    after = await ledger.canary(conn, repo, AGENT, at=NOW)
    assert not after.has_open_halt and await ledger.halt_reason(conn, AGENT) is None
    assert b"\x00" not in (repo.workdir / "system/persona/persona.md").read_bytes()
