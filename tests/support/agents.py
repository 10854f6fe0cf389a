"""The `[agents.*]` TOML the tests write, built instead of copied: one agent, its timezone, a body a tier."""

from __future__ import annotations

from collections.abc import Iterable


def toml(name: str = "demo", *, tiers: dict[str, str], timezone: str = "Europe/Stockholm", extra: Iterable[str] = ()) -> str:
    """`[agents.<name>]` with one table a tier: `tiers` maps a tier to its body's TOML lines
    (`every = "15m"`, say); `extra`, more lines of the agent's own table."""
    head = "\n".join([f"[agents.{name}]", f'timezone = "{timezone}"', *extra])
    return head + "\n" + "".join(f"\n[agents.{name}.tiers.{tier}]\n{body.strip()}\n" for tier, body in tiers.items())
