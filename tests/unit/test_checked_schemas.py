"""The remembered metaschema checks (surfaces/checked_schemas.py): a schema that passed is not
checked again by the next process; a changed, new or failing schema is always checked; a broken
file only means everything is checked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from surfaces import loader
from surfaces.checked_schemas import CheckedSchemas
from surfaces.errors import DeclarationError
from surfaces.registry import Registry, Tool

BAD = {"type": "object", "properties": {"x": {"type": "nonsense"}}}
GOOD = {"type": "object", "properties": {"x": {"type": "string"}}}


async def _handler(ctx: Any) -> str:
    return "ok"


def _tool(parameters: dict[str, Any], name: str = "ok") -> Tool:
    return Tool(name=name, description="A tool.", parameters=parameters, version="1", handler=_handler, mutates=False,
                surfaces=frozenset({"wake"}))


def test_a_built_registry_remembers_every_schema_it_checked(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "checked-schemas"
    registry = loader.build(entry_points=False, checked=CheckedSchemas(path))
    again = CheckedSchemas(path)
    assert len(registry) > 10
    assert all(again.passed(t.parameters) for t in registry)
    assert len(path.read_text().split()) == len({again.digest(t.parameters) for t in registry})


def test_a_failing_schema_is_refused_and_never_remembered(tmp_path: Path) -> None:
    path = tmp_path / "checked"
    checked = CheckedSchemas(path)
    with pytest.raises(DeclarationError, match="invalid JSON schema"):
        Registry(checked=checked).register(_tool(BAD))
    checked.save()
    assert not CheckedSchemas(path).passed(BAD)
    with pytest.raises(DeclarationError, match="invalid JSON schema"):  # and the next process checks it again
        Registry(checked=CheckedSchemas(path)).register(_tool(BAD))


def test_a_changed_schema_is_checked_again(tmp_path: Path) -> None:
    path = tmp_path / "checked"
    checked = CheckedSchemas(path)
    Registry(checked=checked).register(_tool(GOOD))
    checked.save()
    assert CheckedSchemas(path).passed(GOOD)
    changed = {"type": "object", "properties": {"x": {"type": "nonsense"}}}
    assert not CheckedSchemas(path).passed(changed)
    with pytest.raises(DeclarationError, match="invalid JSON schema"):
        Registry(checked=CheckedSchemas(path)).register(_tool(changed))


def test_the_digest_names_the_checker_so_a_digest_from_another_does_not_pass(tmp_path: Path) -> None:
    path = tmp_path / "checked"
    import hashlib
    import json

    foreign = hashlib.sha256(("jsonschema 0.0.0 other\0" + json.dumps(GOOD, sort_keys=True, separators=(",", ":"))).encode()).hexdigest()
    path.write_text(foreign + "\n")
    assert not CheckedSchemas(path).passed(GOOD)


@pytest.mark.parametrize("content", [b"not a digest\n", b"\xff\xfe\x00garbage", b""])
def test_an_unreadable_or_foreign_file_means_everything_is_checked(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "checked"
    path.write_bytes(content)
    with pytest.raises(DeclarationError, match="invalid JSON schema"):
        Registry(checked=CheckedSchemas(path)).register(_tool(BAD))
    checked = CheckedSchemas(path)
    Registry(checked=checked).register(_tool(GOOD))
    checked.save()
    assert CheckedSchemas(path).passed(GOOD)


def test_a_file_that_cannot_be_written_costs_only_the_memory(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    checked = CheckedSchemas(blocked / "under-a-file" / "checked")  # its directory cannot be made
    Registry(checked=checked).register(_tool(GOOD))
    checked.save()  # says nothing, raises nothing
    assert checked.passed(GOOD)
    assert not (blocked / "under-a-file").exists()


# With every schema remembered, a process that builds the registry never imports jsonschema.
_CHILD = """
import sys
from pathlib import Path
from surfaces import loader
from surfaces.checked_schemas import CheckedSchemas
registry = loader.build(entry_points=False, checked=CheckedSchemas(Path(sys.argv[1])))
print(len(registry), "jsonschema" in sys.modules)
"""


def test_the_next_process_does_not_check_a_remembered_schema(tmp_path: Path) -> None:
    path = tmp_path / "checked"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WAKE_", "XDG_"))}
    first = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env, timeout=120, check=True)
    second = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env, timeout=120, check=True)
    count, imported = first.stdout.split()
    assert imported == "True"
    assert second.stdout.split() == [count, "False"]


def test_a_process_that_builds_the_registry_again_checks_each_schema_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon on SIGHUP, a test session: a second build in the process checks no schema it
    checked already, whatever its cache file (none here), and a failing schema every time."""
    import jsonschema

    from surfaces import registry as registry_module

    checked: list[object] = []
    real = jsonschema.Draft202012Validator.check_schema
    monkeypatch.setattr(registry_module, "_PASSED_IN_THIS_PROCESS", set())
    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", classmethod(lambda cls, s: (checked.append(s), real(s))[1]))
    first = loader.build(entry_points=False)
    distinct = len({CheckedSchemas().digest(t.parameters) for t in first})  # tools of one shape share a check
    assert len(checked) == distinct > 10
    loader.build(entry_points=False, checked=CheckedSchemas(tmp_path / "cold"))
    assert len(checked) == distinct
    for _ in range(2):
        with pytest.raises(DeclarationError, match="invalid JSON schema"):
            Registry().register(_tool(BAD))
    assert len(checked) == distinct + 2
