"""CLI start-up benchmark: a one-shot command's time, before and after, beside its floor. Prints
figures; not a test.

    python bench/cli.py [--before REF] [--runs 7] [--no-wake-up]

Two trees are measured in the same run, their runs interleaved so a change in the machine's load
falls on both: `before` (a git ref, exported with `git archive` into a temporary directory;
default: where this branch left `main`) and `after` (this checkout). Each figure is the median
(and the spread) of `--runs` fresh interpreters, in wall time and in CPU time (user + system, the
process and its children): on a loaded machine the wall time counts the waits for a core, the CPU
time does not. Both trees run from bytecode compiled once into their own cache
(PYTHONPYCACHEPREFIX), as an installed package would.

1. The floor: `python -c pass`; the libraries every command needs before it does anything (click,
   pydantic for the config, structlog for the log lines); and with the store clients most commands
   open (asyncpg, redis).
2. `import wake.cli.main`, `wake --help`, `wake --version`.
3. `wake ledger` on the embedded default (its engines started by the `wake up` before it).
4. Three `wake up` in a row on the embedded default (the demo agent, a fresh state directory per
   tree): the first pays initdb; the second and third find the engines up (`engines.idle_s`) and pay
   for the wake alone; three more give a median. `wake engines stop` ends them afterwards.
5. `wake up` with `engines.idle_s = 0`, as the test suite runs its commands: the last process out
   stops the engines, so each run starts PostgreSQL and Redis and stops them at its exit.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WAKE = Path(sys.executable).parent / "wake"  # the console script of this environment
PACKAGES = ("wake", "surfaces", "ledgers", "codecheck", "memory")
HERMETIC = ("WAKE_", "PG", "DATABASE_URL", "REDIS_URL", "NEO4J_", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PYTHONPYCACHEPREFIX")


@dataclass
class Tree:
    label: str
    root: Path
    pycache: Path
    state: Path

    def env(self) -> dict[str, str]:
        """This tree's code first on the path (the console script of an editable install would
        otherwise import the tree it was installed from), its bytecode cache, its state directory."""
        base = {k: v for k, v in os.environ.items() if not k.startswith(HERMETIC)}
        return {**base, "PYTHONPATH": str(self.root), "PYTHONPYCACHEPREFIX": str(self.pycache), "WAKE_STATE_DIR": str(self.state)}


@dataclass
class Samples:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def _timed(argv: list[str], tree: Tree, samples: Samples, extra_env: dict[str, str] | None = None) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, cwd=tree.root, env={**tree.env(), **(extra_env or {})}, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    samples.wall.append(time.perf_counter() - started)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    samples.cpu.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:6.0f} ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})"


def _row(label: str, by_tree: dict[str, Samples]) -> str:
    cells = "  ".join(f"{_ms(s.wall):>18} {_ms(s.cpu):>16}" for s in by_tree.values())
    return f"{label:<40} {cells}"


def _header(labels: list[str]) -> str:
    cells = "  ".join(f"{label + ' wall ms':>18} {label + ' cpu ms':>16}" for label in labels)
    return f"{'':<40} {cells}"


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _default_before() -> str:
    merge_base = subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT, capture_output=True, text=True)
    return merge_base.stdout.strip() if merge_base.returncode == 0 and merge_base.stdout.strip() else "main"


@contextlib.contextmanager
def _trees(before_ref: str) -> Iterator[list[Tree]]:
    with tempfile.TemporaryDirectory(prefix="wake-bench-cli-") as tmp:
        base = Path(tmp)
        exported = base / "before"
        exported.mkdir()
        archive = subprocess.run(["git", "archive", before_ref], cwd=ROOT, check=True, capture_output=True)  # the embedded default is config/
        subprocess.run(["tar", "-x", "-C", str(exported)], input=archive.stdout, check=True)
        trees = [Tree("before", exported, base / "pycache-before", base / "state-before"),
                 Tree("after", ROOT, base / "pycache-after", base / "state-after")]
        for tree in trees:  # compiled once, as an install compiles them; not part of any figure
            subprocess.run([sys.executable, "-m", "compileall", "-q", *PACKAGES], cwd=tree.root, env=tree.env(),
                           check=True, stdout=subprocess.DEVNULL)
        try:
            yield trees
        finally:
            for tree in trees:
                subprocess.run([str(WAKE), "engines", "stop"], cwd=tree.root, env=tree.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _measure(label: str, argv: list[str], trees: list[Tree], runs: int, extra_env: dict[str, str] | None = None) -> None:
    by_tree = {t.label: Samples() for t in trees}
    for tree in trees:  # a warm-up, not counted: the page cache, the bytecode of the libraries
        _timed(argv, tree, Samples(), extra_env)
    for _ in range(runs):
        for tree in trees:  # interleaved: a burst of load falls on both
            _timed(argv, tree, by_tree[tree.label], extra_env)
    print(_row(label, by_tree), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default=None, help="the git ref measured as `before` (default: the merge base with main)")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-wake-up", action="store_true", help="skip `wake up` and `wake ledger` (they start PostgreSQL and Redis)")
    args = parser.parse_args()
    before_ref = args.before or _default_before()
    print(f"load average before: {_load()}", flush=True)
    with _trees(before_ref) as trees:
        print(f"before: {before_ref} (git archive); after: this checkout {ROOT}", flush=True)
        print(_header([t.label for t in trees]), flush=True)
        floor = [
            ("python -c pass (the interpreter)", _python("pass")),
            ("import click, pydantic, structlog (floor)", _python("import click, pydantic, structlog")),
            ("  + asyncpg, redis.asyncio (floor)", _python("import click, pydantic, structlog, asyncpg, redis.asyncio")),
            ("import wake.cli.main", _python("import wake.cli.main")),
            ("wake --help", [str(WAKE), "--help"]),
            ("wake --version", [str(WAKE), "--version"]),
        ]
        for label, argv in floor:
            _measure(label, argv, trees, args.runs)
        if not args.no_wake_up:
            wake_up(trees)
            _measure("wake ledger (engines warm)", [str(WAKE), "ledger"], trees, args.runs)
            # the last process out stops the engines (the suite's CLI runs): each run starts them
            _measure("wake up, engines.idle_s = 0", [str(WAKE), "up"], trees, args.runs, {"WAKE_ENGINES__IDLE_S": "0"})
    print(f"load average after: {_load()}")


def wake_up(trees: list[Tree]) -> None:
    """The first `wake up` of each tree (initdb, engines start), then the second and third, the
    trees interleaved."""
    first = {t.label: Samples() for t in trees}
    for tree in trees:
        _timed([str(WAKE), "up"], tree, first[tree.label])
    print(_row("wake up, first (initdb, engines start)", first), flush=True)
    for nth in ("second", "third"):
        warm = {t.label: Samples() for t in trees}
        for tree in trees:
            _timed([str(WAKE), "up"], tree, warm[tree.label])
        print(_row(f"wake up, {nth} (engines warm)", warm), flush=True)
    _measure("wake up, warm (the next ones)", [str(WAKE), "up"], trees, 3)


if __name__ == "__main__":
    main()
