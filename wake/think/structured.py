"""Tool calls through a JSON schema: a route's `tool_calls = "json_schema"` (docs/model.md).

Many small or local models call tools poorly through a server's native tool calls: they answer in
prose, or name a tool in text. A server that enforces `response_format` with a JSON schema (llama.cpp
turns it into a grammar; vLLM, Ollama and OpenRouter's structured outputs do the same) can be made to
answer in exactly one shape. This module is that shape and its reading; the loop (`wake.think.loop`)
does the rest exactly as for a native call: binding check, argument schema check, refusal counted,
fenced execution, transcript, budgets.

The schema is a choice (`anyOf`) between one object per bound tool, `{"tool": <its name>,
"arguments": <its parameters>}`, and a final answer, `{"final": <text>}`. The tool choice of the
turn narrows it:

| tool choice | the choice offered |
|---|---|
| `auto` | every bound tool, and the final answer |
| `required` | every bound tool, no final answer |
| `none` | the final answer only (the budget's summary call) |
| a tool's name | that tool alone |

The model is told the shape in the system message (`system_text`): each bound tool's name,
description and parameters (what a native call's template would have rendered, since the grammar
alone names no purpose), then how to call and how to finish: answer `{"final": "..."}`, whose text
is the daybook entry. The schema itself constrains generation and takes no room in the prompt. The schema is derived from the tools the
manifest already hashes, so what was offered is witnessed either way.

The grammar holds the *shape*; it is not the check. A server may enforce a schema only in part
(formats, patterns, bounds), or not at all: every answer is parsed and every call still goes
through the loop's checks, so a call outside the binding is refused and counted as with native
calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ledgers import transcripts

FINAL = "final"
SCHEMA_NAME = "wake_action"
ToolCalls = Literal["native", "json_schema"]

INSTRUCTION = (
    "Answer with one JSON object and nothing else. To call a tool: "
    '{{"tool": "<name>", "arguments": {{...}}}}, with arguments matching that tool\'s parameters; '
    "its answer comes back to you in the next message. {finish}"
)
FINISH = {
    "auto": 'When you are done: {"final": "<your daybook entry for this wake>"}.',
    "required": "This turn you must call a tool.",
    "none": 'Call no tool now: answer {"final": "<your daybook entry for this wake>"}.',
    "named": "This turn you must call {name}.",
}


def _is_named(choice: str) -> bool:
    return choice not in ("auto", "required", "none")


def _tool_branch(spec: dict[str, Any]) -> dict[str, object]:
    fn = spec["function"]
    parameters = dict(fn.get("parameters") or {"type": "object"})
    return {
        "type": "object",
        "properties": {"tool": {"type": "string", "enum": [fn["name"]]}, "arguments": parameters},
        "required": ["tool", "arguments"],
        "additionalProperties": False,
    }


FINAL_BRANCH: dict[str, object] = {
    "type": "object", "properties": {FINAL: {"type": "string"}}, "required": [FINAL], "additionalProperties": False,
}


def offered(specs: Sequence[dict[str, Any]], choice: str) -> list[dict[str, object]]:
    """The tool declarations a turn with this tool choice offers (all of them, one, or none)."""
    if choice == "none":
        return []
    if _is_named(choice):
        return [s for s in specs if s["function"]["name"] == choice]
    return list(specs)


def schema(specs: Sequence[dict[str, object]], choice: str) -> dict[str, object]:
    """The JSON schema of one turn's answer: a choice of the offered tools' calls, and the final
    answer unless the turn must call a tool."""
    branches = [_tool_branch(s) for s in offered(specs, choice)]
    if choice in ("auto", "none") or not branches:
        branches.append(FINAL_BRANCH)
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def response_format(specs: Sequence[dict[str, object]], choice: str) -> dict[str, object]:
    """The request's `response_format` (OpenAI's structured-output form, which llama.cpp, vLLM,
    Ollama's OpenAI endpoint and OpenRouter accept)."""
    return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": schema(specs, choice)}}


def declarations(specs: Sequence[dict[str, Any]]) -> str:
    """The bound tools as the model reads them: one line each, name, description, parameters."""
    if not specs:
        return "You hold no tools in this wake."
    lines = ["The tools you hold in this wake:"]
    for spec in specs:
        fn = spec["function"]
        params = json.dumps(fn.get("parameters") or {}, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        lines.append(f"- {fn['name']}: {fn.get('description') or ''} Arguments: {params}")
    return "\n".join(lines)


def system_text(specs: Sequence[dict[str, object]]) -> str:
    """What the system message adds for a JSON-schema route: the tools, then the answer's shape."""
    return declarations(specs) + "\n" + instruction("auto")


def instruction(choice: str) -> str:
    """The system text that tells the model the shape and how to finish."""
    finish = FINISH["named"].format(name=choice) if _is_named(choice) else FINISH[choice]
    return INSTRUCTION.format(finish=finish)


@dataclass(frozen=True, kw_only=True)
class Answer:
    """One answer read: a tool call (`tool`, `arguments` as the model wrote them), a final text,
    or neither (`problem` says why; the loop answers it as an error, like a malformed native call)."""

    tool: str | None = None
    arguments: object = None
    final: str | None = None
    problem: str | None = None


_CUT_FINAL = re.compile(r'^\s*\{\s*"final"\s*:\s*"((?:[^"\\]|\\.)*)\\?$', re.DOTALL)


def cut_final(text: str) -> str | None:
    """The text of a final answer the token limit cut off inside its string (`{"final": "I saw`),
    or None: the loop keeps it marked as cut off, as it does a native answer that hit the limit."""
    m = _CUT_FINAL.match(text)
    if m is None:
        return None
    try:
        return str(json.loads(f'"{m.group(1)}"'))
    except ValueError:
        return m.group(1)


def parse(content: str | None, *, cut: bool = False) -> Answer:
    """Read an answer in the schema's shape. Nothing here trusts the grammar: a reply that is not
    JSON, or not one of the shapes, is a problem, never a guess. `cut`: the reply hit its token
    limit, so a final answer cut inside its text is read as far as it goes."""
    text = (content or "").strip()
    if not text:
        return Answer(problem="the answer was empty; expected one JSON object")
    try:
        value = json.loads(text)
    except ValueError as exc:
        partial = cut_final(text) if cut else None
        if partial is not None:
            return Answer(final=partial)
        return Answer(problem=f"the answer is not JSON: {exc}")
    if not isinstance(value, dict):
        return Answer(problem="the answer must be a JSON object")
    if "tool" in value:
        tool = value["tool"]
        if not isinstance(tool, str) or not tool:
            return Answer(problem="'tool' must be a tool's name")
        return Answer(tool=tool, arguments=value.get("arguments", {}))
    if FINAL in value and isinstance(value[FINAL], str):
        return Answer(final=value[FINAL])
    return Answer(problem='expected {"tool": ..., "arguments": {...}} or {"final": "..."}')


def as_tool_call(answer: Answer, call_id: str) -> dict[str, object]:
    """A parsed call in the OpenAI `tool_calls` form the loop answers, its arguments as JSON text
    (so a non-object reaches the loop's own argument check unchanged)."""
    arguments = answer.arguments if isinstance(answer.arguments, str) else json.dumps(answer.arguments, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": answer.tool, "arguments": arguments}}


def tool_result_message(name: str, content: str) -> dict[str, object]:
    """A tool's answer, sent back as a user message: a server asked for JSON answers has no native
    call for a `tool` message to answer."""
    return {"role": "user", "content": transcripts.STRUCTURED_ANSWER.format(tool=name) + content}
