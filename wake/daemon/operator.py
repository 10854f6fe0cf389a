"""What an operator's commands share, whether typed (`wake pause`, `wake memory revert`) or clicked
(the console): who is acting, a time as an operator writes it, and an agent's memory repository
opened as it is (an operator never creates one; the agent's first wake does)."""

from __future__ import annotations

import contextlib
import datetime as dt
import getpass
import re
import zoneinfo
from collections.abc import Iterator

from memory.errors import MemoryRefused
from memory.repo import MemoryRepo
from wake.config import Config, clip, parse_duration_s
from wake.errors import InvalidInput, NotFound

_HHMM = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
TIME_HELP = (
    "an ISO 8601 time (2026-12-01T10:00, local to the agent unless it has an offset), HH:MM (the next one), or a duration from now (30m, 2h, 1d)"
)


def operator() -> str:
    """The local user's name: who a command records as acting when it is not told."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def parse_when(text: str, now: dt.datetime, zone: str) -> dt.datetime:
    """A time an operator typed, as an aware UTC datetime. Raises InvalidInput (one line)."""
    value = text.strip().removeprefix("+").removeprefix("in ").strip()
    local = zoneinfo.ZoneInfo(zone)
    with_duration = re.fullmatch(r"\d+\s*[smhd]", value)
    if with_duration:
        try:
            return now + dt.timedelta(seconds=parse_duration_s(value))
        except (ValueError, OverflowError) as exc:
            raise InvalidInput(f"cannot read the time {clip(text)}: {exc}") from None
    hhmm = _HHMM.match(value)
    if hhmm:
        today = now.astimezone(local).replace(hour=int(hhmm.group(1)), minute=int(hhmm.group(2)), second=0, microsecond=0)
        return (today if today > now else today + dt.timedelta(days=1)).astimezone(dt.UTC)
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"cannot read the time {clip(text)}: expected {TIME_HELP}") from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=local)).astimezone(dt.UTC)


def open_repo(config: Config, agent_id: str, at: dt.datetime) -> MemoryRepo:
    """The agent's repository as it is: an operator never creates one (the agent's first wake does)."""
    if not config.agents[agent_id].memory.enabled:
        raise NotFound(f"memory is off for agent {agent_id} (agents.{agent_id}.memory.enabled = false)")
    path = config.memory_path(agent_id)
    if not (path / ".git").exists():
        raise NotFound(f"agent {agent_id} has no memory repository at {path} yet; its first wake creates it")
    with refused():
        return MemoryRepo.open(path, config.memory_config(agent_id), at=at)


@contextlib.contextmanager
def refused() -> Iterator[None]:
    """A refusal of the memory layer (a bad path, an unknown commit or finding) is one line, exit 65."""
    try:
        yield
    except MemoryRefused as exc:
        raise InvalidInput(str(exc)) from exc
    except ValueError as exc:
        raise InvalidInput(str(exc)) from exc
