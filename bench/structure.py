"""Structure figures of the production packages (issue 37): renaming imports, `Any` in annotations,
the largest modules and functions. `python bench/structure.py [--top N]`."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("wake", "surfaces", "ledgers", "codecheck", "memory", "untrusted")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--top", type=int, default=8)
    top = parser.parse_args().top
    renames, module_renames, anys, modules, functions = 0, 0, 0, [], []
    anys_by_file: list[tuple[int, str]] = []
    for path in _files():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        tree = ast.parse(text)
        modules.append((len(text.splitlines()), rel))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                renamed = [a for a in node.names if a.asname is not None and a.asname != a.name.rsplit(".", 1)[-1]]
                renames += len(renamed)
                base = (node.module or "") if isinstance(node, ast.ImportFrom) else ""
                module_renames += sum(1 for a in renamed if _is_module(".".join(p for p in (base, a.name) if p)))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                functions.append((node.end_lineno - node.lineno + 1, f"{rel}:{node.name}"))
        file_anys = sum(_mentions_any(a) for a in _annotations(tree))
        anys += file_anys
        anys_by_file.append((file_anys, rel))
    print(f"renaming imports: {renames} ({module_renames} of them a module of ours under another name)")
    print(f"annotations using Any: {anys}")
    print("most Any:", ", ".join(f"{f} {n}" for n, f in sorted(anys_by_file, reverse=True)[:10] if n))
    print(f"functions over 60 lines in wake/: {sum(1 for n, f in functions if n > 60 and f.startswith('wake/'))}")
    print("largest modules:", ", ".join(f"{f} {n}" for n, f in sorted(modules, reverse=True)[:top]))
    print("largest functions:", ", ".join(f"{f} {n}" for n, f in sorted(functions, reverse=True)[:top]))
    for n, f in sorted(functions, reverse=True):
        if n > 60 and f.startswith("wake/"):
            print(f"  over 60: {f} {n}")


if __name__ == "__main__":
    main()
