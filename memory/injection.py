"""What in a memory file reads as an instruction to the agent rather than a note of the agent's:
the canary's injection rules (docs/memory.md, "Injection").

Memory is read back at every wake as the agent's own notes, so text that gets into it (copied
from a tool result, planted by a crafted query) is a way to give the agent orders on every later
wake. The scan looks at the lines a change added, and raises, at the domain's severity:

- `injection.invisible`: characters a reader does not see and a model does: Unicode tag
  characters (U+E0000-U+E007F, which spell ASCII invisibly), bidirectional embeddings, overrides
  and isolates (U+202A-U+202E, U+2066-U+2069), and runs of two or more zero-width characters
  (U+200B-U+200D, U+2060, U+FEFF; one alone joins emoji and scripts), invisible operators
  (U+2061-U+2064) and the variation selectors supplement (U+E0100-U+E01EF), which no note needs;
- `injection.instruction`: an instruction addressed to the model (ignore previous instructions,
  a forged system or chat-template turn, "from now on you must ...");
- `injection.trigger`: a conditional order keyed to a word or an event (when you see X, call Y),
  the shape of backdoor triggers planted in agent memory;
- `injection.tool_order`: an order to call a tool or send data somewhere, or a markdown image
  whose address carries a query (the shape of exfiltration through a rendered image);
- `injection.encoded`: a base64 or hex run, or a line in rot13, that decodes to text one of the
  rules above flags (an order hidden by encoding it).

The patterns run on the text as `untrusted.folding.unconfused` reads it (NFKC, invisible characters
removed, non-ASCII look-alikes of ASCII letters replaced by them: UAX #15 and TS #39), so a
zero-width space inside "Ig\u200bnore", a Cyrillic "о" or fullwidth letters do not step around
them; the excerpt is cut from the text as written. Patterns are English and deliberately narrow: a note that *describes* an attack in other words is
not flagged; the table of payloads and verdicts in docs/memory.md is the test of record.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import contextlib
import re
from dataclasses import dataclass

from untrusted import folding

_TAGS = re.compile("[\U000e0000-\U000e007f\U000e0100-\U000e01ef\u2061-\u2064]")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
_ZERO_WIDTH_RUN = re.compile("[\u200b\u200c\u200d\u2060\ufeff]{2,}")

_INSTRUCTION = re.compile(
    r"\b(ignore|disregard|forget|override)\s+(all\s+|any\s+|the\s+|your\s+)?(previous|prior|above|earlier|preceding|system|original)\s+"
    r"(instructions?|rules|directions|prompts?|guidelines)"
    r"|^\s*(\[?(system|assistant|developer)\]?\s*:|<\|?(system|im_start|im_end)\|?>|\[/?INST\])"
    r"|\b(system|developer|admin(istrator)?)\s+(message|prompt|note|notice|override|instructions?)\s*:"
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
    r"|\b(send|post|upload|forward|exfiltrate)\s+(it|this|them|all|everything|the\s+\w+)(\s+\w+)?\s+to\s+(https?://|\S+@\S+)"
    r"|!\[[^\]]*\]\(\s*https?://[^)\s]*\?[^)\s]*=",
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


_BASE64 = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}")
_HEX = re.compile(r"\b(?:[0-9a-fA-F]{2}){16,}\b")


def _decoded(line: str) -> list[str]:
    """What an encoded run in `line` (base64, hex) or the line in rot13 reads as, when it is text."""
    out = [codecs.decode(line, "rot13")]
    for run in _BASE64.findall(line):
        with contextlib.suppress(ValueError, binascii.Error):
            out.append(base64.b64decode(run + "=" * (-len(run) % 4), validate=True).decode("utf-8"))
    for run in _HEX.findall(line):
        with contextlib.suppress(ValueError):
            out.append(bytes.fromhex(run).decode("utf-8"))
    return out


def scan(text: str) -> list[Hit]:
    """Each rule's first hit in `text`, in rule order (invisible first). The rules read each line
    as `untrusted.folding.unconfused` folds it; the excerpt is the line as written, its invisible
    characters shown."""
    hits: list[Hit] = []
    lines = text.splitlines()
    for line in lines:
        if _TAGS.search(line) or _BIDI.search(line) or _ZERO_WIDTH_RUN.search(line):
            hits.append(Hit(rule="injection.invisible", excerpt=visible(line)[:300]))
            break
    folded = [folding.unconfused(line) for line in lines]
    joined = "\n".join(folded)
    starts = [0]
    for line in folded:
        starts.append(starts[-1] + len(line) + 1)
    for rule, pattern in RULES:
        match = pattern.search(joined)
        if match is not None:
            first = max(i for i, at in enumerate(starts) if at <= match.start())
            last = max(i for i, at in enumerate(starts) if at <= max(match.end() - 1, match.start()))
            hits.append(Hit(rule=rule, excerpt=visible("\n".join(lines[first:last + 1]))[:300]))
    for line, plain in zip(lines, folded, strict=True):
        if any(pattern.search(decoded) for decoded in _decoded(plain) for _, pattern in RULES):
            hits.append(Hit(rule="injection.encoded", excerpt=visible(line)[:300]))
            break
    return hits
