"""What an operator's commands share, whether typed (`wake pause`, `wake memory revert`) or clicked
(the console): who is acting, a time as an operator writes it, an agent's memory repository
opened as it is (an operator never creates one; the agent's first wake does), and deciding an
approval (`wake approvals approve|reject` and the console's buttons: one code path)."""

from __future__ import annotations

import contextlib
import datetime as dt
import getpass
import re
import zoneinfo
from collections.abc import Iterator

import asyncpg

from ledgers import approvals
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


def ttl_text(seconds: float) -> str:
    """`604800` -> `7d`, `5400` -> `90m`: a ttl as the config writes it."""
    s = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"{s // size}{unit}"
    return f"{s}s"


async def decide_approval(
    conn: asyncpg.Connection, config: Config, approval_id: int, decision: str, *, by: str, why: str | None, at: dt.datetime,
    agent_id: str | None = None,
) -> approvals.Approval:
    """Decide a pending approval as the operator `by` (with `agent_id`, only one of that agent's):
    the one writer of an operator's decision, sealed by the ledger. An approval pending longer than
    `[tools] approval_ttl` is expired instead. Raises NotFound (no such approval, exit 1) or
    InvalidInput (another agent's, decided before, or expired: exit 65, nothing decided)."""
    ttl_s = config.tools.approval_ttl
    done = await approvals.decide(conn, approval_id, decision, by=by, at=at, why=why, ttl_s=ttl_s, agent_id=agent_id)
    if done is not None:
        return done
    found = await approvals.one(conn, approval_id)
    if found is None:
        raise NotFound(f"no approval {approval_id} (see `wake approvals --all`)")
    if agent_id is not None and found.agent_id != agent_id:
        raise InvalidInput(f"approval {approval_id} is another agent's ({clip(found.agent_id)}), not {agent_id}'s; nothing was decided")
    agent = config.agents.get(found.agent_id)
    zone = zoneinfo.ZoneInfo(agent.timezone if agent is not None else "UTC")

    def when(t: dt.datetime | None) -> str:
        return f"{t.astimezone(zone):%Y-%m-%d %H:%M:%S %Z}" if t is not None else "-"

    if found.state == "expired":
        raise InvalidInput(
            f"approval {approval_id} expired at {when(found.decided_at)}: it was asked at {when(found.requested_at)} and not decided "
            f"within [tools] approval_ttl ({ttl_text(ttl_s)}); it will not run, and nothing was decided"
        )
    before = f"{'rejected' if found.state == 'rejected' else 'approved'} by {found.decided_by} at {when(found.decided_at)}"
    raise InvalidInput(f"approval {approval_id} was already {before} (now {found.state}); a decision is recorded once")
