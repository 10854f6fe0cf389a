"""An MCP server of our own on the SDK's server API, for the tests: it can be told to change a
description between runs, crash mid-call, hang, return 5 MB, emit tools/list_changed, collide on
a name or list a name too long, or serve extra tools with the annotations a test gives (`--annotated
NAME=HINTS`, HINTS a comma list of `ro`, `rw`, `open`, `closed`, or `none`: no annotations).
`python -m tests.support.mcp_server [--http PORT] [--state DIR] [--collide] [--long] [--annotated NAME=HINTS ...]`.

`--state DIR` holds what a test changes between runs and what the server leaves for it to see:
`description` (the echo tool's description, read at every listing), `cancelled` (written when a
hung call is cancelled by the client), `calls` (one line per call).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True)


class Behaviours:
    """The tools' bodies, with the state directory they report to."""

    def __init__(self, server: MCPServer, state: Path | None) -> None:
        self.server, self.state = server, state

    def note(self, name: str) -> None:
        if self.state is not None:
            with (self.state / "calls").open("a", encoding="utf-8") as f:
                f.write(name + "\n")

    def description(self) -> str:
        if self.state is not None and (self.state / "description").is_file():
            return (self.state / "description").read_text(encoding="utf-8").strip()
        return "Echo the text back."

    async def echo(self, text: str) -> str:
        self.note("echo")
        return f"echo: {text}"

    def crash(self) -> str:
        self.note("crash")
        os._exit(3)

    async def hang(self) -> str:
        self.note("hang")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            if self.state is not None:
                (self.state / "cancelled").write_text("hang\n", encoding="utf-8")
            raise
        return "never"

    def big(self) -> str:
        self.note("big")
        return "x" * (5 * 1024 * 1024)

    def fails(self) -> str:
        self.note("fails")
        raise ValueError("this tool always fails")

    async def grow(self, ctx: Context) -> str:
        """Add a tool, then announce tools/list_changed (on the listen stream of a 2026-era session)."""
        self.note("grow")
        self.server.add_tool(lambda n: f"added {n}", name="added", description="A tool that appeared after list_changed.", annotations=READ_ONLY)
        await ctx.notify_tools_changed()
        return "grew"


LONG_NAME = "a_tool_whose_name_is_long_enough_to_overflow"  # 44 characters: over 64 once namespaced by a long server name


_HINTS = {"ro": ("read_only_hint", True), "rw": ("read_only_hint", False), "open": ("open_world_hint", True), "closed": ("open_world_hint", False)}


def annotated(text: str) -> tuple[str, ToolAnnotations | None]:
    """`NAME=HINTS` as the tool's name and its annotations (`none`: the tool has no annotations)."""
    name, _, hints = text.partition("=")
    if hints == "none":
        return name, None
    return name, ToolAnnotations(**dict(_HINTS[h] for h in hints.split(",")))


def _answering(name: str) -> Any:
    def answer(text: str = "") -> str:
        return f"{name}: {text}"

    return answer


def build(state: Path | None, collide: bool, long: bool = False, extra: tuple[str, ...] = ()) -> MCPServer:
    server = MCPServer("wake-test", version="1.0.0")
    b = Behaviours(server, state)
    server.add_tool(b.echo, name="echo", description=b.description(), annotations=READ_ONLY)
    server.add_tool(b.crash, name="crash", description="Exit the server in the middle of the call.")
    server.add_tool(b.hang, name="hang", description="Never answer.", annotations=READ_ONLY)
    server.add_tool(b.big, name="big", description="Answer five megabytes.", annotations=READ_ONLY)
    server.add_tool(b.fails, name="fails", description="Answer with isError.", annotations=READ_ONLY)
    server.add_tool(b.grow, name="grow", description="Add a tool and announce tools/list_changed.")
    if collide:
        server.add_tool(lambda: "dotted", name="get.item", description="A dotted name.", annotations=READ_ONLY)
        server.add_tool(lambda: "underscored", name="get_item", description="The same name once namespaced.", annotations=READ_ONLY)
    if long:
        server.add_tool(lambda: "long", name=LONG_NAME, description="A name too long once namespaced.", annotations=READ_ONLY)
    for text in extra:
        name, annotations = annotated(text)
        server.add_tool(_answering(name), name=name, description=f"The test's annotated tool {name}.", annotations=annotations)
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--state", type=Path, default=None)
    parser.add_argument("--collide", action="store_true")
    parser.add_argument("--long", action="store_true")
    parser.add_argument("--annotated", action="append", default=[])
    args = parser.parse_args()
    server = build(args.state, args.collide, args.long, tuple(args.annotated))
    if args.http is not None:
        asyncio.run(server.run_streamable_http_async(host="127.0.0.1", port=args.http))
    else:
        asyncio.run(server.run_stdio_async())
    sys.exit(0)


if __name__ == "__main__":
    main()
