"""The memory repository on real git repositories: the bootstrap layout, one commit per write with
the agent as author and the wake's trailers, reads from the tip, revert, and two processes
writing at once."""

from __future__ import annotations

import datetime as dt
import multiprocessing
from pathlib import Path

import pytest

from memory import frontmatter, layout
from memory.config import MemoryConfig
from memory.errors import ContentRefused, FrontmatterRefused, NotFound
from memory.repo import MemoryRepo
from tests.support.memory_git import NOW, TRAILERS, doc, git, open_repo, requires_git, write

pytestmark = requires_git


def test_a_new_repository_holds_the_layout_every_file_described(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    entries = {e.path: e for e in repo.ls()}
    assert set(entries) == set(layout.bootstrap(MemoryConfig()))
    assert {"system/persona/persona.md", "system/human/human.md", "system/project/project.md", "system/state.md",
            "reference/index.md", "journal/index.md"} == set(entries)
    for path, entry in entries.items():
        assert entry.description, path
        frontmatter.validate(repo.read(path).text)
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"
    assert repo.bootstrapped == repo.head()
    again = MemoryRepo.open(repo.workdir, MemoryConfig(), at=NOW)
    assert again.bootstrapped is None and again.head() == repo.head()


def test_each_write_is_one_commit_by_the_agent_with_the_wake_trailers(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    first = write(repo, "reference/garden.md", doc("the garden", "Tomatoes.\n"))
    second = repo.append("reference/garden.md", "Basil too.", reason="more plants", author="ani", trailers=TRAILERS, at=NOW)
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "3"
    assert second.parent == first and second.bytes_before is not None and second.bytes_after == len(repo.read("reference/garden.md").text)
    shown = git(
        repo, "log", "-1", "--format=%an <%ae>|%cn|%s|%(trailers:key=Wake-Id,valueonly)%(trailers:key=Fence,valueonly)%(trailers:key=Tier,valueonly)"
    )
    who, committer, subject, trailers = shown.strip().split("|", 3)
    assert who == "ani <ani@wake.invalid>" and committer == "wake"
    assert subject == "memory append reference/garden.md: more plants"
    assert trailers.split() == [TRAILERS["Wake-Id"], TRAILERS["Fence"], TRAILERS["Tier"]]
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["reference/garden.md"]
    assert repo.read("reference/garden.md").text.endswith("Tomatoes.\n\nBasil too.\n")
    assert git(repo, "status", "--porcelain") == ""
    git(repo, "fsck", "--strict")


def test_a_commit_is_built_from_the_tip_so_staged_edits_do_not_ride_along(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    (repo.workdir / "reference" / "index.md").write_text(doc("smuggled"))
    git(repo, "add", "reference/index.md")
    commit = write(repo, "reference/honest.md", doc("honest"))
    assert git(repo, "show", "--name-only", "--format=", commit).split() == ["reference/honest.md"]
    assert repo.read("reference/index.md").description != "smuggled"
    assert "M  reference/index.md" in git(repo, "status", "--porcelain")  # still staged, for the canary


def test_reads_come_from_the_tip_not_the_work_tree(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    write(repo, "reference/a.md", doc("committed", "the real text\n"))
    (repo.workdir / "reference" / "a.md").write_text(doc("tampered", "the bypass\n"))
    view = repo.read("reference/a.md")
    assert view.description == "committed" and "the real text" in view.text
    assert [e.description for e in repo.ls("reference") if e.path == "reference/a.md"] == ["committed"]
    assert repo.search("bypass") == ([], 0)
    assert [(c.path, c.state) for c in repo.changes()] == [("reference/a.md", "modified")]
    assert "+the bypass" in repo.diff(worktree=True)


def test_journal_appends_are_dated_entries_and_create_the_day_file(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    later = NOW + dt.timedelta(minutes=5)
    repo.append("journal/2026-05-06.md", "Woke, watered.", reason="j", author="ani", trailers=TRAILERS, at=NOW)
    repo.append("journal/2026-05-06.md", "Slept.", reason="j", author="ani", trailers=TRAILERS, at=later)
    view = repo.read("journal/2026-05-06.md")
    assert view.description == "My journal for 2026-05-06."
    assert view.text.index("## 2026-05-06T21:00:00Z\n\nWoke, watered.") < view.text.index("## 2026-05-06T21:05:00Z\n\nSlept.")
    with pytest.raises(FrontmatterRefused) as caught:
        repo.append("reference/missing.md", "x", reason="r", author="ani", trailers=TRAILERS, at=NOW)
    assert caught.value.rule == "frontmatter.description"
    with pytest.raises(ContentRefused):
        repo.append("journal/2026-05-06.md", "   ", reason="r", author="ani", trailers=TRAILERS, at=NOW)


def test_ls_log_diff_search(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    one = write(repo, "reference/a.md", doc("first note", "alpha\n"))
    two = write(repo, "reference/b.md", doc("second note", "beta ALPHA\n"))
    three = write(repo, "reference/a.md", doc("first note", "alpha, changed\n"))
    assert [e.path for e in repo.ls("reference/")] == ["reference/a.md", "reference/b.md", "reference/index.md"]
    with pytest.raises(NotFound):
        repo.ls("nowhere")
    assert [e.commit for e in repo.log("reference/a.md")] == [three, one]
    assert [e.commit for e in repo.log(limit=2)] == [three, two]
    assert repo.log()[0].trailers == TRAILERS
    assert "-alpha\n+alpha, changed\n" in repo.diff("reference/a.md")
    assert "+beta ALPHA" in repo.diff(commit=two)
    hits, total = repo.search("alpha", "reference", limit=1)
    assert total == 2 and len(hits) == 1
    status = repo.status()
    assert status.head == three and status.files == 8 and status.changes == () and status.head_attached


def test_the_newest_commits_are_walked_once_per_tip_and_again_after_a_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = open_repo(tmp_path)
    one = write(repo, "reference/a.md", doc("first note", "alpha\n"))
    walked: list[str] = []
    changed_paths = MemoryRepo.changed_paths
    monkeypatch.setattr(MemoryRepo, "changed_paths", staticmethod(lambda c: walked.append(str(c.id)) or changed_paths(c)))
    first = repo.log(limit=5)
    again = MemoryRepo.open(repo.workdir, MemoryConfig(), at=NOW).log(limit=5)  # a wake opens the repository afresh
    assert again == first and [e.commit for e in first][0] == one and len(walked) == len(first)
    assert len(repo.log(limit=1)) == 1 and len(walked) == len(first) + 1  # another question is walked
    two = write(repo, "reference/b.md", doc("second note", "beta\n"))  # the tip moved: walked again, the commit seen
    assert [e.commit for e in repo.log(limit=5)][:2] == [two, one]
    assert [e.commit for e in repo.log("reference/a.md")] == [one]  # one file's history is never remembered


def test_revert_makes_a_new_commit_for_one_file(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    write(repo, "reference/a.md", doc("a", "v1\n"))
    write(repo, "reference/b.md", doc("b", "b1\n"))
    bad = write(repo, "reference/a.md", doc("a", "v2\n"))
    write(repo, "reference/b.md", doc("b", "b2\n"))
    done = repo.revert(
        bad, "reference/a.md", reason="undo v2", author="operator", trailers={"Wake-Id": "-", "Fence": "-", "Tier": "operator"}, at=NOW
    )
    assert done.op == "revert" and done.parent != bad
    assert "v1" in repo.read("reference/a.md").text and "b2" in repo.read("reference/b.md").text
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["reference/a.md"]
    with pytest.raises(ContentRefused):
        repo.revert(bad, "reference/a.md", reason="again", author="operator", trailers={"Wake-Id": "-", "Fence": "-", "Tier": "operator"}, at=NOW)
    created = write(repo, "reference/c.md", doc("c"))
    repo.revert(
        created, "reference/c.md", reason="never mind", author="operator", trailers={"Wake-Id": "-", "Fence": "-", "Tier": "operator"}, at=NOW
    )
    assert not (repo.workdir / "reference" / "c.md").exists()
    with pytest.raises(NotFound):
        repo.read("reference/c.md")
    assert git(repo, "status", "--porcelain") == ""


def test_undo_takes_back_the_last_commit_only_while_it_is_the_tip(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    base = repo.head()
    made = repo.write("reference/a.md", doc("a"), reason="r", author="ani", trailers=TRAILERS, at=NOW)
    assert repo.undo(made) and repo.head() == base
    assert not (repo.workdir / "reference" / "a.md").exists() and git(repo, "status", "--porcelain") == ""
    made = repo.write("reference/a.md", doc("a"), reason="r", author="ani", trailers=TRAILERS, at=NOW)
    write(repo, "reference/b.md", doc("b"))
    assert not repo.undo(made)


def _writer(path: str, who: str, count: int, start: multiprocessing.synchronize.Event) -> None:  # type: ignore[name-defined]
    repo = MemoryRepo.open(Path(path), MemoryConfig(lock_timeout_s=60), at=NOW)
    start.wait()
    for i in range(count):
        repo.write(f"reference/{who}-{i}.md", doc(f"{who} {i}", f"written by {who}\n"), reason=f"{who} {i}", author=who, trailers=TRAILERS, at=NOW)
        repo.append(f"reference/{who}-{i}.md", "and appended", reason="a", author=who, trailers=TRAILERS, at=NOW)


def test_two_processes_writing_at_once_leave_a_sound_linear_history(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    count = 25
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    procs = [context.Process(target=_writer, args=(str(repo.workdir), who, count, start)) for who in ("ani", "bo")]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0, 0]
    git(repo, "fsck", "--strict", "--no-dangling")
    assert git(repo, "rev-list", "--count", "HEAD").strip() == str(1 + 2 * 2 * count)
    assert git(repo, "rev-list", "--merges", "HEAD") == ""
    assert git(repo, "status", "--porcelain") == ""
    for who in ("ani", "bo"):
        for i in range(count):
            assert repo.read(f"reference/{who}-{i}.md").text.endswith(f"written by {who}\n\nand appended\n")


def test_a_repository_left_without_a_commit_is_bootstrapped_on_open(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main", str(tmp_path / "memory"))
    repo = open_repo(tmp_path)
    assert repo.bootstrapped is not None and len(repo.ls()) == len(layout.bootstrap(MemoryConfig()))
