"""The Cloister canary on real git repositories, tampered with by the real `git` binary: bypass
commits classified by domain, uncommitted edits, rewritten history, journal edits, the persona's
identity fields, and an audit that reads only what came after the last audited commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory import cloister
from memory.config import MemoryConfig, Severity
from memory.repo import MemoryRepo
from tests.support.memory_git import NOW, TRAILERS, doc, git, open_repo, requires_git, write

pytestmark = requires_git


class Canary:
    """The audit loop a wake runs, with the tool's commits remembered as `memory_writes` would."""

    def __init__(self, repo: MemoryRepo) -> None:
        self.repo = repo
        self.known: set[str] = set()
        self.since: str | None = None

    def write(self, path: str, content: str) -> str:
        commit = write(self.repo, path, content)
        self.known.add(commit)
        return commit

    def append(self, path: str, text: str) -> str:
        commit = self.repo.append(path, text, reason="r", author="ani", trailers=TRAILERS, at=NOW).commit
        self.known.add(commit)
        return commit

    def audit(self) -> cloister.Audit:
        scope = cloister.pending(self.repo, self.since)
        result = cloister.audit(self.repo, scope, self.known)
        self.since = scope.head
        return result


def rules(result: cloister.Audit) -> set[tuple[str, str, str, str]]:
    return {(f.severity.value, f.domain, f.path, f.rule) for f in result.findings}


def bypass_commit(repo: MemoryRepo, path: str, content: str, message: str = "edit") -> str:
    target = repo.workdir / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content)
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def canary(tmp_path: Path) -> Canary:
    return Canary(open_repo(tmp_path))


def test_a_fresh_repository_and_the_tools_own_writes_raise_nothing(canary: Canary) -> None:
    assert canary.audit().findings == ()
    canary.write("reference/notes.md", doc("notes", "hello\n"))
    canary.append("journal/2026-05-06.md", "a day")
    canary.write("system/state.md", doc("state", "", phase="build", focus="the canary"))
    result = canary.audit()
    assert result.findings == () and len(result.range.commits) == 3


@pytest.mark.parametrize(
    ("path", "domain", "severity"),
    [
        ("system/persona/persona.md", "persona", "HALT"),
        ("system/human/human.md", "human", "HALT"),
        ("system/project/project.md", "project", "WARN"),
        ("system/state.md", "state", "WARN"),
        ("reference/index.md", "reference", "LOG"),
        ("journal/2026-05-06.md", "journal", "LOG"),
    ],
)
def test_a_commit_made_with_git_directly_is_caught_and_classified_by_domain(canary: Canary, path: str, domain: str, severity: str) -> None:
    canary.audit()
    old = canary.repo.text_at(canary.repo.commit(canary.repo.head() or ""), path) or doc("a day")
    sha = bypass_commit(canary.repo, path, old + "\nappended by a shell\n", "Wake-Id: forged\nFence: 9\nTier: full")
    result = canary.audit()
    bypass = [f for f in result.findings if f.rule == "bypass.commit"]
    assert [(f.severity.value, f.domain, f.path, f.commit) for f in bypass] == [(severity, domain, path, sha)]
    assert "+appended by a shell" in bypass[0].excerpt
    assert result.halted == (severity == "HALT")


def test_uncommitted_edits_untracked_and_ignored_files_are_caught(canary: Canary) -> None:
    canary.audit()
    repo = canary.repo
    (repo.workdir / "system" / "persona" / "persona.md").write_text(doc("I am someone else"))
    (repo.workdir / "reference" / "dropped.md").write_text("no frontmatter")
    (repo.workdir / ".git" / "info" / "exclude").write_text("hidden.md\n")
    (repo.workdir / "journal" / "hidden.md").write_text("ignored, not invisible")
    (repo.workdir / "journal" / "index.md").unlink()
    result = canary.audit()
    assert rules(result) == {
        ("HALT", "persona", "system/persona/persona.md", "worktree.modified"),
        ("LOG", "reference", "reference/dropped.md", "worktree.untracked"),
        ("LOG", "journal", "journal/hidden.md", "worktree.ignored"),
        ("LOG", "journal", "journal/index.md", "worktree.deleted"),
    }
    persona = next(f for f in result.findings if f.domain == "persona")
    assert persona.commit is None and "+description: I am someone else" in persona.excerpt
    assert result.worktree_changes == 4
    again = canary.audit()  # still there next wake: raised again, with the same fingerprint
    assert {f.fingerprint for f in again.findings} == {f.fingerprint for f in result.findings}


@pytest.mark.parametrize("rewrite", ["amend", "reset"])
def test_rewritten_history_is_always_halt(canary: Canary, rewrite: str) -> None:
    canary.write("reference/a.md", doc("a", "one\n"))
    canary.write("reference/a.md", doc("a", "two\n"))
    audited = canary.audit().range.head
    if rewrite == "amend":
        git(canary.repo, "commit", "-q", "--amend", "-m", "memory write reference/a.md: quietly")
    else:
        git(canary.repo, "reset", "-q", "--hard", "HEAD~1")
    result = canary.audit()
    rewritten = [f for f in result.findings if f.rule == "history.rewritten"]
    assert len(rewritten) == 1 and rewritten[0].severity == Severity.HALT and audited is not None
    assert audited[:12] in rewritten[0].excerpt
    if rewrite == "amend":  # the replacement commit is audited too, from the merge base
        assert ("LOG", "reference", "reference/a.md", "bypass.commit") in rules(result)


def test_a_last_audited_commit_that_is_gone_is_halt(canary: Canary) -> None:
    canary.audit()
    canary.since = "0123456789abcdef0123456789abcdef01234567"
    result = canary.audit()
    assert ("HALT", "", "", "history.rewritten") in rules(result)


def test_a_detached_head_is_halt(canary: Canary) -> None:
    canary.write("reference/a.md", doc("a"))
    canary.audit()
    git(canary.repo, "checkout", "-q", "--detach", "HEAD~1")
    assert ("HALT", "", "", "history.head_moved") in rules(canary.audit())


def test_a_journal_edit_or_deletion_is_warn_an_append_is_not(canary: Canary) -> None:
    canary.append("journal/2026-05-06.md", "first entry")
    canary.append("journal/2026-05-06.md", "second entry")
    assert canary.audit().findings == ()
    text = canary.repo.read("journal/2026-05-06.md").text
    canary.write("journal/2026-05-06.md", text.replace("first entry", "a better first entry"))
    assert rules(canary.audit()) == {("WARN", "journal", "journal/2026-05-06.md", "journal.rewritten")}
    git(canary.repo, "rm", "-q", "journal/2026-05-06.md")
    git(canary.repo, "commit", "-q", "-m", "tidy")
    assert rules(canary.audit()) == {
        ("LOG", "journal", "journal/2026-05-06.md", "bypass.commit"),
        ("WARN", "journal", "journal/2026-05-06.md", "journal.deleted"),
    }
    canary.write("journal/notes.md", doc("undated"))
    assert rules(canary.audit()) == {("LOG", "journal", "journal/notes.md", "journal.undated")}


def test_persona_identity_fields_halt_even_through_the_tool_other_persona_changes_warn(canary: Canary) -> None:
    canary.audit()
    persona = canary.repo.read("system/persona/persona.md").text
    canary.write("system/persona/persona.md", persona.replace("## Scope\n\n(not written yet)", "## Scope\n\nEverything, everywhere."))
    result = canary.audit()
    assert rules(result) == {("HALT", "persona", "system/persona/persona.md", "fields.changed")}
    assert "field 'scope' changed" in result.findings[0].excerpt and "+Everything, everywhere." in result.findings[0].excerpt
    canary.write("system/persona/behavior.md", doc("how I behave", "Don't promise to save things, save them.\n"))
    assert rules(canary.audit()) == {("WARN", "persona", "system/persona/behavior.md", "domain.changed")}
    # the identity may move between persona files unchanged: nothing is lost, nothing changed
    current = canary.repo.read("system/persona/persona.md").text
    identity = "## Identity\n\n(not written yet)\n"
    canary.write("system/persona/persona.md", current.replace(identity, ""))
    assert ("HALT", "persona", "system/persona/persona.md", "fields.missing") in rules(canary.audit())


def test_human_and_project_key_fields_and_state_keys(canary: Canary) -> None:
    canary.audit()
    human = canary.repo.read("system/human/human.md").text
    canary.write("system/human/human.md", human + "\n## Notes\n\nLikes tea.\n")
    assert canary.audit().findings == ()  # a key-field domain reports only its fields
    canary.write("system/human/human.md", human.replace("## Prefs\n\n(not written yet)", "## Prefs\n\nNo email after 6."))
    assert rules(canary.audit()) == {("HALT", "human", "system/human/human.md", "fields.changed")}
    project = canary.repo.read("system/project/project.md").text
    canary.write("system/project/project.md", project.replace("## Conventions", "## Habits"))
    assert rules(canary.audit()) == {("WARN", "project", "system/project/project.md", "fields.missing")}
    canary.write("system/state.md", doc("state", "", phase="ship", focus="tests"))
    assert canary.audit().findings == ()  # expected keys: values change freely
    canary.write("system/state.md", doc("state", "", phase="ship"))
    assert rules(canary.audit()) == {("WARN", "state", "system/state.md", "fields.missing")}


def test_a_read_only_file_changed_behind_the_tools_back_is_halt(canary: Canary) -> None:
    canary.write("reference/charter.md", doc("charter", "keep\n", read_only="true"))
    canary.audit()
    bypass_commit(canary.repo, "reference/charter.md", doc("charter", "changed\n"))
    assert ("HALT", "reference", "reference/charter.md", "read_only.changed") in rules(canary.audit())


def test_a_broken_frontmatter_or_a_path_outside_the_layout_committed_by_hand(canary: Canary) -> None:
    canary.audit()
    bypass_commit(canary.repo, "system/project/project.md", "no frontmatter any more\n")
    bypass_commit(canary.repo, "tools/run.sh", "#!/bin/sh\n")
    found = rules(canary.audit())
    assert ("WARN", "project", "system/project/project.md", "frontmatter.invalid") in found
    assert ("WARN", "", "tools/run.sh", "layout.unknown") in found


def test_an_audit_reads_only_what_came_after_the_last_audited_commit(canary: Canary) -> None:
    canary.audit()
    bypass_commit(canary.repo, "reference/index.md", doc("old news"))
    assert len(canary.audit().findings) == 1
    for i in range(5):
        canary.write(f"reference/n{i}.md", doc(f"note {i}"))
    result = canary.audit()
    assert len(result.range.commits) == 5 and result.findings == ()
    assert result.paths_checked == 5


def test_more_commits_than_a_wake_makes_is_halt(tmp_path: Path) -> None:
    canary = Canary(open_repo(tmp_path, MemoryConfig(max_commits_per_audit=3)))
    canary.audit()
    for i in range(5):
        canary.write(f"reference/n{i}.md", doc(f"note {i}"))
    result = canary.audit()
    assert ("HALT", "", "", "audit.too_many_commits") in rules(result) and len(result.range.commits) == 3


def test_excerpts_and_the_number_of_findings_are_capped(tmp_path: Path) -> None:
    canary = Canary(open_repo(tmp_path, MemoryConfig(excerpt_max_chars=120, max_findings_per_audit=4)))
    canary.audit()
    for i in range(6):
        (canary.repo.workdir / "reference" / f"u{i}.md").write_text("line\n" * 200)
    result = canary.audit()
    assert all(len(f.excerpt) <= 120 for f in result.findings)
    assert len(result.findings) == 4 and result.findings[-1].rule == "audit.truncated" and result.dropped == 3


def test_a_merge_made_by_hand_is_audited_against_its_first_parent(canary: Canary) -> None:
    canary.audit()
    git(canary.repo, "checkout", "-q", "-b", "side")
    bypass_commit(canary.repo, "system/human/human.md", doc("a different human"), "side")
    git(canary.repo, "checkout", "-q", "main")
    canary.write("reference/a.md", doc("a"))
    git(canary.repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    result = canary.audit()
    assert len(result.range.commits) == 2  # the tool's write and the merge; the side commit rides in the merge
    assert ("HALT", "human", "system/human/human.md", "bypass.commit") in rules(result)


def test_a_repository_replaced_by_a_new_one_is_a_rewritten_history(tmp_path: Path) -> None:
    canary = Canary(open_repo(tmp_path))
    canary.write("reference/a.md", doc("a"))
    canary.audit()
    git(canary.repo, "checkout", "-q", "--orphan", "fresh")
    git(canary.repo, "commit", "-q", "-m", "start over")
    git(canary.repo, "branch", "-q", "-M", "fresh", "main")
    result = canary.audit()
    assert ("HALT", "", "", "history.rewritten") in rules(result)
    assert result.range.base is None and len(result.range.commits) == 1
