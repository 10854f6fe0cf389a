"""The documentation a newcomer reads (issue 42): README.md short and its links alive, docs/README.md
an index of every page, docs/commands.md generated from the CLI and current, every config key on
docs/configuration.md, and the embedded default's pointer to where its keys are documented."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pydantic

from wake import config as wake_config
from wake.cli.commands import COMMANDS
from wake.config import Config

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def _links(page: Path) -> list[tuple[Path, str]]:
    text = page.read_text(encoding="utf-8")
    return [((page.parent / m.group(1)).resolve(), m.group(2) or "") for m in LINK.finditer(text) if "://" not in m.group(1)]


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    heads = [line.lstrip("#").strip() for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("#")]
    return {"#" + re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


def test_readme_is_short_and_its_links_and_anchors_resolve() -> None:
    readme = REPO / "README.md"
    assert len(readme.read_text(encoding="utf-8").splitlines()) <= 150
    for page in (readme, DOCS / "README.md", DOCS / "commands.md", DOCS / "configuration.md", DOCS / "development.md"):
        for target, anchor in _links(page):
            assert target.exists(), f"{page.name} links {target}, which does not exist"
            if anchor and target.suffix == ".md":
                assert anchor in _anchors(target), f"{page.name} links {target.name}{anchor}, which has no such heading"


def test_the_readme_keeps_its_two_first_commands() -> None:
    """A wake on the embedded default, and the tests: what a fresh machine runs first."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("```sh", 1)[1].split("```", 1)[0]
    assert [line.split("#")[0].strip() for line in block.strip().splitlines()][1:3] == ["wake up", "python -m pytest"]


def test_the_index_lists_every_page_and_gives_three_reading_orders() -> None:
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    listed = {t.name for t, _ in _links(DOCS / "README.md") if t.parent == DOCS}
    pages = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    assert pages <= listed, f"not in docs/README.md: {sorted(pages - listed)}"
    for reader in ("An operator", "An agent author", "A contributor"):
        assert f"**{reader}**" in index


def test_commands_md_is_generated_from_the_cli_and_current() -> None:
    checked = subprocess.run([sys.executable, "-m", "wake.cli.reference", "--check"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert checked.returncode == 0, checked.stderr
    text = (DOCS / "commands.md").read_text(encoding="utf-8")
    for name in COMMANDS:
        assert f"### `wake {name}`" in text


def _keys(model: type[pydantic.BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, pydantic.BaseModel):
            out += _keys(sub, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


def test_every_key_of_the_config_is_on_the_configuration_page() -> None:
    """Each leaf key of the sections (the last part of its name, which the page may group as
    `postgres.pool_min_size`, `pool_max_size`) is named on docs/configuration.md."""
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    missing = [k for k in _keys(Config) if f"`{k}`" not in text and k.rsplit(".", 1)[-1] not in text]
    assert not missing, f"undocumented keys: {missing}"


def test_the_embedded_default_points_at_pages_that_exist() -> None:
    head = wake_config.EMBEDDED_DEFAULT.read_text(encoding="utf-8")
    named = re.findall(r"docs/[a-z-]+\.md", head)
    assert named and all((REPO / n).is_file() for n in named), named
    assert "README.md" not in head
