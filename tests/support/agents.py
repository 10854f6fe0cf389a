"""The config TOML the tests write, built instead of copied: `[agents.*]` (one agent, its
timezone, a body a tier), a `[models.*]` route, and the `[tools]` table."""

from __future__ import annotations

import json
from collections.abc import Iterable

PERSONA = 'persona_files = ["persona.md"]'
# A surface tier's body on the scripted model: it may whisper and surface.
SURFACE = 'binds = ["wake.whisper", "wake.surface"]\nmodel = "scripted"'


def on_demand_surface(*lines: str) -> str:
    """A surface tier on the scripted model that never fires by itself (1 January, midnight), then `lines`."""
    return "\n".join(['cron = "0 0 1 1 *"', 'binds = ["wake.surface"]', 'model = "scripted"', *lines])


def whisper(every: str, *lines: str) -> str:
    """A whisper tier's body: every `every`, bound to the whisper, then `lines`."""
    return "\n".join([f'every = "{every}"', 'binds = ["wake.whisper"]', *lines])


def toml(name: str = "demo", *, tiers: dict[str, str], timezone: str = "Europe/Stockholm", extra: Iterable[str] = ()) -> str:
    """`[agents.<name>]` with one table a tier: `tiers` maps a tier to its body's TOML lines
    (`every = "15m"`, say); `extra`, more lines of the agent's own table."""
    head = "\n".join([f"[agents.{name}]", f'timezone = "{timezone}"', *extra])
    return head + "\n" + "".join(f"\n[agents.{name}.tiers.{tier}]\n{body.strip()}\n" for tier, body in tiers.items())


def _table(header: str, keys: dict[str, object], lines: Iterable[str]) -> str:
    """`[header]`, one `key = value` a key (a value as TOML, which JSON's strings, numbers, booleans
    and lists are), then `lines` as they are."""
    return "\n".join([f"[{header}]", *(f"{k} = {json.dumps(v)}" for k, v in keys.items()), *lines]) + "\n"


def route(name: str, base_url: str, model: str, *, lines: Iterable[str] = (), **keys: object) -> str:
    """`[models.<name>]`: its server, its model, then `keys` (`timeout_s=5`) and raw TOML `lines`."""
    return _table(f"models.{name}", {"base_url": base_url, "model": model, **keys}, lines)


def scripted(base_url: str, *, name: str = "scripted", model: str = "scripted-1", lines: Iterable[str] = (), **keys: object) -> str:
    """A route to the scripted server (tests/support/openai_server.py): 5 s a request, no retry,
    unless `keys` say otherwise."""
    return route(name, base_url, model, lines=lines, **{"timeout_s": 5, "max_retries": 0, **keys})


def tools(*modules: str, **keys: object) -> str:
    """`[tools]` loading the test tool modules `modules` (`think_tools` for tests.support.think_tools)."""
    return _table("tools", {"modules": [f"tests.support.{m}" for m in modules], **keys}, ())
