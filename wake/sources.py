"""Built-in arrival sources (placeholder names until the arrival engine lands)."""

from __future__ import annotations

BUILTIN: dict[str, object] = {"identity": None, "clock": None, "recent_wakes": None, "binding_diff": None}
