"""Structure figures of the production packages (issue 37): renaming imports, `Any` in annotations,
the largest modules and functions, module names that repeat across packages.
`python bench/structure.py [--top N] [--list]` (`--list` prints every renaming import of ours)."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("wake", "surfaces", "ledgers", "codecheck", "memory", "untrusted")
# Renaming imports that are the idiom of their library, not a name of ours under another name.
IDIOMS = frozenset({("datetime", "dt"), ("redis.asyncio", "aioredis")})


def _files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _annotations(tree: ast.AST) -> list[ast.expr]:
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            found.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            found.append(node.returns)
    return found


def _mentions_any(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        try:
            expr = ast.parse(expr.value, mode="eval").body
        except SyntaxError:
            return False
    return any(isinstance(n, ast.Name) and n.id == "Any" or isinstance(n, ast.Attribute) and n.attr == "Any" for n in ast.walk(expr))


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _renames(node: ast.Import | ast.ImportFrom, rel: str) -> tuple[list[tuple[str, bool]], int]:
    """The import's renamings of ours (each as a line to list, and whether it renames a module
    of ours), and how many of its renamings are idioms."""
    base = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
    found, idioms = [], 0
    for a in node.names:
        if a.asname is None or a.asname == a.name.rsplit(".", 1)[-1]:
            continue
        if (a.name, a.asname) in IDIOMS:
            idioms += 1
            continue
        source = f"from {base} import {a.name}" if isinstance(node, ast.ImportFrom) else f"import {a.name}"
        found.append((f"{rel}:{node.lineno}: {source} as {a.asname}", _is_module(".".join(p for p in (base, a.name) if p))))
    return found, idioms


def _shared_module_names() -> dict[str, list[str]]:
    """Module basenames (a package counts by its folder name) found in more than one place."""
    places: dict[str, list[str]] = {}
    for path in _files():
        rel = path.relative_to(ROOT)
        name = rel.parent.name if path.name == "__init__.py" else path.stem
        places.setdefault(name, []).append(rel.parent.as_posix() + "/" if path.name == "__init__.py" else rel.as_posix())
    return {name: sorted(where) for name, where in sorted(places.items()) if len(where) > 1 and name != "errors"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--list", action="store_true", help="print each renaming import of ours and each shared module name")
    args = parser.parse_args()
    top = args.top
    ours: list[str] = []
    idioms, module_renames, anys, modules, functions = 0, 0, 0, [], []
    anys_by_file: list[tuple[int, str]] = []
    for path in _files():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        tree = ast.parse(text)
        modules.append((len(text.splitlines()), rel))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                found, idiomatic = _renames(node, rel)
                ours += [line for line, _ in found]
                module_renames += sum(is_module for _, is_module in found)
                idioms += idiomatic
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                functions.append((node.end_lineno - node.lineno + 1, f"{rel}:{node.name}"))
        file_anys = sum(_mentions_any(a) for a in _annotations(tree))
        anys += file_anys
        anys_by_file.append((file_anys, rel))
    shared = _shared_module_names()
    print(f"renaming imports: {len(ours)} ({module_renames} of them a module of ours under another name;"
          f" idioms apart: {idioms}, {', '.join(f'{m} as {a}' for m, a in sorted(IDIOMS))})")
    print(f"module names in more than one place (errors apart): {len(shared)}")
    print(f"annotations using Any: {anys}")
    print("most Any:", ", ".join(f"{f} {n}" for n, f in sorted(anys_by_file, reverse=True)[:10] if n))
    print(f"functions over 60 lines in wake/: {sum(1 for n, f in functions if n > 60 and f.startswith('wake/'))}")
    print("largest modules:", ", ".join(f"{f} {n}" for n, f in sorted(modules, reverse=True)[:top]))
    print("largest functions:", ", ".join(f"{f} {n}" for n, f in sorted(functions, reverse=True)[:top]))
    for n, f in sorted(functions, reverse=True):
        if n > 60 and f.startswith("wake/"):
            print(f"  over 60: {f} {n}")
    if args.list:
        for line in ours:
            print(f"  renaming: {line}")
        for name, where in shared.items():
            print(f"  shared name: {name}: {', '.join(where)}")


if __name__ == "__main__":
    main()
