"""The arrival engine's scheduling (`wake.arrival.engine._run`): a source that answers at once is
done without a task; one that returns what to await goes on in a task of its own context, under
its timeout, cancellable with the wake."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable
from typing import Any

import pytest

from ledgers.vocab import Result, Retrieval
from tests.support.tasks import counting_tasks
from wake.arrival import engine
from wake.arrival.engine import CacheTier, Found, Source
from wake.errors import Disabled

_seen: contextvars.ContextVar[str] = contextvars.ContextVar("_seen", default="caller")


def _source(name: str, fn: Any, *, derived: bool = False) -> Source:
    return Source(name=name, cache_tier=CacheTier.volatile, fn=fn, derived=derived)


async def test_a_source_that_answers_at_once_runs_in_the_callers_task_and_one_that_awaits_in_its_own() -> None:
    tasks: dict[str, list[asyncio.Task[Any] | None]] = {"at_once": [], "awaits": []}
    caller = asyncio.current_task()

    def at_once(ctx: object) -> Found:
        tasks["at_once"].append(asyncio.current_task())
        return Found(text="now", rows=1)

    async def awaits(ctx: object) -> Found:
        tasks["awaits"].append(asyncio.current_task())
        await asyncio.sleep(0)
        return Found(text="later", rows=0)

    before = len(asyncio.all_tasks())
    blocks = await engine.assemble([_source("at_once", at_once), _source("awaits", awaits)], None, 5.0)  # type: ignore[arg-type]
    assert [(b.name, b.text, b.retrieval, b.result) for b in blocks] == [
        ("at_once", "now", Retrieval.ok, Result.present), ("awaits", "later", Retrieval.ok, Result.empty),
    ]
    assert tasks["at_once"] == [caller]
    assert tasks["awaits"][0] is not caller and tasks["awaits"][0] is not None
    assert len(asyncio.all_tasks()) == before


async def test_sources_that_answer_at_once_make_no_task_and_each_awaitable_one() -> None:
    def at_once(ctx: object) -> Found:
        return Found(text="x", rows=1)

    def disabled(ctx: object) -> Found:
        raise Disabled("not configured")

    async def awaits(ctx: object) -> Found:
        await asyncio.sleep(0)
        return Found(text="y", rows=1)

    def at_once_or_later(ctx: object) -> Found | Awaitable[Found]:
        return awaits(ctx)

    with counting_tasks() as made:
        blocks = await engine.assemble([*(_source(f"s{n}", at_once) for n in range(5)), _source("off", disabled)], None, 5.0)  # type: ignore[arg-type]
        assert made == []
        assert [b.retrieval for b in blocks] == [Retrieval.ok] * 5 + [Retrieval.disabled]
        assert blocks[-1].text == "disabled: not configured"
        blocks = await engine.assemble(
            [_source("a", at_once), _source("b", awaits), _source("c", at_once_or_later)], None, 5.0,  # type: ignore[arg-type]
        )
        assert len(made) == 2  # one task for each source that returned what to await
        assert [(b.text, b.retrieval) for b in blocks] == [("x", Retrieval.ok), ("y", Retrieval.ok), ("y", Retrieval.ok)]


async def test_a_source_answering_at_once_with_a_failure_or_a_wrong_type_is_typed() -> None:
    def raises(ctx: object) -> Found:
        raise KeyError("persona")

    def wrong(ctx: object) -> Found:
        return "text"  # type: ignore[return-value]

    def returns_an_exception(ctx: object) -> Found:
        return ValueError("returned, not raised")  # type: ignore[return-value]

    blocks = await engine.assemble(
        [_source("raises", raises), _source("wrong", wrong), _source("returned", returns_an_exception)], None, 5.0,  # type: ignore[arg-type]
    )
    assert [(b.retrieval, b.result, b.reason) for b in blocks] == [
        (Retrieval.failed, Result.unknown, "KeyError: 'persona'"),
        (Retrieval.failed, Result.unknown, "malformed result: str"),
        (Retrieval.failed, Result.unknown, "malformed result: ValueError"),
    ]


async def test_a_source_keeps_its_own_context_and_the_callers_is_untouched() -> None:
    after_wait: list[str] = []

    async def sets(ctx: object) -> Found:
        _seen.set("source")
        await asyncio.sleep(0)
        after_wait.append(_seen.get())
        return Found(text="x", rows=1)

    def at_once_sets(ctx: object) -> Found:
        _seen.set("source answering at once")
        return Found(text="y", rows=1)

    await engine.assemble([_source("sets", sets), _source("at_once", at_once_sets)], None, 5.0)  # type: ignore[arg-type]
    assert after_wait == ["source"]
    assert _seen.get() == "caller"


async def test_a_source_past_its_timeout_is_cancelled_inside_and_the_block_says_timeout() -> None:
    unwound = asyncio.Event()
    never = asyncio.Event()

    async def stuck(ctx: object) -> Found:
        try:
            await never.wait()
        finally:
            unwound.set()
        return Found(text="never", rows=1)

    async def fails_after_a_wait(ctx: object) -> Found:
        await asyncio.sleep(0)
        raise ConnectionResetError("the store went away")

    blocks = await engine.assemble([_source("stuck", stuck), _source("fails", fails_after_a_wait)], None, 0.05)  # type: ignore[arg-type]
    assert [(b.name, b.retrieval, b.result, b.reason) for b in blocks] == [
        ("stuck", Retrieval.failed, Result.unknown, "timeout"),
        ("fails", Retrieval.failed, Result.unknown, "ConnectionResetError: the store went away"),
    ]
    assert blocks[0].text == "could not check: timeout"
    await asyncio.wait_for(unwound.wait(), 5)


async def test_a_cancelled_wake_cancels_the_sources_still_waiting() -> None:
    waiting, unwound, never = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def stuck(ctx: object) -> Found:
        waiting.set()
        try:
            await never.wait()
        except asyncio.CancelledError:
            unwound.set()
            raise
        return Found(text="never", rows=1)

    wake = asyncio.ensure_future(engine.assemble([_source("stuck", stuck)], None, 60.0))  # type: ignore[arg-type]
    await asyncio.wait_for(waiting.wait(), 5)
    wake.cancel()
    with pytest.raises(asyncio.CancelledError):
        await wake
    await asyncio.wait_for(unwound.wait(), 5)


async def test_a_source_that_waits_several_times_gets_each_result() -> None:
    async def steps(ctx: object) -> Found:
        loop = asyncio.get_running_loop()
        got = []
        for n in range(3):
            fut: asyncio.Future[int] = loop.create_future()
            loop.call_soon(fut.set_result, n)
            got.append(await fut)
        return Found(text=",".join(map(str, got)), rows=len(got))

    (block,) = await engine.assemble([_source("steps", steps)], None, 5.0)  # type: ignore[arg-type]
    assert (block.text, block.rows, block.retrieval) == ("0,1,2", 3, Retrieval.ok)
