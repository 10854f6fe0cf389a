"""Typed anchors: what a fact stands on in code, in a form a machine can check against the workspace.

A fact's `anchors` (a JSON list on `facts.anchors`) say where it can be checked again. Two families
share the list:

- provenance anchors, checked by the facts arrival query against the ledgers: `message`, `wake`,
  `url` (`{"type": ..., "ref": ...}`);
- code anchors, checked against the agent's workspace at its git HEAD (`codecheck.verify`):

  | type | `ref` | extra keys | matches |
  |---|---|---|---|
  | `file` | a path relative to the workspace root | | a file (or a symlink to one) in the HEAD tree, never a directory |
  | `dir` | a path relative to the workspace root | | a directory in the HEAD tree |
  | `signature` | a qualified callable | `params` | its parameters (names, order, kinds, defaults as source), from the AST |
  | `value` | a qualified constant | `value` | its module- or class-level literal value, from the AST |
  | `import` | an absolute dotted module name | `where` | an import statement of that module (see `codecheck.fingerprint`) |
  | `symbol` | a qualified definition, `pkg.mod.Class.method` | | a definition, or a name re-exported from one |
  | `env` | an environment variable name | `where` | a read of it through `os.environ` / `os.getenv` |
  | `package` | a distribution name | `ecosystem` (`python` or `npm`), `scope` | a declared dependency (PEP 503 names for Python), in that scope |
  | `absent` | — | `anchor`: file, dir, import, symbol, env or package | the wrapped anchor does NOT match: what the fact says is not used |

  `where` places the anchor: a path (contains `/` or ends in `.py`: that file, or every file under
  that directory) or a dotted name (a module: its file or package; a definition: inside it, which
  for an import means the import statement is in it or a name it binds is used in it).

A package's `scope` says how it is depended on: `required` (a runtime dependency), `optional` (any
extra), `extra:NAME` (that extra), `dev` or `test` (a group the manifest names so); without one,
declared anywhere. A fact holds at most `MAX_ANCHORS` anchors, and a `ref` or `where` at most
`MAX_TEXT` characters, at every write path (this parser, the tool schema, a CHECK in the schema).

Any anchor may carry `"inferred": true`: it was read from the fact's prose (`infer`), not given
at write time. The verifier never lets an inferred anchor decide a verdict.

Paths in `ref` and `where` are refused when they leave the workspace, the way probe roots refuse
escapes: an absolute path, or a `..` that normalizes outside the root. Every refusal is one
`AnchorError` naming the anchor (`anchors[2] (import 'redis'): ...`).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass

from codecheck import pysource
from codecheck.errors import AnchorError as AnchorError  # noqa: F401  (defined in codecheck/errors.py, imported from here too)

PROVENANCE_TYPES: tuple[str, ...] = ("message", "wake", "url")
CODE_TYPES: tuple[str, ...] = ("file", "dir", "import", "symbol", "env", "package", "signature", "value")
NEGATABLE_TYPES: tuple[str, ...] = ("file", "dir", "import", "symbol", "env", "package")  # what `absent` can wrap
ABSENT = "absent"
TYPES: tuple[str, ...] = (*CODE_TYPES, ABSENT, *PROVENANCE_TYPES)
ECOSYSTEMS: tuple[str, ...] = ("python", "npm")
PLACED_TYPES: tuple[str, ...] = ("import", "env")  # the types that take `where`
SCOPES: tuple[str, ...] = ("required", "optional", "dev", "test")  # and extra:NAME
EXTRA_PREFIX = "extra:"
MAX_ANCHORS = 16   # anchors on one fact (the tool schema's maxItems, and a CHECK on facts.anchors)
MAX_TEXT = 500     # characters in one ref or where

# PEP 508 distribution names, and npm's (optionally @scope/name)
_PEP508_NAME = re.compile(r"^([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])$")
_NPM_NAME = re.compile(r"^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$")


@dataclass(frozen=True, kw_only=True, slots=True)
class Anchor:
    """One anchor. `negated` is the `absent` wrapper: the inner anchor must not match."""

    type: str
    ref: str
    where: str | None = None
    ecosystem: str | None = None
    scope: str | None = None
    negated: bool = False
    inferred: bool = False
    expected: str | None = None  # signature: the parameters, value: the literal, each in its canonical source form

    @property
    def is_code(self) -> bool:
        return self.type in CODE_TYPES

    def inner_json(self) -> dict[str, object]:
        out: dict[str, object] = {"type": self.type, "ref": self.ref}
        if self.where is not None:
            out["where"] = self.where
        if self.ecosystem is not None:
            out["ecosystem"] = self.ecosystem
        if self.scope is not None:
            out["scope"] = self.scope
        if self.expected is not None:
            out[_EXPECTED_KEY[self.type]] = self.expected
        return out

    def to_json(self) -> dict[str, object]:
        """The stored form: the `absent` wrapper around the inner anchor when negated."""
        out: dict[str, object] = {"type": ABSENT, "anchor": self.inner_json()} if self.negated else self.inner_json()
        if self.inferred:
            out["inferred"] = True
        return out

    def describe(self) -> str:
        """`import httpcore in httpx/_transports/default.py`, `absent package redis`."""
        text = f"{self.type} {self.ref}"
        if self.where is not None:
            text += f" in {self.where}"
        if self.ecosystem is not None:
            text += f" ({self.ecosystem})"
        if self.scope is not None:
            text += f" as {self.scope}"
        if self.expected is not None:
            text += f"({self.expected})" if self.type == "signature" else f" = {self.expected}"
        return ("absent " if self.negated else "") + text + (" (inferred)" if self.inferred else "")


def workspace_path(path: str, what: str = "path") -> str:
    """`path` normalized relative to the workspace root. An absolute path, or one whose `..`
    leaves the root, raises `AnchorError` (as a probe target that escapes its roots does)."""
    if not isinstance(path, str) or not path.strip():
        raise AnchorError(f"{what} must be a non-empty path")
    if "\x00" in path:
        raise AnchorError(f"{what} contains a NUL byte")
    if "\\" in path:
        raise AnchorError(f"{what} must use '/' separators, got {path!r}")
    if path.startswith("/"):
        raise AnchorError(f"{what} is absolute ({path!r}); anchor paths are relative to the workspace root")
    normal = posixpath.normpath(path)
    if normal == ".." or normal.startswith("../"):
        raise AnchorError(f"'..' escapes the workspace: {path!r} normalizes to {normal!r}")
    if normal == ".":
        raise AnchorError(f"{what} {path!r} is the workspace root itself, not a file in it")
    return normal


def is_dotted(text: str) -> bool:
    """A dotted Python name (`a.b.c`), as opposed to a path."""
    return not text.endswith(".py") and "/" not in text and all(part.isidentifier() for part in text.split("."))


def _dotted(value: object, what: str, *, min_parts: int = 1) -> str:
    if not isinstance(value, str) or not is_dotted(value.strip()):
        raise AnchorError(f"{what} must be a dotted Python name such as pkg.module, got {value!r}")
    name: str = value.strip()
    if len(name.split(".")) < min_parts:
        raise AnchorError(f"{what} must be qualified with its module (module.Name), got {name!r}")
    return name


def _where(value: object) -> str:
    """A dotted name as given; a path normalized, a directory written `name/` when its normal form
    would read as a dotted name (`./scripts`, `scripts/` -> `scripts/`), so it stays a path."""
    if not isinstance(value, str) or not value.strip():
        raise AnchorError("where must be a non-empty path or dotted name")
    value = value.strip()
    if is_dotted(value):
        return str(value)
    normal = workspace_path(value.rstrip("/") or value, "where")
    return normal + "/" if is_dotted(normal) else normal


def _scope(value: object) -> str:
    if isinstance(value, str) and value.startswith(EXTRA_PREFIX):
        extra = value[len(EXTRA_PREFIX):]
        if _PEP508_NAME.match(extra):
            return EXTRA_PREFIX + re.sub(r"[-_.]+", "-", extra).lower()  # PEP 685 extra names
    if value in SCOPES:
        return str(value)
    raise AnchorError(f"scope must be one of {', '.join(SCOPES)} or extra:NAME, got {_clipped(value)}")


def _clipped(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def _bounded(value: object, what: str) -> None:
    if isinstance(value, str) and len(value) > MAX_TEXT:
        raise AnchorError(f"{what} must be at most {MAX_TEXT} characters, got {len(value)}")


def _package(value: object, ecosystem: str | None) -> str:
    if not isinstance(value, str):
        raise AnchorError(f"ref must be a distribution name, got {value!r}")
    if ecosystem == "npm":
        if not _NPM_NAME.match(value):
            raise AnchorError(f"ref {value!r} is not an npm package name")
    elif not _PEP508_NAME.match(value) and not (ecosystem is None and _NPM_NAME.match(value)):
        raise AnchorError(f"ref {value!r} is not a distribution name (PEP 508: letters, digits, '.', '_', '-')")
    return value


_EXPECTED_KEY = {"signature": "params", "value": "value"}

_ALLOWED_KEYS: dict[str, set[str]] = {
    "file": {"type", "ref"},
    "dir": {"type", "ref"},
    "signature": {"type", "ref", "params"},
    "value": {"type", "ref", "value"},
    "import": {"type", "ref", "where"},
    "symbol": {"type", "ref"},
    "env": {"type", "ref", "where"},
    "package": {"type", "ref", "ecosystem", "scope"},
    "message": {"type", "ref"},
    "wake": {"type", "ref"},
    "url": {"type", "ref"},
}


def _one(raw: object, *, negated: bool, inferred: bool) -> Anchor:
    if not isinstance(raw, dict):
        raise AnchorError(f"must be an object with a type, got {type(raw).__name__}")
    kind = raw.get("type")
    if kind not in TYPES:
        raise AnchorError(f"type must be one of {', '.join(TYPES)}, got {kind!r}")
    if kind == ABSENT:
        return _absent(raw, negated=negated, inferred=inferred)
    allowed = _ALLOWED_KEYS[kind] | ({"inferred"} if not negated else set())
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise AnchorError(f"a {kind} anchor takes {', '.join(sorted(allowed))}; unknown key {unknown[0]!r}")
    ref = raw.get("ref")
    if not isinstance(ref, str) or not ref.strip():
        raise AnchorError(f"a {kind} anchor needs a non-empty string ref")
    where = raw.get("where")
    ecosystem = raw.get("ecosystem")
    scope = raw.get("scope")
    _bounded(ref, "ref")
    _bounded(where, "where")
    expected = _expected(kind, raw)
    return Anchor(type=kind, ref=_ref(kind, ref, ecosystem), where=_where(where) if where is not None else None,
                  ecosystem=ecosystem, scope=_scope(scope) if scope is not None else None, negated=negated, inferred=inferred,
                  expected=expected)


def _expected(kind: str, raw: dict[str, object]) -> str | None:
    """A signature's parameters or a value's literal, in the canonical source form the fingerprint
    gives the code's (`codecheck.pysource`), so the two compare as text."""
    if kind not in _EXPECTED_KEY:
        return None
    key = _EXPECTED_KEY[kind]
    given = raw.get(key)
    if not isinstance(given, str):
        raise AnchorError(f"a {kind} anchor needs {key}, a string of Python source, got {_clipped(given)}")
    _bounded(given, key)
    try:
        return pysource.parameters(given) if kind == "signature" else pysource.literal(given)
    except ValueError as exc:
        raise AnchorError(f"{key} {_clipped(given)}: {exc}") from None


def _absent(raw: dict[str, object], *, negated: bool, inferred: bool) -> Anchor:
    if negated:
        raise AnchorError(f"absent wraps one of {', '.join(NEGATABLE_TYPES)}, not another absent")
    extra = set(raw) - {"type", "anchor", "inferred"}
    if extra or "anchor" not in raw:
        raise AnchorError("absent takes exactly the keys type, anchor (and optionally inferred)")
    inner = _one(raw["anchor"], negated=True, inferred=inferred)
    if inner.type not in NEGATABLE_TYPES:
        raise AnchorError(f"absent wraps a code anchor ({', '.join(NEGATABLE_TYPES)}), not {inner.type}")
    return inner


def _ref(kind: str, ref: str, ecosystem: object) -> str:
    """`ref` checked and normalized for its anchor type."""
    if kind in ("file", "dir"):
        return workspace_path(ref.rstrip("/") if kind == "dir" and ref.strip("/") else ref, "ref")
    if kind == "import":
        return _dotted(ref, "ref")
    if kind in ("symbol", "signature", "value"):
        return _dotted(ref, "ref", min_parts=2)
    if kind == "env":
        if "=" in ref or "\x00" in ref:
            raise AnchorError(f"ref {ref!r} is not an environment variable name (no '=' or NUL)")
        return ref
    if kind == "package":
        if ecosystem is not None and ecosystem not in ECOSYSTEMS:
            raise AnchorError(f"ecosystem must be one of {', '.join(ECOSYSTEMS)}, got {ecosystem!r}")
        return _package(ref.strip(), ecosystem)
    return ref


def _label(raw: object) -> str:
    if isinstance(raw, dict):
        wrapped = raw.get("anchor") if raw.get("type") == ABSENT else None
        inner: dict[str, object] = wrapped if isinstance(wrapped, dict) else raw
        kind = inner.get("type")
        shown = kind if isinstance(kind, str) and kind.isidentifier() and len(kind) <= 40 else _clipped(kind)  # escaped, clipped
        label = shown if inner is raw else f"absent {shown}"
        ref = inner.get("ref")
        return f"{label} {_clipped(ref)}" if isinstance(ref, str) else label
    return type(raw).__name__


def parse(value: object) -> list[Anchor]:
    """Anchors from their JSON form: a list, or a JSON text of one. Raises `AnchorError` naming
    the first bad anchor (`anchors[1] (import 'x'): ...`); nothing is half-accepted."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise AnchorError(f"anchors are not valid JSON: {exc.msg} at offset {exc.pos}") from None
    if not isinstance(value, list):
        raise AnchorError(f"anchors must be a JSON list of anchor objects, got {type(value).__name__}")
    if len(value) > MAX_ANCHORS:
        raise AnchorError(f"a fact takes at most {MAX_ANCHORS} anchors, got {len(value)}: anchor what the fact says, not everything near it")
    out = []
    for i, raw in enumerate(value):
        inferred = raw.get("inferred", False) if isinstance(raw, dict) else False
        try:
            if not isinstance(inferred, bool):
                raise AnchorError(f"inferred must be true or false, got {inferred!r}")
            out.append(_one(raw, negated=False, inferred=inferred))
        except AnchorError as exc:
            raise AnchorError(f"anchors[{i}] ({_label(raw)}): {exc}") from None
    return out


def to_json(anchors: Iterable[Anchor]) -> list[dict[str, object]]:
    return [a.to_json() for a in anchors]


# -- the tool parameter schema ----------------------------------------------------------------

def _object(kind: str, description: str, ref: dict[str, object], extra: dict[str, object], *, top: bool) -> dict[str, object]:
    properties: dict[str, object] = {"type": {"enum": [kind]}, "ref": {**ref, "description": description}, **extra}
    if top:
        properties["inferred"] = {"type": "boolean", "description": "true when read from prose, not given by you"}
    return {"type": "object", "properties": properties, "required": ["type", "ref"], "additionalProperties": False}


_TEXT = {"type": "string", "minLength": 1, "maxLength": MAX_TEXT}
_SCOPE = {"type": "string", "minLength": 1, "maxLength": 120,
          "description": "how it is depended on: required (a runtime dependency), optional (any extra), extra:NAME, dev, test; "
                         "leave it out for declared anywhere"}
_WHERE = {**_TEXT, "description": "where it must be: a path (a file, or a directory for every file under it) or a "
                                   "dotted module or definition (pkg.mod, pkg.mod.Class.method)"}


def _code_anchors(*, top: bool) -> list[dict[str, object]]:
    return [
        _object("file", "a file (not a directory) relative to the workspace root", _TEXT, {}, top=top),
        _object("dir", "a directory relative to the workspace root (a package's directory, scripts/)", _TEXT, {}, top=top),
        _object("import", "the imported module, absolute and dotted (pkg.mod)", _TEXT, {"where": _WHERE}, top=top),
        _object("symbol", "a qualified definition: pkg.mod.Class.method", _TEXT, {}, top=top),
        _object("env", "an environment variable the code reads", _TEXT, {"where": _WHERE}, top=top),
        _object("package", "a declared dependency (distribution name)", {**_TEXT, "maxLength": 214},
                {"ecosystem": {"enum": list(ECOSYSTEMS)}, "scope": _SCOPE}, top=top),
    ]


def _expected_anchors() -> list[dict[str, object]]:
    return [
        _object("signature", "a qualified callable: pkg.mod.func or pkg.mod.Class.method (a class: its __init__)", _TEXT,
                {"params": {**_TEXT, "description": "its parameters as the def writes them, without annotations: "
                                                    "'total, sequence=None, *, description=\"Working...\"' ('' for none, 'self' included)"}},
                top=True) | {"required": ["type", "ref", "params"]},
        _object("value", "a qualified module- or class-level constant: pkg.mod.NAME or pkg.mod.Class.NAME", _TEXT,
                {"value": {**_TEXT, "description": "its value as a Python literal: 80, 'utf-8', (1, 2), None"}},
                top=True) | {"required": ["type", "ref", "value"]},
    ]


# The `anchors` parameter of remember_fact / supersede_fact: portable JSON Schema (enum, anyOf,
# required, additionalProperties, min/maxLength; no `const`, no regex classes).
JSON_SCHEMA: dict[str, object] = {
    "type": "array",
    "description": (
        "What the fact stands on, checked against your workspace at its git HEAD whenever the fact is read: "
        "files, directories, imports, definitions, a callable's parameters (signature), a constant's value (value), "
        "environment reads, declared packages; wrap one in absent for something the fact says is NOT there. A fact is "
        "shown verified only when its anchors cover every name and number its value states. Place an import or env "
        "read with where (the file, package or definition the fact is about): an import elsewhere does not verify it. "
        "Messages, wakes and URLs are kept as provenance."
    ),
    "maxItems": MAX_ANCHORS,
    "items": {"anyOf": [
        *_code_anchors(top=True),
        *_expected_anchors(),
        {
            "type": "object",
            "properties": {
                "type": {"enum": [ABSENT]},
                "anchor": {"anyOf": _code_anchors(top=False)},
                "inferred": {"type": "boolean"},
            },
            "required": ["type", "anchor"],
            "additionalProperties": False,
        },
        *(_object(kind, f"the {kind} the fact came from", _TEXT, {}, top=False) for kind in PROVENANCE_TYPES),
    ]},
    "default": [],
}


# -- prose: the fallback ------------------------------------------------------------------------

_BACKTICKED = re.compile(r"`([^`\n]{1,200})`")
_IMPORT_PROSE = re.compile(r"\b(?:from\s+([A-Za-z_][\w.]*)\s+import\b|import\s+([A-Za-z_][\w.]*))")
_ENV_PROSE = re.compile(r"\$\{?([A-Z][A-Z0-9_]{1,63})\}?|\b([A-Z][A-Z0-9]*_[A-Z0-9_]+)\b")
_PATH_SUFFIXES = (".py", ".toml", ".txt", ".json", ".cfg", ".ini", ".yaml", ".yml", ".md", ".sql", ".js", ".ts")


def infer(text: str) -> list[Anchor]:
    """Anchors guessed from a fact's prose, each marked `inferred`: import statements quoted in
    the text, backticked paths and dotted names, `$VARS` and SHOUTING_SNAKE names as env reads.
    A guess, never a verdict: the verifier reports what it finds for these and decides nothing."""
    found: dict[tuple[str, str], Anchor] = {}

    def add(kind: str, ref: str) -> None:
        try:
            anchor = _one({"type": kind, "ref": ref}, negated=False, inferred=True)
        except AnchorError:
            return
        found.setdefault((anchor.type, anchor.ref), anchor)

    for match in _IMPORT_PROSE.finditer(text):
        add("import", (match.group(1) or match.group(2)).rstrip("."))
    for token in _BACKTICKED.findall(text):
        token = token.strip()
        if "/" in token or token.endswith(_PATH_SUFFIXES):
            add("file", token)
        elif is_dotted(token) and "." in token:
            add("symbol", token)
        elif is_dotted(token):
            add("import", token)
    for match in _ENV_PROSE.finditer(text):
        add("env", match.group(1) or match.group(2))
    return list(found.values())
