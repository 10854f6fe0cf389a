"""Workspaces and verify-on-read over real git repositories: every status, the present-traps,
the HEAD TTL, the budget, and the workspaces that cannot be read."""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codecheck import typed_anchors, verify, workspace
from codecheck.fingerprint import Fingerprint
from codecheck.workspace import Workspace, WorkspaceError
from tests.support import gitrepo, slow_fingerprint

APP: dict[str, str | bytes] = {
    "app/__init__.py": "",
    "app/cache.py": (
        '"""The cache. We looked at redis; sqlite3 is named here in prose too."""\n'
        "from __future__ import annotations\n"
        "import json\n"
        "import sqlite3  # for the migration helper only\n"
        "import redis_utils\n"
        "import attrs\n"
        "from os import environ\n"
        "from typing import TYPE_CHECKING\n"
        "from concurrent import futures\n"
        "if TYPE_CHECKING:\n"
        "    import numpy\n"
        'CACHE_URL = "redis://localhost/0"\n'
        "class Cache:\n"
        "    def get(self, key: str) -> object:\n"
        "        return json.loads(redis_utils.fetch(key))\n"
        "def migrate(path: str) -> object:\n"
        "    return sqlite3.connect(path)\n"
        "def settings() -> tuple[str, str | None]:\n"
        '    env = {"CACHE_TTL": "30"}  # a local dict, not the environment\n'
        '    return env["CACHE_TTL"], environ.get("APP_HOME")\n'
    ),
    "app/worker.py": "from app.cache import Cache\n\ndef run() -> None:\n    Cache().get('k')\n",
    "pyproject.toml": '[project]\nname = "app"\nversion = "1"\ndependencies = ["Redis_Utils>=1", "duckdb"]\n',
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    gitrepo.commit(root, APP)
    return root


@pytest.fixture
def fp(repo: Path) -> Fingerprint:
    return Workspace(repo, runner="thread").fingerprint(timeout_s=60)


def check(fp: Fingerprint, *raw: dict[str, Any], budget_ms: float = 1000) -> verify.Verdict:
    return verify.verify(typed_anchors.parse(list(raw)), fp, budget_ms)


def imp(ref: str, where: str | None = None) -> dict[str, Any]:
    return {"type": "import", "ref": ref, **({"where": where} if where else {})}


# -- statuses -----------------------------------------------------------------------------------


def test_verified_when_every_anchor_matches_with_its_type(fp: Fingerprint) -> None:
    verdict = check(fp, imp("sqlite3", "app.cache.migrate"), {"type": "env", "ref": "APP_HOME", "where": "app/cache.py"},
                    {"type": "package", "ref": "redis-utils"}, {"type": "symbol", "ref": "app.cache.Cache.get"},
                    {"type": "file", "ref": "app/worker.py"}, {"type": "absent", "anchor": imp("requests")})
    assert verdict.status == verify.VERIFIED, verdict.evidence
    assert verdict.head == fp.head and len(verdict.findings) == 6
    assert "used in app.cache.migrate at lines 17" in verdict.evidence


def test_refuted_when_a_needed_anchor_is_absent_or_an_absent_one_is_present(fp: Fingerprint) -> None:
    missing = check(fp, {"type": "file", "ref": "app/worker.py"}, {"type": "symbol", "ref": "app.cache.Cache.put"})
    assert missing.status == verify.REFUTED
    assert missing.evidence == "symbol app.cache.Cache.put: app.cache.Cache defines no put"
    present = check(fp, {"type": "absent", "anchor": imp("json")})
    assert present.status == verify.REFUTED and present.evidence.startswith("absent import json: import json at app/cache.py:3")


def test_inconclusive_without_code_anchors_over_budget_or_undecidable(fp: Fingerprint) -> None:
    assert check(fp).status == verify.INCONCLUSIVE
    assert check(fp, {"type": "url", "ref": "https://example.org"}).evidence == verify.NO_CODE_ANCHOR == "no code anchor"
    undecidable = check(fp, imp("concurrent.futures"))
    assert undecidable.status == verify.INCONCLUSIVE and "futures may be a submodule" in undecidable.evidence
    inferred = verify.verify(typed_anchors.infer("we `import sqlite3` for the cache"), fp)
    assert inferred.status == verify.INCONCLUSIVE and "inferred from prose, so not decisive: found" in inferred.evidence
    ticks = iter([0.0, 0.0, 0.0, 1.0, 1.0, 1.0])  # a clock that jumps a second after the first anchor
    late = verify.verify(typed_anchors.parse([imp("json"), imp("sqlite3")]), fp, 50, clock=lambda: next(ticks))
    assert late.status == verify.INCONCLUSIVE
    assert late.evidence == "over the 50 ms budget after 1 of 2 anchors"


def test_an_inferred_anchor_never_refutes(fp: Fingerprint) -> None:
    verdict = verify.verify(typed_anchors.infer("the cache uses `fastmcp`"), fp)
    assert verdict.status == verify.INCONCLUSIVE and "not found" in verdict.evidence


# -- the present-traps --------------------------------------------------------------------------


@pytest.mark.parametrize(("anchor", "why"), [
    (imp("redis"), "no import of redis anywhere at HEAD"),                         # in a docstring and a URL string
    (imp("sqlite3", "app/worker.py"), "imported elsewhere: app/cache.py:4"),        # imported, in another file
    (imp("sqlite3", "app.cache.Cache"), "used by app.cache.migrate; not used in app.cache.Cache"),  # a sibling
    ({"type": "env", "ref": "CACHE_TTL"}, "no read of the environment variable CACHE_TTL"),  # a local dict
    (imp("duckdb"), "no import of duckdb anywhere"),                                # declared, never imported
    ({"type": "package", "ref": "attrs"}, "attrs is not declared in pyproject.toml"),  # imported, never declared
    ({"type": "symbol", "ref": "app.worker.CACHE_URL"}, "app.worker (app/worker.py) defines no CACHE_URL"),
])
def test_a_token_present_for_another_reason_does_not_verify(fp: Fingerprint, anchor: dict[str, Any], why: str) -> None:
    verdict = check(fp, anchor)
    assert verdict.status == verify.REFUTED, verdict.evidence
    assert why in verdict.evidence


def test_a_typing_only_import_is_neither_use_nor_absence(fp: Fingerprint) -> None:
    verdict = check(fp, imp("numpy"))
    assert verdict.status == verify.INCONCLUSIVE
    assert "only under TYPE_CHECKING" in verdict.evidence


def test_the_controls_beside_the_traps_do_verify(fp: Fingerprint) -> None:
    """The same tokens in the places they really are: the traps above fail for placement, not blindness."""
    for anchor in (imp("redis_utils", "app.cache.Cache.get"), imp("sqlite3", "app/cache.py"),
                   {"type": "package", "ref": "DuckDB"}, {"type": "symbol", "ref": "app.worker.Cache.get"}):
        assert check(fp, anchor).status == verify.VERIFIED, anchor


# -- git: HEAD, not the working tree ------------------------------------------------------------


def test_the_fingerprint_reads_head_not_the_working_tree(repo: Path) -> None:
    gitrepo.write(repo, {"app/new.py": "import requests\n", "app/cache.py": "import requests\n"})
    fp = Workspace(repo, runner="thread").fingerprint(timeout_s=60)
    assert check(fp, imp("requests")).status == verify.REFUTED
    assert check(fp, {"type": "file", "ref": "app/new.py"}).status == verify.REFUTED
    assert check(fp, imp("sqlite3", "app/cache.py")).status == verify.VERIFIED


def test_head_is_re_resolved_after_the_ttl_and_the_status_follows(repo: Path) -> None:
    now = [0.0]
    ws = Workspace(repo, head_ttl_s=30, clock=lambda: now[0], runner="thread")
    anchor = [imp("sqlite3", "app/cache.py")]
    first = ws.fingerprint(timeout_s=60)
    assert check(first, *anchor).status == verify.VERIFIED
    moved = gitrepo.commit(repo, {"app/cache.py": "import duckdb\n"}, message="sqlite3 out, duckdb in")
    now[0] = 29.9  # HEAD moved, but within the TTL it is not looked at again
    assert ws.fingerprint(timeout_s=60).head == first.head
    assert check(ws.fingerprint(timeout_s=60), *anchor).status == verify.VERIFIED
    now[0] = 30.0
    after = ws.fingerprint(timeout_s=60)
    assert after.head == moved != first.head
    assert check(after, *anchor).status == verify.REFUTED
    assert (after.parsed, after.reused) == (1, len(APP) - 1)  # incremental: only the changed blob was parsed
    status = ws.status()
    assert status.head == moved and status.head_age_s == 0.0 and status.fingerprint_age_s == 0.0
    assert status.size["files"] == len(APP) and status.build_ms is not None and status.error is None


def test_a_head_seen_before_comes_from_the_cache(repo: Path) -> None:
    now = [0.0]
    ws = Workspace(repo, head_ttl_s=1, clock=lambda: now[0], runner="thread")
    first = ws.fingerprint(timeout_s=60)
    now[0] = 5.0
    assert ws.fingerprint(timeout_s=60) is first  # HEAD re-resolved, the same commit: no rebuild


# -- the budget ---------------------------------------------------------------------------------


async def test_a_slow_fingerprint_gives_inconclusive_not_a_late_result(repo: Path) -> None:
    started, release = threading.Event(), threading.Event()

    def slow(root: Path, head: str, previous: Fingerprint | None) -> Fingerprint:
        started.set()
        release.wait(timeout=120)
        return workspace.build(root, head, previous)

    ws = Workspace(repo, builder=slow, runner="thread")
    facts = [([imp("sqlite3", "app/cache.py")], "the cache migrates with sqlite3")] * 3
    try:
        checked = await verify.check(ws, facts, budget_ms=50)
        assert [v.status for v in checked.verdicts] == [verify.INCONCLUSIVE] * 3
        waited_ms = 50 - verify.answer_reserve_ms(50)  # the rest of the budget is for answering
        assert f"was not ready within {waited_ms:.0f} ms (it goes on building)" in checked.verdicts[0].evidence
        # the build goes on behind the answer: its thread may not have been scheduled yet on a
        # loaded machine (CI saw it), so wait for it, bounded, rather than race it
        assert not checked.fingerprint_ready and started.wait(timeout=60) and ws.status().building
    finally:
        release.set()
    await asyncio.to_thread(ws.fingerprint, 120)  # the same build, finished once released
    again = await verify.check(ws, facts, budget_ms=60_000)  # a budget a loaded machine cannot run out of
    assert [v.status for v in again.verdicts] == [verify.VERIFIED] * 3 and again.fingerprint_ready


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "release.fifo")
    os.mkfifo(path)
    yield path


async def test_the_budget_holds_with_the_build_in_the_worker_process(repo: Path, fifo: str) -> None:
    ws = Workspace(repo, builder=functools.partial(slow_fingerprint.build_after, fifo))
    assert ws.runner == "process"
    checked = await verify.check(ws, [([imp("json")], "json")], budget_ms=50)
    assert checked.verdicts[0].status == verify.INCONCLUSIVE and not checked.fingerprint_ready

    def release() -> None:
        with open(fifo, "wb") as pipe:  # blocks until the worker has opened its end
            pipe.write(b"x")

    await asyncio.wait_for(asyncio.to_thread(release), 120)
    await asyncio.to_thread(ws.fingerprint, 120)
    assert (await verify.check(ws, [([imp("json")], "json")], budget_ms=60_000)).verdicts[0].status == verify.VERIFIED


# -- workspaces that cannot be read -------------------------------------------------------------


async def test_a_directory_that_is_not_a_git_repository_is_a_typed_failure(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    gitrepo.write(plain, {"app/cache.py": "import sqlite3\n"})
    with pytest.raises(WorkspaceError) as caught:
        Workspace(plain, runner="thread").fingerprint(timeout_s=60)
    assert caught.value.kind == "not_a_repository"
    checked = await verify.check(Workspace(plain), [([imp("sqlite3")], "sqlite3")], budget_ms=5000)
    assert checked.verdicts[0].status == verify.INCONCLUSIVE
    assert checked.verdicts[0].evidence.startswith("could not check:") and "is not a git repository" in checked.verdicts[0].evidence
    assert (await verify.check(None, [([imp("sqlite3")], "x")])).verdicts[0].evidence == "no workspace is configured for this agent"


def test_a_directory_inside_a_repository_is_not_one_and_nothing_is_searched_upward(repo: Path) -> None:
    with pytest.raises(WorkspaceError) as caught:
        Workspace(repo / "app", runner="thread").fingerprint(timeout_s=60)
    assert caught.value.kind == "not_a_repository"


def test_a_repository_without_commits_is_a_typed_failure(tmp_path: Path) -> None:
    import pygit2

    pygit2.init_repository(str(tmp_path / "empty"))
    ws = Workspace(tmp_path / "empty", runner="thread")
    with pytest.raises(WorkspaceError) as caught:
        ws.fingerprint(timeout_s=60)
    assert caught.value.kind == "no_commits"
    assert ws.status().error is not None and ws.status().error.startswith("no_commits")  # type: ignore[union-attr]


def test_an_unreadable_blob_is_skipped_by_name_and_the_fingerprint_still_builds(repo: Path) -> None:
    os.remove(gitrepo.blob_path(repo, "app/worker.py"))
    fp = Workspace(repo, runner="thread").fingerprint(timeout_s=60)
    assert [s.path for s in fp.skipped] == ["app/worker.py"]
    assert fp.skipped[0].reason.startswith("cannot read the blob")
    assert check(fp, imp("sqlite3", "app/cache.py")).status == verify.VERIFIED  # the rest still counts
    unknown = check(fp, imp("requests", "app/worker.py"))
    assert unknown.status == verify.INCONCLUSIVE and "app/worker.py was skipped" in unknown.evidence
    assert check(fp, {"type": "symbol", "ref": "app.worker.run"}).status == verify.INCONCLUSIVE


def test_a_syntax_error_names_the_skipped_file_and_the_rest_builds(repo: Path) -> None:
    gitrepo.commit(repo, {"app/broken.py": "def broken(:\n    import requests\n"})
    fp = Workspace(repo, runner="thread").fingerprint(timeout_s=60)
    assert [(s.path, s.reason) for s in fp.skipped] == [("app/broken.py", "syntax error at line 1: invalid syntax")]
    assert check(fp, imp("sqlite3", "app/cache.py")).status == verify.VERIFIED
    assert check(fp, imp("requests", "app/cache.py")).status == verify.REFUTED  # that file was read: it is not there
    doubt = check(fp, imp("requests"))                                      # anywhere: it could be in the broken file
    assert doubt.status == verify.INCONCLUSIVE and "app/broken.py was skipped (syntax error at line 1" in doubt.evidence


def test_a_symlink_in_the_tree_is_followed_inside_and_refused_outside(repo: Path) -> None:
    os.symlink("app", repo / "docs")
    os.symlink("../../outside", repo / "app" / "out")
    gitrepo.commit(repo)
    fp = Workspace(repo, runner="thread").fingerprint(timeout_s=60)
    assert fp.symlinks == {"docs": "app", "app/out": "../../outside"}
    assert check(fp, {"type": "file", "ref": "docs/cache.py"}).status == verify.VERIFIED
    escaped = check(fp, {"type": "file", "ref": "app/out/secret.txt"})
    assert escaped.status == verify.INCONCLUSIVE and "escapes the workspace" in escaped.evidence


def test_one_workspace_per_root_is_shared_and_warm_starts_the_build(repo: Path) -> None:
    registry = workspace.Workspaces(runner="thread")
    ws = registry.get(repo)
    assert registry.get(str(repo / "app" / "..")) is ws and registry.get(repo, head_ttl_s=5) is not ws
    ws.warm()
    fp = ws.fingerprint(timeout_s=60)  # the build warm() started
    assert ws.fingerprint(timeout_s=0) is fp
