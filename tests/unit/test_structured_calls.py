"""Tool calls through a JSON schema (`wake.think.structured`): the schema a turn offers for each
tool choice, and how an answer is read. The loop's checks after that are tested with a real
server in tests/live/test_llama.py and with a scripted one in tests/integration/test_think.py."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from wake.think import structured


def spec(name: str, properties: dict[str, Any] | None = None, required: tuple[str, ...] = ()) -> dict[str, Any]:
    params = {"type": "object", "properties": properties or {}, "required": list(required), "additionalProperties": False}
    return {"type": "function", "function": {"name": name, "description": f"the {name} tool", "parameters": params}}


SPECS = [spec("note", {"text": {"type": "string"}}, ("text",)), spec("clock")]


def valid(schema: dict[str, Any], value: Any) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def test_auto_offers_every_tool_and_the_final_answer() -> None:
    s = structured.schema(SPECS, "auto")
    assert valid(s, {"tool": "note", "arguments": {"text": "hi"}})
    assert valid(s, {"tool": "clock", "arguments": {}})
    assert valid(s, {"final": "done"})
    assert not valid(s, {"tool": "recall", "arguments": {}})  # outside the binding
    assert not valid(s, {"tool": "note", "arguments": {}})  # the tool's own schema holds


def test_required_offers_no_final_answer_and_none_offers_only_it() -> None:
    assert not valid(structured.schema(SPECS, "required"), {"final": "done"})
    assert valid(structured.schema(SPECS, "required"), {"tool": "clock", "arguments": {}})
    none = structured.schema(SPECS, "none")
    assert valid(none, {"final": "done"}) and not valid(none, {"tool": "clock", "arguments": {}})
    assert structured.offered(SPECS, "none") == []


def test_a_named_choice_offers_that_tool_alone() -> None:
    named = structured.schema(SPECS, "clock")
    assert valid(named, {"tool": "clock", "arguments": {}})
    assert not valid(named, {"tool": "note", "arguments": {"text": "x"}}) and not valid(named, {"final": "x"})
    assert [s["function"]["name"] for s in structured.offered(SPECS, "clock")] == ["clock"]


def test_no_tools_bound_leaves_only_the_final_answer() -> None:
    assert structured.schema([], "required") == structured.FINAL_BRANCH


def test_the_response_format_is_openais_structured_output_form() -> None:
    rf = structured.response_format(SPECS, "auto")
    assert rf["type"] == "json_schema" and rf["json_schema"]["name"] == structured.SCHEMA_NAME
    assert rf["json_schema"]["schema"] == structured.schema(SPECS, "auto")
    json.dumps(rf)  # it goes on the wire as is


@pytest.mark.parametrize(
    ("choice", "says"),
    [("auto", 'When you are done: {"final": "<your daybook entry'), ("required", "This turn you must call a tool."),
     ("none", 'Call no tool now: answer {"final":'), ("clock", "This turn you must call clock.")],
)
def test_the_instruction_says_how_to_finish(choice: str, says: str) -> None:
    text = structured.instruction(choice)
    assert '{"tool": "<name>", "arguments": {...}}' in text and says in text


def test_answers_are_read_never_guessed() -> None:
    call = structured.parse('{"tool": "note", "arguments": {"text": "x"}}')
    assert (call.tool, call.arguments, call.problem) == ("note", {"text": "x"}, None)
    assert structured.parse('  {"final": "all quiet"} ').final == "all quiet"
    for bad, why in [
        ("", "empty"), ("all quiet", "not JSON"), ("[1, 2]", "JSON object"), ('{"tool": 3}', "tool's name"), ('{"x": 1}', "expected"),
        ('{"final": 3}', "expected"),
    ]:
        answer = structured.parse(bad)
        assert answer.tool is None and answer.final is None and answer.problem is not None and why in answer.problem, bad


def test_a_final_answer_cut_by_the_token_limit_is_read_as_far_as_it_goes() -> None:
    assert structured.parse('{\n  "final": "I saw the \\"build\\" pas', cut=True).final == 'I saw the "build" pas'
    assert structured.parse('{"final": "I saw', cut=False).problem is not None  # not cut: malformed
    assert structured.parse('{"tool": "no', cut=True).problem is not None  # a cut call is no call


def test_a_parsed_call_keeps_the_models_arguments_for_the_loops_own_check() -> None:
    call = structured.as_tool_call(structured.Answer(tool="note", arguments=["not", "an", "object"]), "c1")
    assert call == {"id": "c1", "type": "function", "function": {"name": "note", "arguments": '["not", "an", "object"]'}}
    assert structured.tool_result_message("note", '{"ok": true}') == {"role": "user", "content": 'The tool note answered:\n{"ok": true}'}


def test_the_system_text_names_each_tool_its_purpose_and_its_arguments() -> None:
    text = structured.system_text(SPECS)
    assert text.startswith("The tools you hold in this wake:\n- note: the note tool Arguments: {")
    assert '"required":["text"]' in text and "- clock: the clock tool" in text and text.endswith(structured.instruction("auto"))
    assert structured.declarations([]) == "You hold no tools in this wake."
