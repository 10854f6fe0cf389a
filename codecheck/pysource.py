"""Python source in canonical form, so that what an anchor states and what the code says compare as text.

- `parameters(text)`: a parameter list as a `def` writes it (`total, sequence=None, *, x=1`),
  annotations dropped, defaults as `ast.unparse` prints them (quotes and spacing normalized);
  `signature(node)` gives the same form for a `def` in the code.
- `literal(text)`: a Python literal (`80`, `"utf-8"`, `(1, 2)`, `None`, `-1.5`) as `repr` of its
  value; `value_of(node)` gives the same for an assignment's right-hand side, or None when it is
  computed (a call, a name, an operation other than a literal's sign).

Everything here reads syntax, never runs code: `ast.parse` and `ast.literal_eval` only.
"""

from __future__ import annotations

import ast

MAX_SOURCE = 500


def signature(args: ast.arguments) -> str:
    """`a, b=1, /, c, *args, d=2, **kw` for a def's arguments: names, order, kinds, defaults."""
    out: list[str] = []
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for i, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        out.append(arg.arg if default is None else f"{arg.arg}={ast.unparse(default)}")
        if args.posonlyargs and i == len(args.posonlyargs) - 1:
            out.append("/")
    if args.vararg is not None:
        out.append(f"*{args.vararg.arg}")
    elif args.kwonlyargs:
        out.append("*")
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append(arg.arg if kw_default is None else f"{arg.arg}={ast.unparse(kw_default)}")
    if args.kwarg is not None:
        out.append(f"**{args.kwarg.arg}")
    return ", ".join(out)


def parameters(text: str) -> str:
    """A parameter list given as text, in `signature`'s form. ValueError when it is not one."""
    if len(text) > MAX_SOURCE:
        raise ValueError(f"at most {MAX_SOURCE} characters")
    try:
        tree = ast.parse(f"def _({text.strip()}):\n    pass\n", mode="exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise ValueError("is not a Python parameter list such as 'total, sequence=None, *, description=\"x\"'") from None
    func = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(func, ast.FunctionDef) or len(func.body) != 1 or not isinstance(func.body[0], ast.Pass) or func.decorator_list:
        raise ValueError("is not a Python parameter list (it closes the parenthesis)")
    try:
        return signature(func.args)
    except (ValueError, RecursionError, MemoryError):
        raise ValueError("is too deeply nested to read") from None


def _literal(node: ast.expr) -> str | None:
    try:
        return repr(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def literal(text: str) -> str:
    """A Python literal given as text, as `repr` of its value. ValueError when it is not one."""
    if len(text) > MAX_SOURCE:
        raise ValueError(f"at most {MAX_SOURCE} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise ValueError("is not a Python literal such as 80, 'utf-8', (1, 2) or None") from None
    found = _literal(tree.body)
    if found is None:
        raise ValueError("is not a Python literal (a number, string, bytes, tuple, list, dict, set, True, False or None)")
    return found


def value_of(node: ast.expr) -> str | None:
    """The literal an assignment binds, in `literal`'s form; None when it is computed."""
    return _literal(node)
