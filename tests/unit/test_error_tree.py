"""Every exception class of each package is defined in its errors module (an AST scan): `wake`,
`surfaces`, `ledgers`, `codecheck` and `memory`, each under one base class of its own."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import wake.errors

REPO = Path(__file__).resolve().parents[2]
ERRORS = REPO / "wake" / "errors.py"
BUILTIN_EXCEPTIONS = {name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)}


def _exception_classes(tree: ast.AST, known: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each class whose base is an exception: a builtin one, one of `known`, or a
    name ending in Error or Exception."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = [b.attr if isinstance(b, ast.Attribute) else b.id if isinstance(b, ast.Name) else "" for b in node.bases]
            if any(b in BUILTIN_EXCEPTIONS or b in known or b.endswith(("Error", "Exception")) for b in bases):
                found.append((node.lineno, node.name))
    return found


def test_wake_defines_exceptions_only_in_its_errors_module() -> None:
    known = {name for name, value in vars(wake.errors).items() if isinstance(value, type) and issubclass(value, BaseException)}
    offenders = [
        f"{path.relative_to(REPO)}:{line} class {name}"
        for path in sorted((REPO / "wake").rglob("*.py")) if path != ERRORS
        for line, name in _exception_classes(ast.parse(path.read_text(encoding="utf-8")), known)
    ]
    assert offenders == []


def test_the_scan_sees_each_kind_of_base() -> None:
    tree = ast.parse("class A(ValueError): ...\nclass B(errors.WakeError): ...\nclass C(LeaseBusy): ...\nclass D: ...\nclass E(MyError): ...\n")
    assert [name for _, name in _exception_classes(tree, {"LeaseBusy"})] == ["A", "B", "C", "E"]
    assert {"WakeError", "KeyProblem", "ListenError", "DeliveryFailed", "PrecheckFailed"} <= {
        name for _, name in _exception_classes(ast.parse(ERRORS.read_text(encoding="utf-8")), set())
    } | {"WakeError"}


PACKAGES = {"surfaces": "SurfaceError", "ledgers": "LedgerError", "codecheck": "CodeCheckError", "memory": "MemoryRefused"}


def test_each_package_defines_exceptions_only_in_its_errors_module_under_one_base() -> None:
    import importlib

    offenders = []
    for package, base in PACKAGES.items():
        errors = importlib.import_module(f"{package}.errors")
        known = {name for name, value in vars(errors).items() if isinstance(value, type) and issubclass(value, BaseException)}
        offenders += [
            f"{path.relative_to(REPO)}:{line} class {name}"
            for path in sorted((REPO / package).rglob("*.py")) if path.name != "errors.py"
            for line, name in _exception_classes(ast.parse(path.read_text(encoding="utf-8")), known)
        ]
        root = getattr(errors, base)
        strays = sorted(name for name in known if name != base and issubclass(getattr(errors, name), BaseException)
                        and getattr(errors, name).__module__ == errors.__name__ and not issubclass(getattr(errors, name), root))
        offenders += [f"{package}.errors.{name} is not a {base}" for name in strays]
    assert offenders == []
