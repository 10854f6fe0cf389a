"""The arrival engine: every source of a tier runs concurrently, each under its own timeout.

A source is a function of the wake context that returns `Found(text, rows)`, or what to await for
it: an `async def` source always waits; one that can answer from what the wake has already read
(the clock, the identity, the recent wakes read with the previous ones) answers at once and costs
no task. The engine turns it into a `Block` with a typed state (docs/design.md, "Typed retrieval
state"):

- `retrieval`: `ok`, `failed` (timeout, connection error, malformed result, any exception; the
  reason is kept) or `disabled` (the source raised `Disabled`: its store is not configured);
- `result`: `present` (rows > 0), `empty` (rows == 0) or `unknown` (retrieval was not `ok`).

A block made of parts (the settled facts: state, commitments, retractions, actions) returns each
part's state in `Found.parts`; the block carries the worst of them. One failed part fails the
block, whose text still shows the parts that could be read: a block never says `ok` while a line
of it says "could not check".

A failed block is rendered "could not check: <reason>", never as an empty list, so the agent can
say "I found nothing" only about a block whose retrieval was `ok`. A failing source costs its own
timeout, never the whole wake.

Sources marked `derived` (the binding diff, the pre-check) run after the others, in a context
that carries what the others found (the cycle assembles the two in turn).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import enum
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ledgers.vocab import Result, Retrieval
from wake import logs
from wake.context import WakeContext
from wake.errors import Disabled
from wake.observe import metrics, tracing

log = logs.get("wake.arrival")


class CacheTier(enum.IntEnum):
    """How often a block changes; prompts are ordered by it so prefixes stay byte-identical."""

    static = 0
    stable = 1
    session = 2
    volatile = 3


@dataclass(frozen=True, kw_only=True)
class Part:
    """One part of a composed block: its label and, when it could not be read, why."""

    name: str
    reason: str | None = None

    @property
    def retrieval(self) -> Retrieval:
        return Retrieval.ok if self.reason is None else Retrieval.failed


@dataclass(frozen=True, kw_only=True)
class Found:
    text: str
    rows: int
    parts: tuple[Part, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Block:
    name: str
    cache_tier: CacheTier
    text: str
    retrieval: Retrieval
    result: Result
    reason: str | None
    latency_ms: float
    rows: int
    changes_every_wake: bool = False
    moves_with_clock: bool = False
    parts: tuple[Part, ...] = ()

    def state(self, text_hash: str) -> dict[str, Any]:
        """The block as the ledger stores it; a composed block adds each part's state."""
        state: dict[str, object] = {
            "hash": text_hash, "cache_tier": self.cache_tier.name, "retrieval": self.retrieval, "result": self.result,
            "reason": self.reason, "latency_ms": round(self.latency_ms, 3), "rows": self.rows,
        }
        if self.parts:
            state["parts"] = {p.name: {"retrieval": p.retrieval, "reason": p.reason} for p in self.parts}
        return state


# A source answers at once (`Found`) or returns what to await for its answer (an `async def` source
# returns its coroutine); raising is a typed failure either way.
SourceFn = Callable[[Any], Found | Awaitable[Found]]


@dataclass(frozen=True, kw_only=True)
class Source:
    name: str
    cache_tier: CacheTier
    fn: SourceFn
    derived: bool = False
    # Its text differs on every wake by construction (the clock, the harness's own history), so
    # it witnesses no news: the whisper gate does not compare it.
    changes_every_wake: bool = False
    # Its text moves with the clock on every wake (a time, a list of wakes), not only when something
    # happened: the prompt puts it after the other blocks that change every wake (`wake.think.prompt`).
    moves_with_clock: bool = False
    # Its own timeout, when it bounds itself more generously than the tier's `source_timeout_ms`
    # (the pre-check runs a command under `precheck_timeout_s`).
    timeout_s: float | None = None


_abandoned: set[asyncio.Future[Block]] = set()


def _forget(task: asyncio.Future[Block]) -> None:
    _abandoned.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: a late failure of an abandoned source is not an error


def _failed(source: Source, reason: str, latency_ms: float) -> Block:
    return Block(
        name=source.name, cache_tier=source.cache_tier, text=f"could not check: {reason}", retrieval=Retrieval.failed,
        result=Result.unknown, reason=reason, latency_ms=latency_ms, rows=0,
    )


def _found(source: Source, found: Found, latency_ms: float) -> Block:
    """A source that returned: `ok` unless one of its parts could not be read (the worst part wins)."""
    failed = [p for p in found.parts if p.retrieval == Retrieval.failed]
    if failed:
        reason = "; ".join(f"{p.name}: {p.reason}" for p in failed)
        return Block(
            name=source.name, cache_tier=source.cache_tier, text=found.text, retrieval=Retrieval.failed, result=Result.unknown,
            reason=reason, latency_ms=latency_ms, rows=found.rows, parts=found.parts,
        )
    return Block(
        name=source.name, cache_tier=source.cache_tier, text=found.text, retrieval=Retrieval.ok,
        result=Result.present if found.rows > 0 else Result.empty, reason=None, latency_ms=latency_ms, rows=found.rows,
        parts=found.parts,
    )


def _span_state(span: Any, block: Block) -> None:
    span.set_attributes({"wake.source.retrieval": str(block.retrieval), "wake.source.result": str(block.result), "wake.source.rows": block.rows})


def _raised(source: Source, exc: Exception, latency_ms: float) -> Block:
    if isinstance(exc, Disabled):
        return Block(
            name=source.name, cache_tier=source.cache_tier, text=f"disabled: {exc}", retrieval=Retrieval.disabled,
            result=Result.unknown, reason=str(exc), latency_ms=latency_ms, rows=0,
        )
    # a source may fail in any way; each becomes a typed failure
    return _failed(source, logs.redact_text(f"{type(exc).__name__}: {exc}".rstrip(": ")), latency_ms)


def _answer(source: Source, found: object, latency_ms: float) -> Block:
    if not isinstance(found, Found) or not isinstance(found.text, str) or not isinstance(found.rows, int) or found.rows < 0 \
            or not all(isinstance(p, Part) for p in found.parts):
        return _failed(source, f"malformed result: {type(found).__name__}", latency_ms)
    return _found(source, found, latency_ms)


def _span_name(source: Source) -> tuple[str, dict[str, Any]]:
    return f"wake.source {source.name}", {"wake.source": source.name}


async def _awaited(source: Source, pending: Awaitable[object], started: float) -> Block:
    """The block of a source that returned what to await; a timeout is the caller's: it cancels
    this task, and the block says `timeout`."""
    with tracing.span(*_span_name(source)) as span:
        try:
            found = await pending
        except asyncio.CancelledError:
            _span_state(span, _failed(source, "timeout", 0.0))
            raise
        except Exception as exc:
            block = _raised(source, exc, (time.perf_counter() - started) * 1000)
        else:
            block = _answer(source, found, (time.perf_counter() - started) * 1000)
        _span_state(span, block)
        return block


def _at_once(source: Source, answer: object, raised: Exception | None, started: float) -> Block:
    """The block of a source that answered (or raised) without waiting."""
    with tracing.span(*_span_name(source)) as span:
        latency_ms = (time.perf_counter() - started) * 1000
        block = _raised(source, raised, latency_ms) if raised is not None else _answer(source, answer, latency_ms)
        _span_state(span, block)
        return block


def _started(source: Source, ctx: WakeContext, started: float, loop: asyncio.AbstractEventLoop) -> asyncio.Future[Block]:
    """Call the source in its own copy of the context, as a task would run it: its block, done,
    when it answered at once (no task, no turn of the loop), else a task awaiting its answer in
    that same context."""
    context = contextvars.copy_context()
    answer: object = None
    raised: Exception | None = None
    try:
        answer = context.run(source.fn, ctx)
    except Exception as exc:
        raised = exc
    if raised is None and not isinstance(answer, Found) and inspect.isawaitable(answer):
        return loop.create_task(_awaited(source, answer, started), context=context)
    done: asyncio.Future[Block] = loop.create_future()
    done.set_result(context.run(_at_once, source, answer, raised, started))
    return done


def _settled(source: Source, block: Block) -> Block:
    """The block as the wake keeps it: its flags from the source, logged and counted."""
    if source.changes_every_wake or source.moves_with_clock:
        block = dataclasses.replace(block, changes_every_wake=source.changes_every_wake, moves_with_clock=source.moves_with_clock)
    log.info(
        "arrival.block",
        block=block.name,
        retrieval=block.retrieval,
        result=block.result,
        reason=block.reason,
        latency_ms=round(block.latency_ms, 2),
        rows=block.rows,
    )
    metrics.observe_block(block.name, block.latency_ms, block.retrieval)
    return block


async def _run(bounded: Sequence[tuple[Source, float]], ctx: WakeContext) -> list[Block]:
    """Run every source at once (each that awaits in a task of its own) and wait for them by
    deadline: one wait for all the sources that share a timeout (not a task and a timer each: a
    whisper runs a dozen sources, and a timer cancelled early stays in the loop's heap until it
    falls due). A source past its deadline is cancelled and left to unwind in the background (an
    asyncpg query cancel can take a round trip), so it costs the wake its timeout and not a
    millisecond more."""
    started, loop = time.perf_counter(), asyncio.get_running_loop()
    tasks: list[asyncio.Future[Block]] = []
    late: dict[int, float] = {}
    try:
        for source, _ in bounded:
            tasks.append(_started(source, ctx, started, loop))
        for timeout_s in sorted({t for _, t in bounded}):
            waiting = [task for task, (_, t) in zip(tasks, bounded, strict=True) if t == timeout_s and not task.done()]
            if waiting:
                await asyncio.wait(waiting, timeout=max(0.0, started + timeout_s - time.perf_counter()))
            for n, (task, (_, t)) in enumerate(zip(tasks, bounded, strict=True)):
                if t == timeout_s and not task.done():
                    late[n] = (time.perf_counter() - started) * 1000
                    task.cancel()
                    _abandoned.add(task)
                    task.add_done_callback(_forget)
    except BaseException:  # the wake cancelled: no source's task outlives it
        for task in tasks:
            task.cancel()
        raise
    return [
        _settled(source, _failed(source, "timeout", late[n]) if n in late else task.result())
        for n, (task, (source, _)) in enumerate(zip(tasks, bounded, strict=True))
    ]


async def run_source(source: Source, ctx: WakeContext, timeout_s: float) -> Block:
    """One source under `timeout_s`."""
    return (await _run([(source, timeout_s)], ctx))[0]


async def assemble(sources: Sequence[Source], ctx: WakeContext, timeout_s: float) -> list[Block]:
    """Run the sources concurrently, each under its own timeout (the tier's `timeout_s` unless it
    declares one); the blocks come back in source order."""
    return await _run([(s, s.timeout_s or timeout_s) for s in sources], ctx)


def direct(sources: Sequence[Source]) -> list[Source]:
    """The sources that read the stores only; they run first."""
    return [s for s in sources if not s.derived]


def derived(sources: Sequence[Source]) -> list[Source]:
    """The sources that run once the others are done (the binding diff, the pre-check)."""
    return [s for s in sources if s.derived]


def in_source_order(sources: Sequence[Source], blocks: Sequence[Block]) -> list[Block]:
    by_name = {b.name: b for b in blocks}
    return [by_name[s.name] for s in sources]


def prompt_order(blocks: Sequence[Block]) -> list[Block]:
    """The order the model reads the blocks in (`wake.think.prompt.messages`), which the row
    records (`arrival_order`) and `wake up --dry-run` prints: static first, volatile last, the
    configured order within a cache tier (a stable sort); past `stable` (the user message), the
    blocks that change on every wake go after the rest, and among them those that move with the
    clock last, so the bytes a provider's prompt cache can reuse come first."""

    def key(b: Block) -> tuple[bool, bool, bool, CacheTier]:
        moving = b.cache_tier > CacheTier.stable
        return moving, moving and b.changes_every_wake, moving and b.moves_with_clock, b.cache_tier

    return sorted(blocks, key=key)


def clip(text: str, width: int) -> str:
    """`text` on one line (whitespace folded), cut to `width` characters with a marker."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def render(blocks: Sequence[Block]) -> str:
    """Blocks as prompt text, in the order given."""
    return "\n\n".join(f"## {b.name}\n{b.text}" for b in blocks)


def render_prompt(blocks: Sequence[Block]) -> str:
    return render(prompt_order(blocks))
