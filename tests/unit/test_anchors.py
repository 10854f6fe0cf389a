"""Typed anchors: parsing and validation from JSON, path escapes, the tool schema, prose inference."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from codecheck import typed_anchors
from codecheck.typed_anchors import Anchor, AnchorError


def test_each_kind_parses_to_its_typed_form_and_back() -> None:
    raw: list[dict[str, Any]] = [
        {"type": "file", "ref": "pkg/./mod.py"},
        {"type": "import", "ref": "httpcore", "where": "httpx/_transports/"},
        {"type": "import", "ref": "zlib", "where": "httpx._decoders.GZipDecoder"},
        {"type": "symbol", "ref": "httpx._client.Client.send"},
        {"type": "env", "ref": "SSL_CERT_FILE", "where": "httpx/_config.py"},
        {"type": "package", "ref": "Foo_Bar", "ecosystem": "python"},
        {"type": "package", "ref": "@scope/left-pad", "ecosystem": "npm"},
        {"type": "absent", "anchor": {"type": "import", "ref": "redis"}},
        {"type": "message", "ref": "0b6c1f7e-2f7e-4d55-9d7e-2a1c3f4e5d6a"},
        {"type": "env", "ref": "HOME", "inferred": True},
    ]
    parsed = typed_anchors.parse(raw)
    assert parsed[0] == Anchor(type="file", ref="pkg/mod.py")  # normalized
    assert parsed[1].where == "httpx/_transports"                # a trailing slash is the same directory
    assert parsed[2].where == "httpx._decoders.GZipDecoder"      # a dotted place is kept as a name
    assert parsed[7] == Anchor(type="import", ref="redis", negated=True)
    assert parsed[8].is_code is False and all(a.is_code for a in parsed[:8])
    assert parsed[9].inferred
    assert typed_anchors.to_json(parsed)[7] == {"type": "absent", "anchor": {"type": "import", "ref": "redis"}}
    assert typed_anchors.parse(json.dumps(typed_anchors.to_json(parsed))) == parsed  # the JSON text form round-trips
    assert parsed[7].describe() == "absent import redis"


@pytest.mark.parametrize(("raw", "message"), [
    ({"type": "import", "ref": "a b"}, r"anchors\[0\] \(import 'a b'\): ref must be a dotted Python name"),
    ({"type": "symbol", "ref": "Client"}, r"anchors\[0\] \(symbol 'Client'\): ref must be qualified with its module"),
    ({"type": "import", "ref": "x", "wher": "y"}, r"anchors\[0\] \(import 'x'\): .*unknown key 'wher'"),
    ({"type": "file", "ref": "x", "where": "y"}, r"unknown key 'where'"),
    ({"type": "env", "ref": "A=B"}, r"anchors\[0\] \(env 'A=B'\): .*not an environment variable name"),
    ({"type": "package", "ref": "-bad-"}, r"not a distribution name"),
    ({"type": "package", "ref": "x", "ecosystem": "cargo"}, r"ecosystem must be one of python, npm"),
    ({"type": "absent", "anchor": {"type": "absent", "anchor": {"type": "file", "ref": "x"}}}, r"not another absent"),
    ({"type": "absent", "anchor": {"type": "message", "ref": "x"}}, r"\(absent message 'x'\): absent wraps a code anchor"),
    ({"type": "absent", "anchor": {"type": "file", "ref": "x", "inferred": True}}, r"unknown key 'inferred'"),
    ({"type": "hunch", "ref": "x"}, r"anchors\[0\] \(hunch 'x'\): type must be one of file, dir, import"),
    ({"type": "file", "ref": "  "}, r"needs a non-empty string ref"),
    ({"type": "env", "ref": "HOME", "inferred": "yes"}, r"inferred must be true or false"),
    ("not an object", r"anchors\[0\] \(str\): must be an object"),
])
def test_bad_input_is_one_error_naming_the_anchor(raw: Any, message: str) -> None:
    with pytest.raises(AnchorError, match=message):
        typed_anchors.parse([raw])


def test_the_error_names_the_first_bad_anchor_and_nothing_is_half_accepted() -> None:
    with pytest.raises(AnchorError, match=r"^anchors\[1\] \(import '1x'\)"):
        typed_anchors.parse([{"type": "file", "ref": "ok.py"}, {"type": "import", "ref": "1x"}, {"type": "bogus"}])
    with pytest.raises(AnchorError, match="anchors must be a JSON list"):
        typed_anchors.parse({"type": "file", "ref": "x"})
    with pytest.raises(AnchorError, match="not valid JSON"):
        typed_anchors.parse("[{")


@pytest.mark.parametrize(("anchor", "message"), [
    ({"type": "file", "ref": "/etc/passwd"}, "is absolute"),
    ({"type": "file", "ref": "../outside.py"}, r"'\.\.' escapes the workspace: '\.\./outside\.py' normalizes to '\.\./outside\.py'"),
    ({"type": "file", "ref": "pkg/../../outside.py"}, r"'\.\.' escapes the workspace: .* normalizes to '\.\./outside\.py'"),
    ({"type": "file", "ref": "pkg\\mod.py"}, "must use '/' separators"),
    ({"type": "file", "ref": "."}, "the workspace root itself"),
    ({"type": "import", "ref": "x", "where": "../elsewhere/"}, r"'\.\.' escapes the workspace"),
    ({"type": "env", "ref": "X", "where": "/abs/dir"}, "is absolute"),
    ({"type": "file", "ref": "a\x00b"}, "NUL"),
])
def test_paths_that_escape_the_workspace_are_refused(anchor: dict[str, Any], message: str) -> None:
    with pytest.raises(AnchorError, match=message):
        typed_anchors.parse([anchor])


def test_a_dotdot_that_stays_inside_is_normalized_not_refused() -> None:
    assert typed_anchors.parse([{"type": "file", "ref": "pkg/sub/../mod.py"}])[0].ref == "pkg/mod.py"


def test_the_tool_schema_is_valid_and_agrees_with_the_parser() -> None:
    jsonschema.Draft202012Validator.check_schema(typed_anchors.JSON_SCHEMA)
    validator = jsonschema.Draft202012Validator(typed_anchors.JSON_SCHEMA)
    good = [
        {"type": "import", "ref": "httpcore", "where": "httpx/_transports"},
        {"type": "absent", "anchor": {"type": "package", "ref": "redis"}},
        {"type": "url", "ref": "https://example.org"},
        {"type": "symbol", "ref": "a.B", "inferred": True},
    ]
    assert list(validator.iter_errors(good)) == []
    typed_anchors.parse(good)
    for bad in ([{"type": "file", "ref": "x", "where": "y"}], [{"type": "absent", "anchor": {"type": "url", "ref": "x"}}],
                [{"type": "package", "ref": "x", "ecosystem": "cargo"}], [{"type": "nope", "ref": "x"}]):
        assert list(validator.iter_errors(bad)), bad
        with pytest.raises(AnchorError):
            typed_anchors.parse(bad)
    # the portable subset: no `const`, no regex character classes anywhere in it
    text = json.dumps(typed_anchors.JSON_SCHEMA)
    assert '"const"' not in text and "\\\\d" not in text and "\\\\w" not in text


def test_prose_gives_inferred_anchors_only() -> None:
    found = typed_anchors.infer("We use `fastmcp`; `src/server.py` does `from mcp.server.fastmcp import FastMCP` and reads $MCP_TOKEN.")
    assert {(a.type, a.ref) for a in found} >= {
        ("import", "fastmcp"), ("file", "src/server.py"), ("import", "mcp.server.fastmcp"), ("env", "MCP_TOKEN"),
    }
    assert all(a.inferred for a in found)
    assert typed_anchors.infer("nothing to see here") == []
    assert typed_anchors.infer("`../../etc/passwd` is read") == []  # an escaping path is not even guessed
