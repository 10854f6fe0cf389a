"""The few named errors of wake. Each carries the exit status the CLI uses for it."""

from __future__ import annotations

import os


class WakeError(Exception):
    """Root of every expected failure; the CLI prints its message without a traceback."""

    exit_code = 1


class ConfigError(WakeError):
    """A configuration file or override is malformed (sysexits EX_CONFIG)."""

    exit_code = os.EX_CONFIG if hasattr(os, "EX_CONFIG") else 78

    def __init__(self, source: str, key: str, expected: str) -> None:
        self.source = source
        self.key = key
        self.expected = expected
        super().__init__(f"bad config in {source}: {key}: {expected}")


class StoreUnavailable(WakeError):
    """A store could not be reached (sysexits EX_UNAVAILABLE)."""

    exit_code = 69

    def __init__(self, store: str, address: str, reason: str) -> None:
        self.store = store
        self.address = address
        self.reason = reason
        super().__init__(f"{store} unreachable at {address}: {reason}")


class SchemaError(WakeError):
    """The database schema is not the one this code knows (sysexits EX_DATAERR)."""

    exit_code = 65


class RegistryError(WakeError):
    """A tool declaration is malformed; startup stops (sysexits EX_SOFTWARE)."""

    exit_code = 70


class NotFound(WakeError):
    """An object asked for by id does not exist."""

    exit_code = 1
