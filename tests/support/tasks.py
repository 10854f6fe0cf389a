"""Counting the tasks an event loop makes: a task factory that records each one's coroutine."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def counting_tasks() -> Iterator[list[str]]:
    """Within the block, `name file` of the coroutine of each task the running loop makes."""
    made: list[str] = []
    loop = asyncio.get_running_loop()
    factory = loop.get_task_factory()

    def counted(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> Any:
        code = getattr(coro, "cr_code", None)
        made.append(f"{code.co_name} {code.co_filename}" if code is not None else type(coro).__name__)
        return factory(loop, coro, **kwargs) if factory is not None else asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(counted)
    try:
        yield made
    finally:
        loop.set_task_factory(factory)
