"""Tool schemas may use only the regular expressions grammar-constrained servers compile."""

from __future__ import annotations

from typing import Any

import pytest

from surfaces import loader, schema_patterns
from surfaces.errors import DeclarationError
from surfaces.registry import Registry, Tool


async def _handler(ctx: Any, **kw: Any) -> None:
    return None


def _tool(parameters: dict[str, Any]) -> Tool:
    return Tool(name="dated", description="d", parameters=parameters, version="1", handler=_handler, mutates=False, surfaces=frozenset({"wake"}))


@pytest.mark.parametrize(("pattern", "words"), [
    (r"^\d{4}-\d{2}-\d{2}$", "uses \\d (write [0-9])"),
    (r"^\w+$", "uses \\w"),
    (r"^a\sb$", "uses \\s"),
    (r"^\bword\b$", "word boundary"),
    (r"^[\d-]+$", "uses \\d (write [0-9]) inside a character class"),
    ("^(?=x)x$", "lookaround"),
    ("^(?<!x)y$", "lookaround"),
    ("^(?P<n>x)$", "named group"),
    (r"^(a)\1$", "backreference \\1"),
    ("^a+?$", "lazy or possessive"),
    ("^[0-9]{2}", "not anchored"),
    ("[0-9]{2}$", "not anchored"),
    ("^a|^b$", "anchor '^' inside"),
    ("^[[:alpha:]]$", "nests '['"),
    ("^a{x}$", "not a repetition"),
    (r"^a\/b$", "uses the escape \\/"),
    (r"^[\^a]$", "uses the escape \\^ inside a character class"),
])
def test_constructs_grammar_compilers_cannot_take_are_named(pattern: str, words: str) -> None:
    why = schema_patterns.problem(pattern)
    assert why is not None and words in why, why


@pytest.mark.parametrize("pattern", [
    "^[0-9]{4}-[0-9]{2}-[0-9]{2}$", "^[A-Z][A-Z0-9_]{0,63}$", "^[0-9a-fA-F-]{32,36}$", r"^a\.b\+c$", "^(?:ab|cd)*x?$",
    r"^[^\n\]]+$", r"^\x41\u00e9.$", "^[a-z]{2,}$",
])
def test_the_portable_subset_passes(pattern: str) -> None:
    assert schema_patterns.problem(pattern) is None


def test_registration_refuses_a_nested_pattern_naming_the_tool_and_where() -> None:
    params = {
        "type": "object",
        "properties": {"when": {"type": "array", "items": {"type": "string", "pattern": r"^\d+$"}}},
    }
    with pytest.raises(DeclarationError) as caught:
        Registry().register(_tool(params))
    message = str(caught.value)
    assert message.startswith("tool 'dated' (builtin): parameters.properties.when.items.pattern '^\\\\d+$' uses \\d"), message
    assert "grammars" in message


def test_pattern_properties_keys_are_patterns_too_and_enum_values_are_not() -> None:
    params = {"type": "object", "patternProperties": {r"^\w+$": {"type": "string"}}}
    with pytest.raises(DeclarationError, match="patternProperties key"):
        Registry().register(_tool(params))
    plain = {"type": "object", "properties": {"pattern": {"type": "string", "enum": ["\\d"]}}}
    assert Registry().register(_tool(plain)).name == "dated"  # a property named "pattern" is not a regex


def test_every_built_in_tool_passes() -> None:
    registry = loader.build((), (), entry_points=False, graph=True)
    found = [p for t in registry for _, p in schema_patterns.patterns(t.parameters)]
    assert "^[0-9]{4}-[0-9]{2}-[0-9]{2}$" in found  # add_commitment.due_on
    assert all(schema_patterns.problem(p) is None for p in found)
