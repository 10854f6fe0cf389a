"""Verify-on-read III: a verdict says exactly what was checked. Each defect of issue 39 over a
real git tree shaped like the terminal-output library it was found in: a claim more specific than
its anchor (parameters, a constant's value, a file that is a directory, a sentence or a list
wider than its anchors), look-alike identifiers, and imports paid inside the first budget."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codecheck import names, typed_anchors, verify
from codecheck.fingerprint import Fingerprint
from codecheck.workspace import Workspace
from tests.support import gitrepo

FILES: dict[str, str | bytes] = {
    "pyproject.toml": '[project]\nname = "rich"\nversion = "1"\n'
                      'dependencies = ["Pygments>=2", "markdown-it-py>=2", "typing_extensions>=4"]\n',
    "rich/__init__.py": "from .progress import track\n",
    "rich/progress.py": textwrap.dedent('''
        def track(sequence, description: str = "Working...", total=None, *, auto_refresh=True, **kwargs):
            return sequence

        class Progress:
            def __init__(self, *columns, console=None, transient: bool = False):
                self.columns = columns
    '''),
    "rich/console.py": textwrap.dedent('''
        import os

        JUPYTER_DEFAULT_COLUMNS = 115
        JUPYTER_DEFAULT_LINES = 100
        WINDOWS = os.name == "nt"

        class Console:
            tab_size: int = 8
    '''),
    "rich/table.py": textwrap.dedent('''
        class Table:
            def add_row(self, *renderables, style=None, end_section=False):
                pass

        def größe():
            return 1
    '''),
    "rich/syntax.py": "import pygments\n",
    "rich/_windows.py": "import sys\n",
    "rich/live/__init__.py": "",
    "rich/live/render.py": "",
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Fingerprint:
    root = tmp_path_factory.mktemp("scope") / "repo"
    gitrepo.commit(root, FILES)
    return Workspace(root, runner="thread").fingerprint(timeout_s=60)


def check(fp: Fingerprint, text: str, *raw: dict[str, Any]) -> verify.Verdict:
    return verify.verify(typed_anchors.parse(list(raw)), fp, 5000, text=text)


def sig(ref: str, params: str) -> dict[str, Any]:
    return {"type": "signature", "ref": ref, "params": params}


def val(ref: str, value: str) -> dict[str, Any]:
    return {"type": "value", "ref": ref, "value": value}


def absent(anchor: dict[str, Any]) -> dict[str, Any]:
    return {"type": "absent", "anchor": anchor}


# -- 1. a claim more specific than its anchor --------------------------------------------------


def test_parameters_a_symbol_anchor_never_checked_are_not_verified(tree: Fingerprint) -> None:
    text = "`track(total, sequence)` takes the total first."
    only_symbol = check(tree, text, {"type": "symbol", "ref": "rich.progress.track"})
    assert only_symbol.status == verify.PARTLY and only_symbol.uncovered == ("total", "sequence")
    assert only_symbol.label().startswith("partly anchored @") and "total, sequence not checked" in only_symbol.label()
    wrong = check(tree, text, sig("rich.progress.track", "total, sequence"))
    assert wrong.status == verify.REFUTED
    assert "takes (sequence, description='Working...', total=None, *, auto_refresh=True, **kwargs)" in wrong.evidence
    right = check(tree, "`track(sequence, description, total)`: total comes third.",
                  sig("rich.track", 'sequence, description: str = "Working...", total=None, *, auto_refresh=True, **kwargs'))
    assert right.status == verify.VERIFIED, right.evidence  # through the re-export, annotations and quotes normalized


def test_a_signature_anchor_reads_kinds_and_a_classs_init(tree: Fingerprint) -> None:
    assert check(tree, "", sig("rich.progress.track", "sequence, description='Working...', total=None, auto_refresh=True, "
                                                       "**kwargs")).status == verify.REFUTED  # keyword-only is a kind
    assert check(tree, "", sig("rich.progress.Progress", "self, *columns, console=None, transient=False")).status == verify.VERIFIED
    assert check(tree, "", sig("rich.progress.nothing", "x")).status == verify.REFUTED           # no such callable
    assert check(tree, "", sig("rich.console.Console", "self")).status == verify.INCONCLUSIVE    # no __init__ of its own


def test_a_value_anchor_states_the_literal_and_a_computed_one_is_inconclusive(tree: Fingerprint) -> None:
    text = "JUPYTER_DEFAULT_COLUMNS = 80"
    only_symbol = check(tree, text, {"type": "symbol", "ref": "rich.console.JUPYTER_DEFAULT_COLUMNS"})
    assert only_symbol.status == verify.PARTLY and only_symbol.uncovered == ("80",)
    wrong = check(tree, text, val("rich.console.JUPYTER_DEFAULT_COLUMNS", "80"))
    assert wrong.status == verify.REFUTED and "= 115 at rich/console.py:4, not 80" in wrong.evidence
    assert check(tree, "JUPYTER_DEFAULT_COLUMNS = 115", val("rich.console.JUPYTER_DEFAULT_COLUMNS", "115")).status == verify.VERIFIED
    assert check(tree, "", val("rich.console.Console.tab_size", "8")).status == verify.VERIFIED  # class level, annotated
    computed = check(tree, "", val("rich.console.WINDOWS", "False"))
    assert computed.status == verify.INCONCLUSIVE and "computed" in computed.evidence and "os.name" in computed.evidence
    assert check(tree, "", val("rich.console.NOPE", "1")).status == verify.REFUTED


def test_a_file_anchor_refuses_a_directory_and_a_dir_anchor_holds_for_one(tree: Fingerprint) -> None:
    one_file = check(tree, "", {"type": "file", "ref": "rich/live"})
    assert one_file.status == verify.REFUTED and "rich/live is a directory at HEAD, not a file" in one_file.evidence
    assert check(tree, "", {"type": "dir", "ref": "rich/live/"}).status == verify.VERIFIED
    assert check(tree, "", {"type": "dir", "ref": "rich/console.py"}).status == verify.REFUTED
    assert check(tree, "", {"type": "file", "ref": "rich/console.py"}).status == verify.VERIFIED
    assert check(tree, "", absent({"type": "dir", "ref": "rich/markdown"})).status == verify.VERIFIED


def test_a_sentence_wider_than_its_anchor_is_partly_anchored(tree: Fingerprint) -> None:
    windows = check(tree, "Rich dropped Windows support.", {"type": "file", "ref": "rich/_windows.py"})
    assert windows.status == verify.PARTLY and "'dropped'" in windows.label()
    deps = check(tree, "It depends on pygments, markdown-it-py and typing-extensions.",
                 {"type": "package", "ref": "pygments"}, {"type": "package", "ref": "markdown-it-py"})
    assert deps.status == verify.PARTLY and deps.uncovered == ("typing-extensions",)
    whole = check(tree, "It depends on pygments, markdown-it-py and typing-extensions.",
                  {"type": "package", "ref": "pygments"}, {"type": "package", "ref": "markdown-it-py"},
                  {"type": "package", "ref": "Typing_Extensions"})  # PEP 503: the same name
    assert whole.status == verify.VERIFIED, whole.evidence


# -- 2. look-alike identifiers -------------------------------------------------------------------


@pytest.mark.parametrize(("anchor", "fake", "real"), [
    (absent({"type": "import", "ref": "pygm\u0435nts"}), "pygm\u0435nts", "pygments"),
    (absent({"type": "symbol", "ref": "rich.table.Table.add_r\u043ew"}), "add_r\u043ew", "add_row"),
    (absent({"type": "import", "ref": "pygrnents"}), "pygrnents", "pygments"),  # ASCII: "rn" renders as "m"
])
def test_a_lookalike_of_a_workspace_name_neither_verifies_nor_passes_the_tool(
    tree: Fingerprint, anchor: dict[str, Any], fake: str, real: str,
) -> None:
    if not fake.isascii():  # a row stored before the tool refused them decides nothing either
        verdict = check(tree, "not used", anchor)
        assert verdict.status == verify.INCONCLUSIVE and "a look-alike" in verdict.evidence
    refused = names.lookalikes(typed_anchors.parse([anchor]), tree)
    assert len(refused) == 1 and repr(fake) in refused[0][2] and repr(real) in refused[0][2]
    assert "\n" not in refused[0][2]


def test_a_non_ascii_name_the_code_uses_verbatim_stays_allowed(tree: Fingerprint) -> None:
    anchor = typed_anchors.parse([{"type": "symbol", "ref": "rich.table.größe"}])
    assert names.lookalikes(anchor, tree) == []
    assert check(tree, "", {"type": "symbol", "ref": "rich.table.größe"}).status == verify.VERIFIED
    assert names.lookalikes(typed_anchors.parse([{"type": "import", "ref": "pygments"}]), tree) == []  # the real one
    assert names.lookalikes(typed_anchors.parse([{"type": "package", "ref": "Typing.Extensions"}]), tree) == []  # PEP 503: the same
    assert names.lookalikes(typed_anchors.parse([{"type": "import", "ref": "pygm\u0435nts"}]), None)  # no workspace: ASCII skeleton refused


# -- 3. the first retrieval's budget -------------------------------------------------------------

COLD = """
import asyncio, json, sys
from codecheck import verify
from codecheck.workspace import Workspace

ws = Workspace(sys.argv[1], runner="process")
ws.fingerprint(timeout_s=120)
before = set(sys.modules)
late: list[str] = []
started = []

def clock() -> float:
    import time
    if not started:  # the budget's clock starts here: what is imported from now on is paid inside it
        started.append(set(sys.modules))
    return time.perf_counter()

facts = [([{"type": "package", "ref": "pygments"}], "uses pygments"),
         ([{"type": "absent", "anchor": {"type": "import", "ref": "redis"}}], "no redis"),
         ([{"type": "signature", "ref": "rich.progress.track", "params": "sequence"}], "track")]
checked = asyncio.run(verify.check(ws, facts, 50, clock=clock))
after = set(sys.modules) - started[0]
print(json.dumps({"imported_inside_budget": sorted(m for m in after if not m.startswith("_")),
                  "statuses": [v.status for v in checked.verdicts],
                  "packaging_before_clock": "packaging.utils" in started[0]}))
"""


def test_the_first_retrieval_in_a_fresh_process_imports_nothing_inside_its_budget(tree: Fingerprint, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    gitrepo.commit(root, FILES)
    done = subprocess.run([sys.executable, "-c", COLD, str(root)], capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["packaging_before_clock"] is True
    assert result["imported_inside_budget"] == []
    assert len(result["statuses"]) == 3  # the verdicts themselves may vary with the load; what is imported inside may not


def test_the_new_kinds_render_what_they_state_on_a_facts_line() -> None:
    from ledgers import facts
    from untrusted import spotlight

    stored = typed_anchors.to_json(typed_anchors.parse([sig("rich.track", 'sequence,  total = None, *, x="a\\nb"'),
                                            val("rich.console.WIDTH", '"80"'), {"type": "dir", "ref": "rich/live/"}]))
    text = "".join(facts.anchor_text(a, spotlight.OPERATOR) for a in stored)
    assert text == (" ⟦signature ⟪data:rich.track(sequence, total=None, *, x='a\\nb')⟫⟧ ⟦value ⟪data:rich.console.WIDTH = '80'⟫⟧"
                    " ⟦dir ⟪data:rich/live⟫⟧")
    assert "\n" not in text  # the canonical forms are one line whatever was given


@settings(max_examples=200)
@given(st.one_of(st.text(max_size=40), st.sampled_from(["pygm\u0435nts", "add_r\u043ew", "Table", "rn", "\u0440ygments", "größe"])),
       st.sampled_from(["import", "symbol", "env", "file", "dir"]))
def test_any_name_against_the_workspace_is_allowed_or_refused_in_one_line(tree: Fingerprint, name: str, kind: str) -> None:
    ref = name if kind in ("import", "env", "file", "dir") else f"rich.table.{name}"
    try:
        parsed = typed_anchors.parse([absent({"type": kind, "ref": ref})])
    except typed_anchors.AnchorError as exc:
        assert "\n" not in str(exc)
        return
    for _, _, why in names.lookalikes(parsed, tree):
        assert "\n" not in why and "looks like" in why
    verdict = verify.verify(parsed, tree, 5000, text=name)
    assert verdict.status in verify.STATUSES
