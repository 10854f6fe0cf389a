"""The rules a memory write must pass before anything is committed: paths and frontmatter. Each
refusal names its rule, and a refused write leaves the repository exactly as it was."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memory import frontmatter
from memory.config import MemoryConfig
from memory.errors import ContentRefused, FrontmatterRefused, MemoryRefused, PathRefused
from memory.repo import MemoryRepo
from tests.support.memory_git import NOW, TRAILERS, doc, git, open_repo, requires_git, write


def _refused(repo: MemoryRepo, path: str, content: str, rule: str, kind: type[MemoryRefused] = MemoryRefused) -> MemoryRefused:
    head = repo.head()
    with pytest.raises(kind) as caught:
        write(repo, path, content)
    assert caught.value.rule == rule, str(caught.value)
    assert repo.head() == head  # nothing committed
    assert "\n" not in str(caught.value)  # one clear line
    return caught.value


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("", "path.empty"),
        ("/etc/passwd.md", "path.absolute"),
        ("C:/notes.md", "path.absolute"),
        ("reference/../../outside.md", "path.dotdot"),
        ("..", "path.dotdot"),
        (".git/config.md", "path.git"),
        ("reference/.gitattributes", "path.git"),
        (".gitignore", "path.git"),
        ("reference//double.md", "path.chars"),
        ("reference/./here.md", "path.chars"),
        ("reference\\win.md", "path.chars"),
        ("reference/nul\x00.md", "path.chars"),
        ("reference/notes.txt", "path.suffix"),
        ("reference/", "path.chars"),
        ("notes/loose.md", "layout.unknown"),
        ("system/other.md", "layout.unknown"),
        ("reference/" + "x" * 300 + ".md", "path.length"),
    ],
)
def test_a_path_outside_the_rules_is_refused_by_name(tmp_path: Path, path: str, rule: str) -> None:
    repo = open_repo(tmp_path)
    _refused(repo, path, doc("a note"), rule, PathRefused)


def test_config_allows_a_path_outside_the_layout(tmp_path: Path) -> None:
    repo = open_repo(tmp_path, MemoryConfig(allowed_paths=("notes/",)))
    write(repo, "notes/loose.md", doc("a loose note"))
    assert repo.read("notes/loose.md").description == "a loose note"
    _refused(repo, "elsewhere/x.md", doc("not allowed"), "layout.unknown")


def test_a_symlink_in_the_work_tree_is_never_followed(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, repo.workdir / "reference" / "link")
    _refused(repo, "reference/link/escape.md", doc("escape"), "path.symlink", PathRefused)
    os.symlink(outside / "target.md", repo.workdir / "reference" / "file.md")
    _refused(repo, "reference/file.md", doc("escape"), "path.symlink", PathRefused)
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize(
    ("content", "rule"),
    [
        ("no frontmatter at all\n", "frontmatter.description"),
        ("---\ntags: [a]\n---\nbody\n", "frontmatter.description"),
        ("---\ndescription: ''\n---\n", "frontmatter.description"),
        ("---\ndescription: '   '\n---\n", "frontmatter.description"),
        ("---\ndescription: 42\n---\n", "frontmatter.description"),
        ("---\ndescription: x\nread_only: maybe\n---\n", "frontmatter.read_only"),
        ("---\ndescription: [unclosed\n---\n", "frontmatter.yaml"),
        ("---\ndescription: a: b: c\n---\n", "frontmatter.yaml"),
        ("---\ndescription: x\n", "frontmatter.yaml"),
        ("---\n- a\n- b\n---\n", "frontmatter.mapping"),
    ],
)
def test_a_frontmatter_that_breaks_the_schema_is_refused_by_name(tmp_path: Path, content: str, rule: str) -> None:
    repo = open_repo(tmp_path)
    _refused(repo, "reference/note.md", content, rule, FrontmatterRefused)


def test_malformed_yaml_is_one_line_that_says_where(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    refusal = _refused(repo, "reference/note.md", "---\ndescription: ok\nbad: a: b\n---\n", "frontmatter.yaml")
    assert "not valid YAML" in str(refusal) and "(line 3, column 7)" in str(refusal)


def test_read_only_refuses_writes_and_appends(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    write(repo, "reference/charter.md", doc("the charter", "Keep it.\n", read_only="true"))
    _refused(repo, "reference/charter.md", doc("the charter", "Changed.\n"), "frontmatter.read_only", FrontmatterRefused)
    head = repo.head()
    with pytest.raises(FrontmatterRefused) as caught:
        repo.append("reference/charter.md", "more", reason="t", author="ani", trailers=TRAILERS, at=NOW)
    assert caught.value.rule == "frontmatter.read_only" and repo.head() == head
    assert "Keep it." in repo.read("reference/charter.md").text


def test_content_over_the_size_cap_or_binary_is_refused(tmp_path: Path) -> None:
    repo = open_repo(tmp_path, MemoryConfig(max_file_bytes=100))
    _refused(repo, "reference/big.md", doc("big", "x" * 200), "content.size", ContentRefused)
    _refused(repo, "reference/nul.md", doc("nul", "a\x00b"), "content.binary", ContentRefused)


def test_a_commit_needs_its_trailers(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    head = repo.head()
    with pytest.raises(MemoryRefused) as caught:
        repo.write("reference/a.md", doc("a"), reason="r", author="ani", trailers={"Wake-Id": "w", "Tier": "full"}, at=NOW)
    assert caught.value.rule == "commit.trailers" and "Fence" in str(caught.value)
    assert repo.head() == head


@requires_git
def test_a_file_edited_outside_the_tool_is_not_written_over(tmp_path: Path) -> None:
    repo = open_repo(tmp_path)
    target = repo.workdir / "reference" / "index.md"
    target.write_text(doc("edited by hand"))
    _refused(repo, "reference/index.md", doc("the tool's version"), "worktree.dirty", ContentRefused)
    assert target.read_text() == doc("edited by hand")  # the evidence is kept for the canary
    assert "reference/index.md" in git(repo, "status", "--porcelain")


def test_fields_are_frontmatter_keys_and_headings() -> None:
    parsed = frontmatter.parse("---\ndescription: d\nphase: build\n---\n# Me\n## Core Principles\nBe kind.\n### detail\nx\n## Scope\nsmall\n")
    found = frontmatter.fields(parsed)
    assert found["phase"] == '"build"'
    assert found["core_principles"] == "Be kind.\n### detail\nx"
    assert found["scope"] == "small"
    assert found["me"].startswith("## Core Principles")


def test_the_memory_layer_imports_nothing_from_wake_or_surfaces() -> None:
    import subprocess
    import sys

    probe = (
        "import sys, memory.repo, memory.cloister, memory.layout;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('wake', 'surfaces', 'ledgers', 'codecheck')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
