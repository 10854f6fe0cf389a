"""The daemon's shutdown waits for its side tasks boundedly: a loop that lost its cancellation is
asked again, and one that never ends is named, not waited on forever."""

from __future__ import annotations

import asyncio

import pytest
import structlog

from wake.daemon import drain


async def test_a_side_task_that_lost_its_cancellation_is_cancelled_again() -> None:
    swallowed = asyncio.Event()

    async def loses_the_first() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:  # as a wait_for that finished just as the cancel came does
            swallowed.set()
        await asyncio.Event().wait()  # the loop goes on, until cancelled again

    task = asyncio.create_task(loses_the_first(), name="loses-the-first")
    await asyncio.sleep(0)
    with structlog.testing.capture_logs() as logged:
        await drain.cancelled([task])
    assert swallowed.is_set() and task.cancelled()
    assert not [e for e in logged if e["event"] == "daemon.side_tasks_stuck"]


async def test_a_side_task_that_never_ends_is_named_and_left(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drain, "CANCEL_GRACE_S", 0.3)  # the bound is what is under test
    release = asyncio.Event()

    async def never_ends() -> None:
        while not release.is_set():
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass

    task = asyncio.create_task(never_ends(), name="never-ends")
    await asyncio.sleep(0)
    with structlog.testing.capture_logs() as logged:
        await drain.cancelled([task])
    assert [e["tasks"] for e in logged if e["event"] == "daemon.side_tasks_stuck"] == [["never-ends"]]
    release.set()
    task.cancel()
    await asyncio.wait([task])
