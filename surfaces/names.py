"""Surface names. A tier binds the tools whose declared surfaces meet its `binds` list."""

from __future__ import annotations

# Surfaces a wake tier can bind. `wake` means "every wake tier that binds it".
WAKE_SURFACES: frozenset[str] = frozenset({"wake", "wake.whisper", "wake.surface", "wake.full"})

# Surfaces that exist outside wakes (an interactive chat, the operator's CLI). A tool declaring
# only these is never bound by a wake, and that is not an inert declaration.
NON_WAKE_SURFACES: frozenset[str] = frozenset({"chat", "cli"})

BUILTIN_SURFACES: frozenset[str] = WAKE_SURFACES | NON_WAKE_SURFACES


def known_surfaces(extra: frozenset[str] | set[str] | tuple[str, ...] = ()) -> frozenset[str]:
    """The built-in surfaces plus those an operator declared in `tools.surfaces`."""
    return BUILTIN_SURFACES | frozenset(extra)
