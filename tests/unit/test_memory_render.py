"""The memory and cloister arrival blocks: a tree with descriptions, cut at a size with the exact
total; open findings HALT first with the notice that stops the model."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from ledgers import memory_ledger
from memory.repo import Entry
from tests.support.memory_git import doc, open_repo, requires_git, write
from untrusted import spotlight as marks
from wake.arrival import memory_render as render

d = marks.OPERATOR.span  # a stored string as these blocks mark it


@requires_git
def test_the_memory_block_is_a_tree_with_descriptions_system_first(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    write(repo, "reference/plants/tomato.md", doc("How I grow tomatoes", "Water.\n", read_only="true"))
    block = render.memory_block(repo.ls(), head=repo.head())
    lines = block.text.splitlines()
    assert block.shown == block.total == 7
    assert lines[0].startswith("memory: 7 files, ") and (repo.head() or "")[:12] in lines[0] and "showing" not in lines[0]
    assert lines[1] == f"{d('system')}/"
    assert f"  {d('persona')}/" in lines
    assert f"    {d('persona.md')} — {marks.OPERATOR.opening}Who I am: my identity, principles and scope." in "\n".join(lines)
    assert f"  {d('plants')}/" in lines
    assert any(line.startswith(f"    {d('tomato.md')} — {d('How I grow tomatoes')} (") and line.endswith(", read-only)") for line in lines)
    assert lines.index(f"{d('reference')}/") > lines.index(f"{d('system')}/")


def test_the_memory_block_is_cut_at_its_size_and_says_how_many_it_left_out() -> None:
    entries = [Entry(path=f"reference/n{i:04d}.md", description=f"note {i} " + "x" * 50, bytes=100, read_only=False) for i in range(1000)]
    block = render.memory_block(entries, head=None, max_chars=2000)
    assert len(block.text) <= 2000
    assert block.total == 1000 and 0 < block.shown < 1000
    assert block.text.splitlines()[0] == f"memory: 1000 files, 97.7 KB (showing {block.shown} of 1000)"
    assert block.text.splitlines()[-1].startswith(f"… {1000 - block.shown} more files not shown")
    assert sum(1 for line in block.text.splitlines() if f" — {marks.OPERATOR.opening}note " in line) == block.shown


def _row(i: int, severity: str, rule: str = "bypass.commit") -> memory_ledger.OpenFinding:
    return memory_ledger.OpenFinding(
        finding_id=i, severity=severity, domain="persona", path="system/persona/persona.md", commit_id="a" * 40 if i % 2 else None,
        rule=rule, excerpt="line one\n+line two\n" * 5, at=dt.datetime(2026, 5, 6, 21, 0, tzinfo=dt.UTC),
    )


def test_the_cloister_block_shows_halt_first_and_the_notice() -> None:
    rows = [_row(1, "HALT", "fields.changed"), _row(2, "WARN", "journal.rewritten")]
    block = render.cloister_block(rows, total=2, counts={"HALT": 1, "WARN": 1, "LOG": 4})
    lines = block.text.splitlines()
    assert lines[0] == "cloister: 1 HALT, 1 WARN, 4 LOG open"
    assert lines[1] == f"⟦HALT #1 persona⟧ {d('system/persona/persona.md')}: {d('fields.changed')} in {'a' * 12}, 2026-05-06 21:00 UTC"
    assert f"⟦WARN #2 persona⟧ {d('system/persona/persona.md')}: {d('journal.rewritten')} (uncommitted), 2026-05-06 21:00 UTC" in lines
    assert sum(1 for line in lines if line.startswith(f"    {marks.OPERATOR.opening}")) == 2 * render.EXCERPT_LINES
    assert lines[-1] == render.HALT_NOTICE and (block.shown, block.total) == (2, 2)
    warn_only = render.cloister_block(rows[1:], total=1, counts={"WARN": 1})
    assert render.HALT_NOTICE not in warn_only.text


def test_the_cloister_block_is_cut_with_the_exact_total_and_empty_says_so() -> None:
    rows = [_row(i, "WARN") for i in range(50)]
    block = render.cloister_block(rows, total=75, counts={"WARN": 75}, max_chars=1500)
    assert len(block.text) <= 1500 and 0 < block.shown < 50
    assert block.text.splitlines()[0] == f"cloister: 0 HALT, 75 WARN, 0 LOG open (showing {block.shown} of 75)"
    empty = render.cloister_block([], total=0, counts={})
    assert (empty.text, empty.shown, empty.total) == ("cloister: no open findings", 0, 0)
