"""`Environment`: the variables a config depends on beyond its overrides, as data.

The loader fills it (it is the one reader of the environment); a config carries it, and its views
resolve from it, so nothing reads `WAKE_STATE_DIR`, `$STATE_DIRECTORY`, `$XDG_STATE_HOME`,
`NEO4J_AUTH` or `PG*` twice or late.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from wake.secrets import Secret


@dataclasses.dataclass(frozen=True, kw_only=True)
class Environment:
    """The variables a config depends on beyond its overrides, read once by the loader.

    A Config built without the loader (`Config.model_validate`) has the empty one: no variable set."""

    wake_state_dir: str | None = None
    state_directory: str | None = None  # systemd's StateDirectory=, possibly several, ":"-separated
    xdg_state_home: str | None = None
    # NEO4J_AUTH: "none" (no auth), or (user, password); None when unset.
    neo4j_auth: Literal["none"] | tuple[str, Secret] | None = None
    # Where libpq's PGHOST/PGPORT/PGDATABASE point (for messages: asyncpg reads them itself).
    libpq_address: str = "localhost:5432/"

    def state_dir(self, configured: str | None) -> Path:
        """`WAKE_STATE_DIR`, else `state_dir`, else systemd's `$STATE_DIRECTORY`, else XDG state."""
        explicit = self.wake_state_dir or configured
        if explicit:
            return Path(explicit).expanduser().resolve()
        if self.state_directory:
            return Path(self.state_directory.split(":")[0])
        return Path(self.xdg_state_home or Path.home() / ".local" / "state") / "wake"
