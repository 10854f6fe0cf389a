"""The config's error messages: a pydantic validation error as one line per problem, naming the
file (or the variable that overrode it), the key path and what was expected, every echoed value
clipped (`values.clip`)."""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

import pydantic
from pydantic import BaseModel

from wake.config.root import Config
from wake.config.values import CLIP_CHARS, clip
from wake.errors import ConfigError, KeyProblem

_TYPE_WORDS = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "string": "a string",
    "str": "a string",
    "list": "an array",
    "tuple": "an array",
    "dict": "a table",
    "model": "a table",
}


def config_error(path: Path, exc: pydantic.ValidationError, origins: dict[tuple[str, ...], str]) -> ConfigError:
    """The first problem as the error; every further one on a line of its own below it."""
    problems = [_problem(path, error, origins) for error in exc.errors(include_url=False)]
    first = ConfigError(*problems[0])
    lines = list(dict.fromkeys(str(ConfigError(*p)) for p in problems))  # in order, each once
    if len(lines) > 1:
        first.args = ("\n  ".join(lines),)
    return first


def _problem(path: Path, error: Any, origins: dict[tuple[str, ...], str]) -> tuple[str, str, str]:
    """(source, key, expected) of one validation error."""
    ctx_error = (error.get("ctx") or {}).get("error")
    loc: tuple[str | int, ...] = tuple(error["loc"])
    if isinstance(ctx_error, KeyProblem):
        loc = loc + ctx_error.loc
        expected = ctx_error.message
    else:
        expected = _expected(error, loc)
    key = ".".join(_key_part(part) for part in loc) or "(top level)"
    source = str(path)
    str_loc = tuple(str(part) for part in loc)
    for n in range(len(str_loc), 0, -1):
        if str_loc[:n] in origins:
            source = f"{origins[str_loc[:n]]} (over {path})"
            break
    return source, key, expected


def _expected(error: Any, loc: tuple[str | int, ...]) -> str:
    kind: str = error["type"]
    got = error.get("input")
    if kind == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        return f"unknown key; expected one of: {', '.join(allowed)}" if allowed else "unknown key"
    if kind == "missing":
        return "required key is missing"
    if kind in ("value_error", "assertion_error"):
        return clip_line(str(error["msg"]).removeprefix("Value error, "))
    if kind == "literal_error":
        return f"{error['msg'].replace('Input should be', 'expected')}, got {clip(got)}"
    for prefix, words in _TYPE_WORDS.items():
        if kind.startswith(prefix):
            return f"expected {words}, got {clip(got)} ({type(got).__name__})"
    return f"{error['msg']}, got {clip(got)}"


def _allowed_keys(loc: tuple[str | int, ...]) -> list[str]:
    """The field names of the model found at `loc`, walking through dicts and tuples."""
    annotation: Any = Config
    for part in loc:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return []
            annotation = field.annotation
        elif typing.get_origin(annotation) in (dict, tuple, list):
            annotation = typing.get_args(annotation)[-1 if typing.get_origin(annotation) is dict else 0]
        else:
            return []
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return list(annotation.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """`X | None` -> X."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation


def _key_part(part: str | int) -> str:
    """One step of a key path; a key longer than a clip is clipped too (an agent id of 100 kB)."""
    text = str(part)
    return text if len(text) <= CLIP_CHARS else clip(text)


def clip_line(text: str, limit: int = 4 * CLIP_CHARS) -> str:
    """A message from elsewhere (a library's), cut to `limit` characters with its length said."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
