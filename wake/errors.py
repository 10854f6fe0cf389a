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


class KeyProblem(ValueError):
    """Raised inside a config validator to point at a key path below the validated value; the
    loader turns it into a ConfigError."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message


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


class AgentBusy(WakeError):
    """Another wake of the agent holds its lease (sysexits EX_TEMPFAIL: try again later)."""

    exit_code = 75


class EnginesBusy(WakeError):
    """`wake engines stop` while a live process uses the embedded engines (sysexits EX_TEMPFAIL)."""

    exit_code = 75

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        super().__init__(f"the embedded engines are in use by pid {', '.join(map(str, pids))}; stop those first, or use --force")


class LeaseLost(WakeError):
    """The wake lost its lease and was cancelled."""

    exit_code = 75


class LeaseBusy(Exception):
    """Another holder has the agent's lease."""

    def __init__(self, agent_id: str, holder: str | None) -> None:
        self.agent_id, self.holder = agent_id, holder
        super().__init__(f"agent {agent_id!r} is busy: another wake holds its lease ({holder or 'holder unknown'})")


class SqlSourceError(Exception):
    """An operator SQL source failed; the message names the source and the cause."""


class Disabled(Exception):
    """Raised by a source whose store is not configured."""


class InvalidInput(WakeError):
    """A retraction, a verdict or a probe was refused (sysexits EX_DATAERR)."""

    exit_code = 65


class NoDaemon(WakeError):
    """No daemon replica has a live heartbeat, so nobody would take a trigger request."""

    exit_code = 69  # sysexits EX_UNAVAILABLE: no daemon to ask

    def __init__(self, redis_address: str) -> None:
        super().__init__(
            f"no wake daemon is alive: no replica heartbeat in redis at {redis_address}. "
            "Start one (`systemctl start wake` or `wake daemon`), or run the wake in this process with `wake up`"
        )


class ListenError(WakeError):
    """The metrics' listen address is malformed, or nothing can listen on it (sysexits EX_CONFIG:
    the address is part of the config)."""

    exit_code = ConfigError.exit_code


class DeliveryFailed(Exception):
    """One delivery attempt did not deliver; the message says why (a status, a transport error).
    `permanent`: sending it again cannot help (a 4xx other than 408/425/429, a refused login, a
    URL that does not parse), so the outbox dead-letters it at once instead of backing off."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class InboxRefused(Exception):
    """A request to the daemon's inbox that is not stored: its HTTP status (a 4xx) and the reason
    the answer gives."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class PrecheckFailed(Exception):
    """A tier's pre-check neither passed nor said "nothing to do"; the message says what happened."""


class ModelError(WakeError):
    """The provider failed (after any retries); `status` is the HTTP or in-body code, if any."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1, same_error: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts
        self.same_error = same_error  # of the attempts, how many ended with the last one's error


class ModelUnavailable(ModelError):
    """The embedded model cannot run: not fetched (`wake model fetch`), its build failed, or its
    server did not start (sysexits EX_UNAVAILABLE). Inside a wake it fails the wake like any
    provider failure."""

    exit_code = 69


class Failure(Exception):
    """One failed attempt, with the retry decision attached."""

    def __init__(self, message: str, *, status: int | None, retryable: bool, wait_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.wait_s = wait_s


class WorkspaceUnavailable(WakeError):
    """An agent's workspace cannot be fingerprinted (`codecheck.workspace.WorkspaceError`); the exit
    status follows its kind: not_a_repository 66 (EX_NOINPUT), no_commits 65 (EX_DATAERR),
    unreadable 74 (EX_IOERR), over_budget 75 (EX_TEMPFAIL)."""

    EXIT_CODES = {"not_a_repository": 66, "no_commits": 65, "unreadable": 74, "over_budget": 75}

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.exit_code = self.EXIT_CODES.get(kind, 1)

class CanaryFailed(Exception):
    """The Cloister canary could not audit the agent's memory: its blocks fail, its wake halts."""


class Unreplayable(WakeError):
    """A wake's record lacks what a replay needs (sysexits EX_DATAERR): `wake.replay`."""

    exit_code = 65
