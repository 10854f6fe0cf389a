"""The rule that keeps a verdict to what was checked (codecheck.coverage): which words of a value
are claims, and which anchors cover them."""

from __future__ import annotations

from typing import Any

import pytest

from codecheck import coverage, typed_anchors


def uncovered(value: str, *raw: dict[str, Any]) -> list[str]:
    return coverage.uncovered(value, typed_anchors.parse(list(raw)))


SYM = {"type": "symbol", "ref": "httpx._client.Client.send"}


@pytest.mark.parametrize(("value", "missing"), [
    ("Client.send sends the request.", []),                                    # a dotted name covered part by part
    ("Client.send retries 3 times.", ["3"]),                                   # a number standing alone
    ("Client.send is faster than requests.Session.", ["requests.Session"]),   # a dotted name no anchor names
    ("Client.send calls `build_request`.", ["build_request"]),                 # backticks
    ("Client.send runs on Windows.", ["Windows"]),                             # a capitalised word mid-sentence
    ("Windows runs Client.send.", []),                                         # ... not at the start
    ("Client.send speaks HTTP and JSON.", []),                                 # abbreviations are not names
    ("Client.send never retries.", ["'never' (an absence no absent anchor states)"]),
    ("It pools, caches and queues.", []),                                      # a list none of whose words an anchor names
    ("It uses send, certifi and idna.", ["certifi", "idna"]),                  # a list one of whose words it names
    ("send, exported as Client.send.", []),                                    # no and/or: not a list
])
def test_claims_and_what_covers_them(value: str, missing: list[str]) -> None:
    assert uncovered(value, SYM) == missing


def test_no_code_anchor_covers_nothing_and_claims_nothing() -> None:
    assert uncovered("Client.send retries 3 times.", {"type": "url", "ref": "https://x.org"}) == []
    assert coverage.describe(["a", "b", "c", "d", "e", "f", "g"]) == "a, b, c, d, e, f and 1 more not checked"


def test_an_absent_anchor_covers_an_absence_and_a_file_covers_its_words() -> None:
    assert uncovered("rich does not use Pygments.", {"type": "absent", "anchor": {"type": "import", "ref": "pygments"}}) == []
    assert uncovered("rich/_windows.py detects Windows.", {"type": "file", "ref": "rich/_windows.py"}) == []
    assert uncovered("It needs Typing-Extensions and pygments.", {"type": "package", "ref": "typing_extensions"},
                     {"type": "package", "ref": "pygments"}) == []  # PEP 503 names
