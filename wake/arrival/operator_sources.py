"""The blocks a tier's operator keys add to its arrival: the instructions checklist and the pre-check.

- `instructions_file`: an operator-edited Markdown checklist, read at every wake. Its block sits
  in the `static` or `stable` cache tier, so it is hashed into the manifest like every block and
  an edit shows in the next wake's diff. A missing or unreadable file makes the block `failed`
  ("could not check: ..."); the wake still runs.
- `precheck`: a command (no shell) run in the daemon's environment, under `precheck_timeout_s`,
  once the other sources are done.
  Its exit status is the block's state: 0 `present` (think; its stdout, capped, is the block),
  1 `empty` (nothing to do: the wake settles `quiet` without a model call), anything else, a
  timeout or a command that cannot run: `failed`, and the wake fails with that reason
  (`wake.think.decide.prechecked` reads the block).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from wake.arrival.engine import CacheTier, Found, Source
from wake.config import TierConfig
from wake.context import WakeContext
from wake.errors import PrecheckFailed

INSTRUCTIONS = "instructions"
PRECHECK = "precheck"
PASSED, NOTHING_TO_DO = 0, 1  # the pre-check's exit statuses that are answers, not failures
# The engine's own bound on the pre-check source, past the command's timeout (the source kills
# the command itself and says so; this only keeps a stuck pipe from holding the wake).
PRECHECK_MARGIN_S = 2.0


async def instructions(ctx: WakeContext) -> Found:
    name = ctx.tier_config.instructions_file
    assert name is not None
    path = ctx.config.config_relative(name)
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise OSError(f"instructions file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise OSError(f"instructions file {path} is unreadable: {exc}") from None
    if not text:
        return Found(text=f"The instructions file {path.name} is empty.", rows=0)
    return Found(text=text, rows=sum(1 for line in text.splitlines() if line.strip()))


def _capped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n…[cut: {limit} of {len(text)} characters shown]"


async def run_precheck(argv: tuple[str, ...], timeout_s: float) -> tuple[int, str]:
    """Run `argv` (no shell, stdin closed, the daemon's environment); its exit status and stdout.
    Raises PrecheckFailed when it cannot start or outlives `timeout_s` (it is killed)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=os.environ.copy(),
            start_new_session=True,  # its own process group: a timeout kills what it started too
        )
    except OSError as exc:  # not found, not executable
        raise PrecheckFailed(f"pre-check {argv[0]!r} could not run: {exc.strerror or exc}") from None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except (TimeoutError, asyncio.CancelledError) as exc:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        if isinstance(exc, asyncio.CancelledError):
            raise
        raise PrecheckFailed(f"pre-check {argv[0]!r} timed out after {timeout_s:g}s and was killed") from None
    assert proc.returncode is not None
    return proc.returncode, out.decode("utf-8", errors="replace")


async def precheck(ctx: WakeContext) -> Found:
    conf = ctx.tier_config
    assert conf.precheck is not None
    code, out = await run_precheck(conf.precheck, conf.precheck_timeout_s)
    shown = _capped(out.strip(), conf.precheck_max_chars)
    if code == PASSED:
        return Found(text=shown or "The pre-check passed and printed nothing.", rows=1)
    if code == NOTHING_TO_DO:
        return Found(text="The pre-check found nothing to do (exit 1)." + (f"\n{shown}" if shown else ""), rows=0)
    raise PrecheckFailed(f"pre-check {conf.precheck[0]!r} exited {code}" + (f": {shown.splitlines()[-1][:200]}" if shown else ""))


def tier_sources(conf: TierConfig) -> list[Source]:
    """The sources the tier's operator keys add (none when the keys are unset)."""
    added: list[Source] = []
    if conf.instructions_file is not None:
        added.append(Source(name=INSTRUCTIONS, cache_tier=CacheTier[conf.instructions_cache_tier], fn=instructions))
    if conf.precheck is not None:
        # After the other sources (derived: it runs once they are done), before the gate and the
        # model. It can change every wake, so it is volatile; the gate compares it like any block.
        added.append(Source(
            name=PRECHECK, cache_tier=CacheTier.volatile, fn=precheck, derived=True, timeout_s=conf.precheck_timeout_s + PRECHECK_MARGIN_S,
        ))
    return added
