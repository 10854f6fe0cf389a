"""The bootstrap layout: the files a new memory repository starts with, one per domain, each with
a valid frontmatter and the fields its domain expects (as headings, or as keys for a single-file
domain), so the first audit and the first write have a schema to hold to. The persona starts
from the operator's text (`MemoryConfig.persona_seed`) when there is one."""

from __future__ import annotations

import yaml

from memory import frontmatter
from memory.config import Domain, MemoryConfig
from memory.errors import FrontmatterRefused

DESCRIPTIONS = {
    "persona": "Who I am: my identity, principles and scope. A change to any of them waits for a human's review.",
    "human": "The human I work with: who they are and what they prefer. A change to either waits for their review.",
    "project": "The project: its architecture and conventions.",
    "state": "Where I am in my work: the phase and what I am focused on now.",
    "reference": "Reference material I keep: every file here says what it holds in its description.",
    "journal": "My journal: one file per day (journal/YYYY-MM-DD.md), appended to, never rewritten.",
}
NOT_WRITTEN = "(not written yet)"


def _file_for(domain: Domain) -> str:
    if not domain.prefix.endswith("/"):
        return domain.prefix
    return f"{domain.prefix}{domain.name}.md" if domain.fields else f"{domain.prefix}index.md"


def _heading(name: str) -> str:
    return name.replace("_", " ").capitalize()


def _seeded(domain: Domain, seed: str) -> list[str]:
    """The persona's body from the operator's text: kept as it is when it already heads some of
    the domain's fields (`## Identity`), else placed under the first field; every field it lacks
    follows as "(not written yet)"."""
    try:
        text = frontmatter.parse(seed).body.strip()
    except FrontmatterRefused:
        text = seed.strip()
    present = set(frontmatter.sections(text))
    parts = [text + "\n"] if present & set(domain.fields) else [f"## {_heading(domain.fields[0])}\n\n{text}\n"]
    if not present & set(domain.fields):
        present.add(domain.fields[0])
    parts += [f"## {_heading(name)}\n\n{NOT_WRITTEN}\n" for name in domain.fields if name not in present]
    return parts


def _text(domain: Domain, persona_seed: str = "") -> str:
    description = DESCRIPTIONS.get(domain.name, f"The {domain.name} part of my memory.")
    keys: dict[str, str] = {"description": description}
    if not domain.prefix.endswith("/"):
        keys |= {name: NOT_WRITTEN for name in domain.fields}
        return f"---\n{frontmatter_text(keys)}---\n"
    if domain.name == "persona" and domain.fields and persona_seed.strip():
        body = _seeded(domain, persona_seed)
    else:
        body = [f"## {_heading(name)}\n\n{NOT_WRITTEN}\n" for name in domain.fields]
    return "\n".join([f"---\n{frontmatter_text(keys)}---", "", *body])


def frontmatter_text(keys: dict[str, str]) -> str:
    """A YAML frontmatter block's inside (keys in the given order), quoted where YAML needs it."""
    return str(yaml.safe_dump(keys, sort_keys=False, allow_unicode=True, width=1000))


def bootstrap(config: MemoryConfig) -> dict[str, str]:
    """path -> text of every file a new repository starts with."""
    return {_file_for(d): _text(d, config.persona_seed) for d in config.domains}
