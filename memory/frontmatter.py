"""Frontmatter as schema: every memory file opens with a YAML block that says what it is.

Parsed with python-frontmatter (its YAML handler, safe loading), never by hand. The rules a write
must pass before it is committed, each refusal naming its rule:

- `frontmatter.yaml`: the block is valid YAML (refused with one line: the problem and where);
- `frontmatter.mapping`: the block is a mapping of keys to values;
- `frontmatter.description`: `description` is present, a string, and not blank;
- `frontmatter.read_only`: a file whose committed version says `read_only: true` is not written;
  `read_only`, when present, is true or false.

A document's *fields* are its frontmatter keys and its body's markdown headings (`## Principles`
is the field `principles`): the canary's domains name the fields they expect in either form.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import yaml
from frontmatter.default_handlers import YAMLHandler

from memory.errors import FrontmatterRefused

_HANDLER = YAMLHandler()
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


@dataclass(frozen=True, kw_only=True)
class Document:
    metadata: dict[str, object]
    body: str

    @property
    def description(self) -> str:
        value = self.metadata.get("description")
        return value.strip() if isinstance(value, str) else ""

    @property
    def read_only(self) -> bool:
        return self.metadata.get("read_only") is True


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        # the block starts on the opening `---` line itself (what follows the dashes), so its
        # 0-based line is the file's 1-based line less one
        return f"{exc.problem or exc.context or 'unreadable'} (line {mark.line + 1}, column {mark.column + 1})"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def parse(text: str) -> Document:
    """The frontmatter and body of `text`; a file without a frontmatter block has no metadata."""
    if not _HANDLER.detect(text):
        return Document(metadata={}, body=text)
    try:
        block, body = _HANDLER.split(text)
    except ValueError:
        raise FrontmatterRefused("frontmatter.yaml", "the frontmatter opens with '---' but is never closed by another '---' line") from None
    try:
        loaded = _HANDLER.load(block)
    except yaml.YAMLError as exc:
        raise FrontmatterRefused("frontmatter.yaml", f"the frontmatter is not valid YAML: {_yaml_problem(exc)}") from None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise FrontmatterRefused("frontmatter.mapping", f"the frontmatter must be a mapping of keys to values, not a {type(loaded).__name__}")
    return Document(metadata={str(k): v for k, v in loaded.items()}, body=body)


def validate(text: str) -> Document:
    """`text` parsed, refused unless its frontmatter is a valid schema: a non-blank description,
    a boolean read_only."""
    doc = parse(text)
    if "description" not in doc.metadata:
        raise FrontmatterRefused(
            "frontmatter.description",
            "the file needs a frontmatter with a description, e.g. '---\\ndescription: what this file holds\\n---'",
        )
    if not isinstance(doc.metadata["description"], str) or not doc.description:
        raise FrontmatterRefused("frontmatter.description", "the frontmatter's description must be a non-empty string")
    if "read_only" in doc.metadata and not isinstance(doc.metadata["read_only"], bool):
        raise FrontmatterRefused("frontmatter.read_only", "read_only must be true or false")
    return doc


def check_write(path: str, text: str, committed: str | None, *, override_read_only: bool = False) -> Document:
    """The rules a write of `text` over the `committed` version of `path` must pass."""
    if committed is not None and not override_read_only:
        try:
            old = parse(committed)
        except FrontmatterRefused:
            old = None
        if old is not None and old.read_only:
            raise FrontmatterRefused("frontmatter.read_only", f"{path} is read_only: true; the memory tool does not write it")
    return validate(text)


def field_name(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.strip().lower()).strip("_")


def sections(body: str) -> dict[str, str]:
    """The body's headed sections: heading as a field name -> the text under it, up to the next
    heading of the same or a higher level."""
    found: dict[str, str] = {}
    heads = list(_HEADING.finditer(body))
    for index, head in enumerate(heads):
        level = len(head.group(1))
        end = len(body)
        for later in heads[index + 1:]:
            if len(later.group(1)) <= level:
                end = later.start()
                break
        found.setdefault(field_name(head.group(2)), body[head.end():end].strip())
    return found


def fields(doc: Document) -> dict[str, str]:
    """Every field of a document with its value as text: frontmatter keys first (a value as
    canonical JSON), then the body's sections."""
    found = {field_name(k): json.dumps(v, sort_keys=True, default=str) for k, v in doc.metadata.items()}
    for name, text in sections(doc.body).items():
        found.setdefault(name, text)
    return found
