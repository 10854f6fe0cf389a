"""What each anchor kind means over real git trees: a package's scope, symlinked modules,
directories as places, submodules (gitlinks) that were never read, and the bounds that hold
whatever is stored (anchors per fact, an anchor's length, one fact's share of the budget)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pygit2
import pytest
from pygit2.enums import FileMode

from codecheck import typed_anchors, verify
from codecheck.fingerprint import Fingerprint
from codecheck.workspace import Workspace
from tests.support import gitrepo

PYPROJECT = """
[project]
name = "lib"
version = "1"
dependencies = ["rich>=13", "Typing_Extensions"]

[project.optional-dependencies]
http2 = ["h2>=4"]
test = ["pytest"]

[dependency-groups]
dev = ["ruff"]
test = ["coverage"]
lint = ["mypy"]

[tool.poetry.dependencies]
python = "^3.11"
click = "^8"
socksio = {version = "^1", optional = true}

[tool.poetry.group.dev.dependencies]
black = "*"
"""


def _fp(root: Path, files: dict[str, str | bytes]) -> Fingerprint:
    gitrepo.commit(root, files)
    return Workspace(root, runner="thread").fingerprint(timeout_s=60)


def status(fp: Fingerprint, *raw: dict[str, Any]) -> str:
    return verify.verify(typed_anchors.parse(list(raw)), fp, 5000).status


def pkg(ref: str, scope: str | None = None, ecosystem: str | None = None) -> dict[str, Any]:
    return {"type": "package", "ref": ref, **({"scope": scope} if scope else {}), **({"ecosystem": ecosystem} if ecosystem else {})}


def imp(ref: str, where: str | None = None) -> dict[str, Any]:
    return {"type": "import", "ref": ref, **({"where": where} if where else {})}


# -- package scope ------------------------------------------------------------------------------


@pytest.fixture
def deps(tmp_path: Path) -> Fingerprint:
    return _fp(tmp_path / "repo", {
        "lib/__init__.py": "", "pyproject.toml": PYPROJECT,
        "requirements-dev.txt": "pre-commit\n", "requirements.txt": "anyio\n",
        "web/package.json": '{"dependencies": {"left-pad": "1"}, "devDependencies": {"jest": "29"}, '
                            '"optionalDependencies": {"fsevents": "2"}, "peerDependencies": {"react": "18"}}',
    })


@pytest.mark.parametrize(("anchor", "expected"), [
    (pkg("rich", "required"), verify.VERIFIED),
    (pkg("typing-extensions", "required"), verify.VERIFIED),
    (pkg("h2", "required"), verify.REFUTED),             # only an optional extra: not a required dependency
    (pkg("h2", "optional"), verify.VERIFIED),
    (pkg("h2", "extra:http2"), verify.VERIFIED),
    (pkg("h2", "extra:test"), verify.REFUTED),
    (pkg("pytest", "extra:test"), verify.VERIFIED),
    (pkg("pytest", "test"), verify.REFUTED),            # an extra named test is an extra, not a test group
    (pkg("coverage", "test"), verify.VERIFIED),
    (pkg("ruff", "dev"), verify.VERIFIED),
    (pkg("ruff", "required"), verify.REFUTED),
    (pkg("click", "required"), verify.VERIFIED),         # poetry's main table
    (pkg("socksio", "optional"), verify.VERIFIED),       # poetry optional = true
    (pkg("socksio", "required"), verify.REFUTED),
    (pkg("black", "dev"), verify.VERIFIED),              # a poetry dev group
    (pkg("pre-commit", "dev"), verify.VERIFIED),         # requirements-dev.txt
    (pkg("anyio", "required"), verify.VERIFIED),         # requirements.txt
    (pkg("left-pad", "required", "npm"), verify.VERIFIED),
    (pkg("jest", "dev", "npm"), verify.VERIFIED),
    (pkg("jest", "required", "npm"), verify.REFUTED),
    (pkg("fsevents", "optional", "npm"), verify.VERIFIED),
    (pkg("h2"), verify.VERIFIED),                        # no scope: declared anywhere, as before
    ({"type": "absent", "anchor": pkg("h2", "required")}, verify.VERIFIED),  # "h2 is not a required dependency"
    (pkg("mypy", "dev"), verify.INCONCLUSIVE),           # a group named lint: the manifest does not say dev
])
def test_a_package_anchor_means_how_it_is_depended_on(deps: Fingerprint, anchor: dict[str, Any], expected: str) -> None:
    assert status(deps, anchor) == expected


def test_a_scope_is_checked_when_the_fact_is_written() -> None:
    with pytest.raises(typed_anchors.AnchorError, match="scope must be"):
        typed_anchors.parse([pkg("h2", "sometimes")])
    with pytest.raises(typed_anchors.AnchorError, match="scope"):
        typed_anchors.parse([{"type": "import", "ref": "h2", "scope": "required"}])
    assert typed_anchors.parse([pkg("h2", "extra:http2")])[0].scope == "extra:http2"


# -- symlinks, directories, submodules ----------------------------------------------------------


GOOD = "import json\n\ndef f():\n    return json.dumps(1)\n"


@pytest.fixture
def tree(tmp_path: Path) -> Fingerprint:
    root = tmp_path / "repo"
    gitrepo.write(root, {"pkg/__init__.py": "", "pkg/good.py": GOOD, "scripts/run.py": "import subprocess\n",
                         "shared/tool.py": "import csv\n"})
    os.symlink("good.py", root / "pkg" / "alias.py")
    os.symlink("../../outside.py", root / "pkg" / "escape.py")
    os.symlink("../shared", root / "pkg" / "linked")
    gitrepo.commit(root)
    repo = pygit2.Repository(str(root))
    repo.index.read()
    repo.index.add(pygit2.IndexEntry("vendor/lib", pygit2.Oid(hex="1" * 40), FileMode.COMMIT))
    repo.index.write()
    tree_id = repo.index.write_tree()
    sig = pygit2.Signature("t", "t@localhost", 1_700_000_000, 0)
    repo.create_commit("HEAD", sig, sig, "a submodule", tree_id, [repo.head.target])
    return Workspace(root, runner="thread").fingerprint(timeout_s=60)


def test_a_symlinked_module_inside_the_tree_has_its_targets_content(tree: Fingerprint) -> None:
    assert status(tree, imp("json", "pkg/alias.py")) == verify.VERIFIED
    assert status(tree, {"type": "symbol", "ref": "pkg.alias.f"}) == verify.VERIFIED
    assert status(tree, imp("json", "pkg.alias.f")) == verify.VERIFIED
    assert status(tree, imp("csv", "pkg/linked/tool.py")) == verify.VERIFIED  # a directory link inside the tree
    assert status(tree, imp("requests", "pkg/alias.py")) == verify.REFUTED      # read, and not there


def test_a_symlink_out_of_the_workspace_is_undecidable(tree: Fingerprint) -> None:
    assert status(tree, imp("json", "pkg/escape.py")) == verify.INCONCLUSIVE
    assert status(tree, {"type": "symbol", "ref": "pkg.escape.f"}) == verify.INCONCLUSIVE
    assert status(tree, {"type": "absent", "anchor": imp("os", "pkg/escape.py")}) == verify.INCONCLUSIVE


@pytest.mark.parametrize("where", ["scripts/", "./scripts", "scripts", "./scripts/"])
def test_a_directory_is_a_place(tree: Fingerprint, where: str) -> None:
    assert status(tree, imp("subprocess", where)) == verify.VERIFIED
    assert status(tree, imp("csv", where)) == verify.REFUTED


def test_a_submodule_is_not_read(tree: Fingerprint) -> None:
    assert status(tree, {"type": "absent", "anchor": imp("requests", "vendor/lib")}) == verify.INCONCLUSIVE
    assert status(tree, imp("requests", "vendor/lib/client.py")) == verify.INCONCLUSIVE
    assert status(tree, {"type": "file", "ref": "vendor/lib/setup.py"}) == verify.INCONCLUSIVE
    assert status(tree, {"type": "symbol", "ref": "vendor.lib.client.Session"}) == verify.INCONCLUSIVE
    assert status(tree, {"type": "file", "ref": "vendor/lib"}) == verify.VERIFIED      # the gitlink itself is there
    assert status(tree, {"type": "absent", "anchor": imp("requests", "scripts")}) == verify.VERIFIED  # read, not there


# -- bounds -------------------------------------------------------------------------------------


def test_anchors_per_fact_and_an_anchors_length_are_capped_at_write() -> None:
    many = [imp(f"m{i}") for i in range(typed_anchors.MAX_ANCHORS + 1)]
    with pytest.raises(typed_anchors.AnchorError, match=f"at most {typed_anchors.MAX_ANCHORS} anchors"):
        typed_anchors.parse(many)
    assert len(typed_anchors.parse(many[:-1])) == typed_anchors.MAX_ANCHORS
    with pytest.raises(typed_anchors.AnchorError, match=f"at most {typed_anchors.MAX_TEXT} characters"):
        typed_anchors.parse([{"type": "symbol", "ref": "a." * 300 + "b"}])
    with pytest.raises(typed_anchors.AnchorError, match=f"at most {typed_anchors.MAX_TEXT} characters"):
        typed_anchors.parse([imp("json", "a/" * 300)])
    assert typed_anchors.JSON_SCHEMA["maxItems"] == typed_anchors.MAX_ANCHORS


def test_a_stored_fact_over_the_caps_is_bounded_at_read(tree: Fingerprint) -> None:
    stored = [imp("json", "pkg/good.py")] * 4000 + [{"type": "symbol", "ref": "a." * 65_000 + "b"}]
    started = time.perf_counter()
    read = verify.stored_anchors(stored)
    assert not isinstance(read, str)
    verdict = verify.verify(read, tree, 50)
    assert (time.perf_counter() - started) < 5.0  # milliseconds quiet; generous for a loaded machine: the point is it is not unbounded
    assert verdict.status == verify.INCONCLUSIVE
    assert f"{len(stored)} anchors stored, above the cap of {typed_anchors.MAX_ANCHORS}" in verdict.evidence
    assert len(verdict.findings) == typed_anchors.MAX_ANCHORS


def test_a_long_dotted_name_resolves_in_linear_time(tree: Fingerprint) -> None:
    name = "pkg.good." + ".".join(f"x{i}" for i in range(40_000))
    started = time.perf_counter()
    assert verify.module_of(name, tree) == "pkg.good"
    assert (time.perf_counter() - started) < 0.5


class Steps:
    """A clock that moves only when read: each read is one step of `step_ms`."""

    def __init__(self, step_ms: float) -> None:
        self.t, self.step = 0.0, step_ms / 1000

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def test_one_fact_cannot_starve_the_others_and_no_late_verdict_is_returned(tree: Fingerprint) -> None:
    heavy = typed_anchors.parse([imp("json", "pkg/good.py")] * typed_anchors.MAX_ANCHORS)
    light = typed_anchors.parse([imp("json", "pkg/good.py")])
    clock = Steps(1.0)  # every anchor costs a millisecond or more of this clock
    verdicts = verify.verify_many([heavy, light, light, light], tree, budget_ms=60, clock=clock)
    assert verdicts[0].status == verify.INCONCLUSIVE and "share" in verdicts[0].evidence
    assert [v.status for v in verdicts[1:]] == [verify.VERIFIED] * 3
    late = verify.verify(light, tree, 1.5, clock=Steps(1.0))  # its one anchor ends past the budget
    assert late.status == verify.INCONCLUSIVE and "budget" in late.evidence


class Script:
    """A clock that reads the given times, then steps 0.1 ms a read."""

    def __init__(self, *ms: float) -> None:
        self.times, self.t = [m / 1000 for m in ms], 0.0

    def __call__(self) -> float:
        self.t = self.times.pop(0) if self.times else self.t + 0.0001
        return self.t


def test_a_check_made_late_by_a_pause_inside_the_retrievals_deadline_keeps_its_verdict(tree: Fingerprint) -> None:
    light = typed_anchors.parse([imp("json", "pkg/good.py")])
    # the retrieval's deadline 20 ms; the first fact's share ends at 10.5 ms; its one check ends at 15 ms (a preemption)
    verdicts = verify.verify_many([light, light], tree, budget_ms=20, clock=Script(0, 1, 2, 3, 15))
    assert [v.status for v in verdicts] == [verify.VERIFIED, verify.VERIFIED]
    # past the retrieval's own deadline it does not count, share or not
    verdicts = verify.verify_many([light, light], tree, budget_ms=20, clock=Script(0, 1, 2, 3, 25))
    assert verdicts[0].status == verify.INCONCLUSIVE and "share" in verdicts[0].evidence
    assert verdicts[1].status == verify.INCONCLUSIVE and "not reached" in verdicts[1].evidence
