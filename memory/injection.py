"""What in a memory file reads as an instruction to the agent rather than a note of the agent's:
the canary's injection rules (docs/memory.md, "Injection").

Memory is read back at every wake as the agent's own notes, so text that gets into it (copied
from a tool result, planted by a crafted query) is a way to give the agent orders on every later
wake. The scan looks at the lines a change added, and raises, at the domain's severity:

- `injection.invisible`: characters a reader does not see and a model does: Unicode tag
  characters (U+E0000-U+E007F, which spell ASCII invisibly), bidirectional embeddings, overrides
  and isolates (U+202A-U+202E, U+2066-U+2069), and runs of two or more zero-width characters
  (U+200B-U+200D, U+2060, U+FEFF; one alone joins emoji and scripts);
- `injection.instruction`: an instruction addressed to the model (ignore previous instructions,
  a forged system or chat-template turn, "from now on you must ...");
- `injection.trigger`: a conditional order keyed to a word or an event (when you see X, call Y),
  the shape of backdoor triggers planted in agent memory;
- `injection.tool_order`: an order to call a tool or send data somewhere.

Patterns are English and deliberately narrow: a note that *describes* an attack in other words is
not flagged; the table of payloads and verdicts in docs/memory.md is the test of record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TAGS = re.compile("[\U000e0000-\U000e007f]")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
_ZERO_WIDTH_RUN = re.compile("[\u200b\u200c\u200d\u2060\ufeff]{2,}")

_INSTRUCTION = re.compile(
    r"\b(ignore|disregard|forget|override)\s+(all\s+|any\s+|the\s+|your\s+)?(previous|prior|above|earlier|preceding|system|original)\s+"
    r"(instructions?|rules|directions|prompts?|guidelines)"
    r"|^\s*(\[?(system|assistant|developer)\]?\s*:|<\|?(system|im_start|im_end)\|?>|\[/?INST\])"
    r"|\bfrom\s+now\s+on,?\s+(you\s+(must|will|should|are\s+to)|always|never)\b"
    r"|\b(new|updated|real|important)\s+instructions?\s*:"
    r"|\byou\s+are\s+no\s+longer\b",
    re.IGNORECASE | re.MULTILINE,
)
_TRIGGER = re.compile(
    r"\b(when(ever)?|if)\s+(you\s+)?(see|read|encounter|receive|notice|are\s+asked|get\s+asked|asked|the\s+user\s+(says|mentions|asks))\s+.{1,60}?,?\s*"
    r"(always\s+|you\s+must\s+|immediately\s+|then\s+)?(call|invoke|run|execute|send|reply|respond|answer|output|say|delete)\b",
    re.IGNORECASE,
)
_TOOL_ORDER = re.compile(
    r"\b(call|invoke|run|execute|use)\s+the\s+[`'\"]?[a-z][a-z0-9_]*[`'\"]?\s+tool\b"
    r"|\b(send|post|upload|forward|exfiltrate)\s+(it|this|them|all|everything|the\s+\w+)(\s+\w+)?\s+to\s+(https?://|\S+@\S+)",
    re.IGNORECASE,
)
RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("injection.instruction", _INSTRUCTION), ("injection.trigger", _TRIGGER), ("injection.tool_order", _TOOL_ORDER),
)


@dataclass(frozen=True, kw_only=True)
class Hit:
    rule: str
    excerpt: str  # the line it is on, invisible characters shown as <U+XXXX>


def visible(text: str) -> str:
    """`text` with every invisible character the scan knows shown as `<U+XXXX>`."""
    def show(m: re.Match[str]) -> str:
        return "".join(f"<U+{ord(c):04X}>" for c in m.group(0))

    for pattern in (_TAGS, _BIDI, re.compile("[\u200b\u200c\u200d\u2060\ufeff]")):
        text = pattern.sub(show, text)
    return text


def added_lines(old: str | None, new: str) -> str:
    """The lines of `new` that `old` does not have (all of `new` for a new file)."""
    if old is None:
        return new
    before = set(old.splitlines())
    return "\n".join(line for line in new.splitlines() if line not in before)


def scan(text: str) -> list[Hit]:
    """Each rule's first hit in `text`, in rule order (invisible first)."""
    hits: list[Hit] = []
    for line in text.splitlines():
        if _TAGS.search(line) or _BIDI.search(line) or _ZERO_WIDTH_RUN.search(line):
            hits.append(Hit(rule="injection.invisible", excerpt=visible(line)[:300]))
            break
    for rule, pattern in RULES:
        match = pattern.search(text)
        if match is not None:
            start, end = text.rfind("\n", 0, match.start()) + 1, text.find("\n", match.end())
            hits.append(Hit(rule=rule, excerpt=visible(text[start:end if end >= 0 else len(text)])[:300]))
    return hits
