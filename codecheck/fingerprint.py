"""A workspace's fingerprint at one commit: what its code says, for typed anchors to match.

Built from the blobs of one git tree (`codecheck.workspace` walks it), never from the working tree:

- files and directories (and symlinks with their targets);
- for every `*.py` file, from its syntax tree (`ast`, never a regex, so comments and strings never
  count): the modules it imports, the definitions it makes (qualified `pkg.mod.Class.method`),
  the names it re-exports, which imported modules each definition uses, and the environment
  variables it reads (`os.environ[...]`, `os.environ.get/setdefault/pop`, `os.getenv`,
  `"X" in os.environ`);
- declared dependencies: `pyproject.toml` (`[project]` dependencies and optional-dependencies,
  `[dependency-groups]`, poetry's dependency tables), `requirements*.txt` (and `*.txt` under a
  `requirements/` directory), `setup.cfg` (`install_requires`, `extras_require`) and
  `package.json`. Python names are compared normalized (PEP 503).

What counts as importing a module `a.b`:

- `import a.b`, `import a.b as x`, `from a.b import c`, and anything deeper (`import a.b.c`
  runs `a.b` first: Python imports every parent package), and `importlib.import_module("a.b")` /
  `__import__("a.b")` with a literal name. Relative imports are resolved against the file's package.
- `from a import b` imports `a`, and imports the submodule `a.b` only when `b` is one: decided
  when `a` is in the workspace (is there an `a/b.py` or `a/b/__init__.py` at HEAD?). When `a` is
  outside the workspace nobody here can tell, so the fingerprint keeps `a.b` as a *possible*
  import and the verifier calls an anchor that needs it undecidable, never matched nor missing.
- Imports under `if TYPE_CHECKING:` count, with a note; so do imports inside `try`/functions.

A blob that cannot be read, decoded or parsed (a syntax error, bad bytes, over the size limit)
does not stop the build: it is listed in `skipped` with the reason, and the verifier treats what
the file might have said as unknown.
"""

from __future__ import annotations

import ast
import configparser
import dataclasses
import functools
import json
import posixpath
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from codecheck import pysource
from untrusted import folding

MAX_BLOB_BYTES = 2_000_000  # a larger .py or manifest is skipped (generated code, vendored data)
_ENV_METHODS = ("get", "setdefault", "pop")


@dataclass(frozen=True, slots=True)
class Site:
    """Where something was found: a file, a line, and the definition it is in (or the module)."""

    path: str
    line: int
    scope: str
    note: str = ""
    typing_only: bool = False  # an import under `if TYPE_CHECKING:`, which never runs

    def describe(self) -> str:
        return f"{self.path}:{self.line}" + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True, slots=True)
class Assigned:
    """What one `def` or assignment says: a callable's parameters or a constant's literal (None:
    computed), in `codecheck.pysource`'s canonical form, and where."""

    text: str | None
    path: str
    line: int
    source: str = ""  # a computed value's source, clipped

    def describe(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True, slots=True)
class Skipped:
    path: str
    reason: str
    tree: bool = False  # a whole subtree that was not read (a submodule, a symlink out of the workspace)

    def covers(self, path: str) -> bool:
        """Whether `path` is this unread file or inside this unread subtree."""
        return path == self.path or (self.tree and path.startswith(self.path + "/"))


@dataclass(frozen=True, slots=True)
class Declaration:
    ecosystem: str  # python | npm
    name: str       # as written
    path: str       # the manifest
    group: str      # dependencies, optional:http2, dev, ...
    spec: str       # the requirement as written
    scopes: tuple[str, ...] = ()  # required | optional, extra:NAME | dev | test; () when the manifest does not say

    def describe(self) -> str:
        return f"{self.path} ({self.group}: {self.spec})"


_DEV_NAMES = frozenset({"dev", "devel", "develop", "development"})
_TEST_NAMES = frozenset({"test", "tests", "testing"})


def canonicalize_name(name: str) -> str:
    """A package's PEP 503 name (packaging's): imported when a manifest is read, since packaging
    imports its platform tags with it (30 ms a wake that checks no package would pay)."""
    import packaging.utils

    return packaging.utils.canonicalize_name(name)


def _named_scope(name: str) -> tuple[str, ...]:
    """A group's scope from its name, where the format leaves it to the name (dependency groups,
    poetry groups, requirements files): dev and test by their usual names, else unknown."""
    low = name.lower()
    if low in _DEV_NAMES:
        return ("dev",)
    if low in _TEST_NAMES:
        return ("test",)
    return ()


def extra_scope(extra: str) -> str:
    """`extra:NAME` with NAME normalized as PEP 685 compares extras."""
    return "extra:" + canonicalize_name(extra)


def requirements_scope(path: str) -> tuple[str, ...]:
    """requirements.txt (or requirements/base.txt, prod.txt, main.txt) is required; a dev or test
    one (requirements-dev.txt, dev-requirements.txt, requirements/test.txt) is that; others unknown."""
    parts = path.rsplit("/", 2)
    stem = parts[-1][: -len(".txt")].lower()
    in_dir = len(parts) > 1 and parts[-2] == "requirements"
    words = [w for w in stem.replace("_", "-").split("-") if w and w != "requirements"]
    if not words and not in_dir or in_dir and stem in ("base", "prod", "production", "main", "requirements", "runtime"):
        return ("required",)
    if any(w in _DEV_NAMES for w in words):
        return ("dev",)
    if any(w in _TEST_NAMES for w in words):
        return ("test",)
    return ()


@dataclass(frozen=True, slots=True)
class ImportStmt:
    module: str                 # absolute module the statement names
    names: tuple[str, ...]      # `from module import a, b`: (a, b); () for `import module`
    line: int
    scope: str
    note: str = ""
    typing_only: bool = False
    call: str = ""              # importlib.import_module / __import__ for an import made by a call


@dataclass(frozen=True, slots=True)
class PyFile:
    """What one Python file says."""

    module: str
    imports: tuple[ImportStmt, ...]
    definitions: tuple[str, ...]
    reexports: tuple[tuple[str, str], ...]   # (module.name bound here, the qualified name it was imported as)
    stars: tuple[str, ...]                   # modules star-imported at module level
    all_names: tuple[str, ...] | None        # a literal __all__
    uses: tuple[tuple[str, str, int], ...]   # (module, scope, line): an imported module used inside a scope
    env_reads: tuple[tuple[str, int, str, str], ...]  # (name, line, scope, note)
    env_dynamic: tuple[tuple[int, str, str], ...]     # (line, scope, why) a read whose name is not a literal
    imports_dynamic: tuple[tuple[int, str], ...]      # (line, scope) import_module(<not a literal>)
    classes: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (qualified class, its bases, qualified where known)
    signatures: tuple[tuple[str, str, int], ...] = ()      # (qualified callable, its parameters (codecheck.pysource), line)
    values: tuple[tuple[str, str | None, int, str], ...] = ()  # (qualified name, its literal or None when computed, line, source)


@dataclass(frozen=True, slots=True)
class Manifest:
    declarations: tuple[Declaration, ...]
    problems: tuple[str, ...]  # entries that could not be read (the rest of the file still counts)


Summary = PyFile | Manifest | Skipped
BlobCache = dict[tuple[str, str, str], Summary]  # (path, blob oid, module) -> what it says


@dataclass(frozen=True, kw_only=True)
class Fingerprint:
    head: str
    files: frozenset[str]
    dirs: frozenset[str]
    symlinks: Mapping[str, str]
    modules: Mapping[str, str]                       # module -> its file
    packages: frozenset[str]                         # modules that are packages (__init__.py)
    imported: Mapping[str, tuple[Site, ...]]         # module (and every parent) -> import sites
    maybe_imported: Mapping[str, tuple[Site, ...]]   # `from a import b` with `a` outside the workspace
    uses: Mapping[str, tuple[Site, ...]]             # module -> sites where a definition uses it
    definitions: frozenset[str]
    bases: Mapping[str, tuple[str, ...]]             # class -> its bases ("?" when not a plain name)
    reexports: Mapping[str, str]
    stars: Mapping[str, tuple[str, ...]]
    all_names: Mapping[str, tuple[str, ...]]
    env_reads: Mapping[str, tuple[Site, ...]]
    env_dynamic: tuple[Site, ...]
    imports_dynamic: tuple[Site, ...]
    dependencies: Mapping[str, tuple[Declaration, ...]]  # "python:h11", "npm:left-pad" -> declarations
    manifests: tuple[str, ...]
    dynamic_manifests: tuple[str, ...]               # setup.py: dependencies this cannot read
    skipped: tuple[Skipped, ...]
    signatures: Mapping[str, tuple[Assigned, ...]] = field(default_factory=dict)  # callable -> each def's parameters
    values: Mapping[str, tuple[Assigned, ...]] = field(default_factory=dict)      # constant -> each assignment's literal
    build_ms: float = 0.0
    parsed: int = 0          # blobs read and parsed in this build
    reused: int = 0          # blobs whose summary came from the previous build (same oid)
    built_at: float = 0.0    # the workspace clock when it was built
    cache: BlobCache = field(default_factory=dict, repr=False, compare=False)
    # the builder's own cache of what it walked (codecheck.workspace: subtrees by oid), kept for the next build
    walk_cache: dict[object, object] = field(default_factory=dict, repr=False, compare=False)
    # every name the workspace defines or uses that an anchor could name, and the TS #39 skeleton of each
    # (codecheck.names): built with the fingerprint, in the worker, so that no budget pays for them
    names: frozenset[str] = frozenset()
    skeletons: Mapping[str, str] = field(default_factory=dict, repr=False)  # skeleton -> a name with it

    def size(self) -> dict[str, int]:
        return {
            "files": len(self.files), "python_modules": len(self.modules), "imported_modules": len(self.imported),
            "definitions": len(self.definitions), "env_reads": len(self.env_reads),
            "dependencies": len(self.dependencies), "skipped": len(self.skipped),
        }

    def skipped_under(self, scope: str | None, *, python: bool = True) -> list[Skipped]:
        """Skipped files that could hold what an anchor looks for in `scope` (a path, or None:
        anywhere). An unread subtree (a submodule, a link out) could hold any code; its manifests
        would declare its own dependencies, not the workspace's, so it counts for Python only."""
        out = []
        for s in self.skipped:
            if python != (s.tree or s.path.endswith(".py")):
                continue
            if scope is None or s.path == scope or s.path.startswith(scope + "/") or s.covers(scope):
                out.append(s)
        return out

    def unread(self, path: str) -> Skipped | None:
        """The unread subtree (a submodule, a symlink out of the workspace) `path` is in, if any."""
        return next((s for s in self.skipped if s.tree and s.covers(path)), None)

    @functools.cached_property
    def module_depth(self) -> int:
        """The most parts a module name of the workspace has: a dotted name's module is among its
        first `module_depth` parts, so resolving one is linear in its length."""
        return max((m.count(".") + 1 for m in self.modules), default=0)


# -- module names -------------------------------------------------------------------------------


def module_name(path: str, package_dirs: frozenset[str]) -> tuple[str, bool]:
    """The module a `.py` path defines and whether it is a package. The module path starts at the
    topmost directory of the chain of packages (`__init__.py`) holding the file; a file outside
    any package is named from the root, less a leading `src/`."""
    parts = path[:-3].split("/")
    is_package = parts[-1] == "__init__"
    dirs = parts[:-1]
    start = len(dirs)
    while start > 0 and "/".join(dirs[:start]) in package_dirs:
        start -= 1
    if start == len(dirs):  # the file's own directory is not a package
        start = 1 if dirs[:1] == ["src"] else 0
    names = parts[start:-1] if is_package else parts[start:]
    return ".".join(names) or parts[-1], is_package


def resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str | None:
    """`from ..x import y` in `module` -> the absolute module it names (None: it leaves the top)."""
    if level == 0:
        return name
    package = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(package) or (level - 1 == len(package) and not name):
        return None
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, *([name] if name else [])]) or None


# -- Python files -------------------------------------------------------------------------------


def _chain(node: ast.expr) -> str | None:
    """`a.b.c` for a pure chain of names and attributes, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _clip_source(node: ast.AST, limit: int = 80) -> str:
    try:
        text = ast.unparse(node)
    except (ValueError, RecursionError):
        return "(unprintable)"
    return text if len(text) <= limit else text[:limit] + "…"


def _is_type_checking(test: ast.expr) -> bool:
    return _chain(test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING", "t.TYPE_CHECKING")


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level `NAME = "literal"`: an env read through such a name is a literal read."""
    out: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = stmt.value.value
    return out


def _literal_names(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.List | ast.Tuple) and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


Key = tuple[str | None, str]


def _whole_environ(chain: str, role: str, environ: set[str]) -> bool:
    """`os.environ` used other than as a read of one name: `dict(os.environ)`, `os.environ.copy()`."""
    for e in environ:
        if chain == e:
            return role not in ("subscript", "contains")
        if chain.startswith(e + "."):
            return not (role == "call" and chain[len(e) + 1:] in _ENV_METHODS)
    return False  # (the literal name, or None when computed; how it was read)


def _env_read(key: Key, line: int, scope: str, how: str, env_reads: list[tuple[str, int, str, str]],
              env_dynamic: list[tuple[int, str, str]]) -> None:
    if key[0] is None:
        env_dynamic.append((line, scope, f"{how}: {key[1]}"))
    else:
        env_reads.append((key[0], line, scope, key[1]))


class _Reader(ast.NodeVisitor):
    """One pass over a module: definitions and imports with their scopes, and every place an
    environment read or a use of an import could be. Which names are imports (and which of them
    are `os`) is known only at the end, so those places are resolved in `finish`.

    Bindings are one map per file: a function-local import is visible to the whole file here (an
    approximation documented in docs/verify.md)."""

    def __init__(self, module: str, is_package: bool, constants: dict[str, str]) -> None:
        self.module, self.is_package, self.constants = module, is_package, constants
        self.scope = [module]
        self.function_depth = 0
        self.typing_only = 0
        self.bindings: dict[str, list[str]] = {}  # name -> every module path an import binds it to
        self.imports: list[ImportStmt] = []
        self.definitions: list[str] = []
        self.reexports: list[tuple[str, str]] = []
        self.stars: list[str] = []
        self.all_names: list[str] | None = None
        self.roles: dict[int, str] = {}                               # node id -> call | subscript | contains
        self.loads: list[tuple[str, int, str, str]] = []             # (chain, line, scope, role)
        self.calls: list[tuple[str, Key, int, str]] = []             # (func chain, first argument, line, scope)
        self.subscripts: list[tuple[str, Key, int, str]] = []        # (value chain, key, line, scope), loads only
        self.contains: list[tuple[str, Key, int, str]] = []          # ("X" in chain)
        self.classes: list[tuple[str, list[str]]] = []
        self.signatures: list[tuple[str, str, int]] = []
        self.values: list[tuple[str, str | None, int, str]] = []

    # scopes and definitions

    @property
    def here(self) -> str:
        return self.scope[-1]

    def _define(self, name: str) -> str:
        qualified = f"{self.here}.{name}"
        if self.function_depth == 0:
            self.definitions.append(qualified)
        return qualified

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, is_function: bool) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        if isinstance(node, ast.ClassDef):
            for base in [*node.bases, *node.keywords]:
                self.visit(base)
        qualified = self._define(node.name)
        if not isinstance(node, ast.ClassDef) and self.function_depth == 0:
            try:
                self.signatures.append((qualified, pysource.signature(node.args), node.lineno))
            except RecursionError:
                pass  # a default too deep to print: the signature is not known (an anchor on it is undecidable)
        if isinstance(node, ast.ClassDef) and self.function_depth == 0:
            self.classes.append((qualified, [_chain(base.value if isinstance(base, ast.Subscript) else base) or "?"
                                             for base in node.bases]))
        self.scope.append(qualified)
        self.function_depth += is_function
        if not isinstance(node, ast.ClassDef):
            self.visit(node.args)
            if node.returns is not None:
                self.visit(node.returns)
        for stmt in node.body:
            self.visit(stmt)
        self.function_depth -= is_function
        self.scope.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scoped(node, False)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(node, True)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._scoped(node, True)

    def _assigned(self, target: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self._define(target.id)
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._assigned(element)

    def _valued(self, target: ast.expr, value: ast.expr | None, line: int) -> None:
        """A module- or class-level constant's value: the literal, or None when it is computed
        (a call, a name, an unpacking, an annotation with no value)."""
        if self.function_depth:
            return
        if isinstance(target, ast.Name):
            literal = pysource.value_of(value) if value is not None else None
            source = "" if literal is not None else ("(no value)" if value is None else _clip_source(value))
            self.values.append((f"{self.here}.{target.id}", literal, line, source))
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._valued(element, None, line)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._valued(target, node.value if isinstance(target, ast.Name) else None, node.lineno)
        for target in node.targets:
            self._assigned(target)
            if isinstance(target, ast.Name) and target.id == "__all__" and len(self.scope) == 1:
                names = _literal_names(node.value)
                self.all_names = names if names is not None else self.all_names
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name) and not self.function_depth:
            self.values.append((f"{self.here}.{node.target.id}", None, node.lineno, "changed by " + _clip_source(node)))
        if isinstance(node.target, ast.Name) and node.target.id == "__all__" and self.all_names is not None:
            self.all_names += _literal_names(node.value) or []
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._valued(node.target, node.value, node.lineno)
        self._assigned(node.target)
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self.typing_only += 1
            for stmt in node.body:
                self.visit(stmt)
            self.typing_only -= 1
            for stmt in node.orelse:
                self.visit(stmt)
        else:
            self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        """Nothing in a literal counts (and NodeVisitor's own visit_Constant is slow)."""

    # imports

    def _note(self) -> str:
        return "under TYPE_CHECKING" if self.typing_only else ""

    def _bind(self, name: str, target: str) -> None:
        targets = self.bindings.setdefault(name, [])
        if target not in targets:
            targets.append(target)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.imports.append(ImportStmt(module=alias.name, names=(), line=node.lineno, scope=self.here, note=self._note(),
                                           typing_only=self.typing_only > 0))
            if alias.asname:
                self._bind(alias.asname, alias.name)
            else:
                top = alias.name.split(".")[0]
                self._bind(top, top)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = resolve_relative(self.module, self.is_package, node.level, node.module)
        if base is None:
            return
        self.imports.append(ImportStmt(module=base, names=tuple(a.name for a in node.names), line=node.lineno,
                                       scope=self.here, note=self._note(), typing_only=self.typing_only > 0))
        for alias in node.names:
            if alias.name == "*":
                if len(self.scope) == 1:
                    self.stars.append(base)
                continue
            self._bind(alias.asname or alias.name, f"{base}.{alias.name}")
            if len(self.scope) == 1:
                self.reexports.append((f"{self.module}.{alias.asname or alias.name}", f"{base}.{alias.name}"))

    # places an environment read or a use of an import could be

    def _key(self, node: ast.expr | None) -> Key:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value, ""
        if isinstance(node, ast.Name) and node.id in self.constants:
            return self.constants[node.id], f"through the constant {node.id}"
        return None, "the name is computed" if node is not None else "no name given"

    def visit_Call(self, node: ast.Call) -> None:
        func = _chain(node.func)
        if func is not None:
            self.calls.append((func, self._key(node.args[0] if node.args else None), node.lineno, self.here))
            self.roles[id(node.func)] = "call"
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        value = _chain(node.value)
        if value is not None:
            self.roles[id(node.value)] = "subscript"
            if isinstance(node.ctx, ast.Load):
                self.subscripts.append((value, self._key(node.slice), node.lineno, self.here))
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        for op, right in zip(node.ops, node.comparators, strict=True):
            chain = _chain(right) if isinstance(op, ast.In | ast.NotIn) else None
            if chain is not None:
                self.roles[id(right)] = "contains"
                self.contains.append((chain, self._key(node.left), node.lineno, self.here))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain = _chain(node)
        if chain is None:
            self.generic_visit(node)
        else:
            self.loads.append((chain, node.lineno, self.here, self.roles.get(id(node), "")))

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.loads.append((node.id, node.lineno, self.here, self.roles.get(id(node), "")))

    # resolution, once every import is known

    def finish(self) -> PyFile:
        environ, getenv, import_module = self._special_names()
        env_reads, env_dynamic, imports_dynamic = self._calls(environ, getenv, import_module)
        uses = self._uses(environ, env_dynamic)
        defined = set(self.definitions)
        return PyFile(
            module=self.module, imports=tuple(self.imports), definitions=tuple(self.definitions),
            reexports=tuple(self.reexports), stars=tuple(self.stars),
            all_names=tuple(self.all_names) if self.all_names is not None else None,
            uses=tuple(sorted(uses)), env_reads=tuple(env_reads), env_dynamic=tuple(env_dynamic),
            imports_dynamic=tuple(imports_dynamic),
            classes=tuple((name, tuple(q for c in bases for q in self._qualify(c, defined))) for name, bases in self.classes),
            signatures=tuple(self.signatures), values=tuple(self.values),
        )

    def _special_names(self) -> tuple[set[str], set[str], set[str]]:
        """The names this file reaches os.environ, os.getenv and importlib.import_module by."""
        def bound_to(module: str) -> list[str]:
            return [n for n, targets in self.bindings.items() if module in targets]
        os_names = bound_to("os")
        environ = {f"{n}.environ" for n in os_names} | set(bound_to("os.environ"))
        getenv = {f"{n}.getenv" for n in os_names} | set(bound_to("os.getenv"))
        import_module = ({f"{n}.import_module" for n in bound_to("importlib")}
                         | set(bound_to("importlib.import_module")) | {"__import__"})
        return environ, getenv, import_module

    def _calls(self, environ: set[str], getenv: set[str], import_module: set[str]
               ) -> tuple[list[tuple[str, int, str, str]], list[tuple[int, str, str]], list[tuple[int, str]]]:
        """Environment reads (named, and computed) and dynamic imports; a named dynamic import is
        added to the file's imports."""
        env_methods = {f"{e}.{m}" for e in environ for m in _ENV_METHODS}
        env_reads: list[tuple[str, int, str, str]] = []
        env_dynamic: list[tuple[int, str, str]] = []
        imports_dynamic: list[tuple[int, str]] = []

        def env(key: Key, line: int, scope: str, how: str) -> None:
            _env_read(key, line, scope, how, env_reads, env_dynamic)

        for func, key, line, scope in self.calls:
            if func in getenv or func in env_methods:
                env(key, line, scope, f"{func}()")
            elif func in import_module:
                if key[0] is not None and not key[0].startswith("."):
                    self.imports.append(ImportStmt(module=key[0], names=(), line=line, scope=scope, call=func))
                else:
                    imports_dynamic.append((line, scope))
        for value, key, line, scope in self.subscripts:
            if value in environ:
                env(key, line, scope, "os.environ[...]")
        for chain, key, line, scope in self.contains:
            if chain in environ:
                env(key, line, scope, "... in os.environ")
        return env_reads, env_dynamic, imports_dynamic

    def _uses(self, environ: set[str], env_dynamic: list[tuple[int, str, str]]) -> set[tuple[str, str, int]]:
        """Every (module or attribute chain, scope, line) an imported name is used at; a use of
        os.environ as a whole is a computed environment read."""
        uses: set[tuple[str, str, int]] = set()
        for chain, line, scope, role in self.loads:
            root, _, rest = chain.partition(".")
            targets = self.bindings.get(root)
            if targets is None:
                continue
            if _whole_environ(chain, role, environ):
                env_dynamic.append((line, scope, "os.environ used as a whole"))
            for target in targets:
                parts = (target + ("." + rest if rest else "")).split(".")
                for end in range(1, len(parts) + 1):
                    uses.add((".".join(parts[:end]), scope, line))
        return uses

    def _qualify(self, chain: str, defined: set[str]) -> list[str]:
        root, _, rest = chain.partition(".")
        if root in self.bindings:  # every module an import may have bound the name to
            return [target + ("." + rest if rest else "") for target in self.bindings[root]]
        if f"{self.module}.{root}" in defined:
            return [f"{self.module}.{chain}"]
        return [chain]  # a builtin, or "?" for a base that is not a plain name


def read_python(path: str, module: str, is_package: bool, data: bytes) -> PyFile | Skipped:
    """Parse one Python blob. Bytes go to `ast.parse` as bytes, so a PEP 263 coding line is honoured."""
    if len(data) > MAX_BLOB_BYTES:
        return Skipped(path=path, reason=f"{len(data)} bytes, above the {MAX_BLOB_BYTES}-byte limit")
    try:
        tree = ast.parse(data, filename=path)
    except SyntaxError as exc:
        if isinstance(exc.__cause__ or exc.__context__, UnicodeDecodeError) or "decode" in str(exc.msg):
            return Skipped(path=path, reason=f"cannot decode: {exc.msg}")
        return Skipped(path=path, reason=f"syntax error at line {exc.lineno}: {exc.msg}")
    except (ValueError, UnicodeDecodeError) as exc:  # NUL bytes; an undecodable source
        return Skipped(path=path, reason=f"cannot decode: {exc}")
    except (RecursionError, MemoryError):
        return Skipped(path=path, reason="too deeply nested to parse")
    reader = _Reader(module, is_package, _constants(tree))
    try:
        reader.visit(tree)
    except RecursionError:
        return Skipped(path=path, reason="too deeply nested to read")
    return reader.finish()


# -- manifests ----------------------------------------------------------------------------------


def is_manifest(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    parent = path.rsplit("/", 2)[-2] if "/" in path else ""
    return (name in ("pyproject.toml", "setup.cfg", "package.json")
            or (name.endswith(".txt") and (name.startswith("requirements") or parent == "requirements")))


class _Declarations:
    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[Declaration] = []
        self.problems: list[str] = []

    def pep508(self, spec: object, group: str, scopes: tuple[str, ...] = ()) -> None:
        if not isinstance(spec, str):
            self.problems.append(f"{group}: {spec!r} is not a requirement string")
            return
        from packaging.requirements import InvalidRequirement, Requirement

        try:
            name = Requirement(spec).name
        except InvalidRequirement as exc:
            self.problems.append(f"{group}: {spec!r}: {exc}")
            return
        self.found.append(Declaration(ecosystem="python", name=name, path=self.path, group=group, spec=spec, scopes=scopes))

    def named(self, ecosystem: str, names: object, group: str, scopes: tuple[str, ...] = (),
              extras: Mapping[str, tuple[str, ...]] | None = None) -> None:
        """A table of name -> version (poetry, package.json). A poetry entry marked `optional = true`
        is an optional dependency, in the extras of `[tool.poetry.extras]` that list it."""
        if not isinstance(names, dict):
            if names is not None:
                self.problems.append(f"{group} is not a table of names")
            return
        for name, spec in names.items():
            if ecosystem == "python" and name.lower() == "python":
                continue
            here = scopes
            if extras is not None and isinstance(spec, dict) and spec.get("optional") is True:
                here = ("optional", *extras.get(canonicalize_name(name), ()))
            self.found.append(Declaration(ecosystem=ecosystem, name=name, path=self.path, group=group, spec=f"{name} {spec}",
                                          scopes=here))

    def pep508_list(self, specs: object, group: str, scopes: tuple[str, ...] = ()) -> None:
        if specs is None:
            return
        if not isinstance(specs, list):
            self.problems.append(f"{group} is not a list")
            return
        for spec in specs:
            if isinstance(spec, dict) and "include-group" in spec:
                continue  # PEP 735 includes another group, which is read on its own
            self.pep508(spec, group, scopes)


def _pyproject(d: _Declarations, doc: dict[str, Any]) -> None:
    project = doc.get("project", {})
    if isinstance(project, dict):
        d.pep508_list(project.get("dependencies"), "dependencies", ("required",))
        optional = project.get("optional-dependencies", {})
        if isinstance(optional, dict):
            for extra, specs in optional.items():
                d.pep508_list(specs, f"optional:{extra}", ("optional", extra_scope(extra)))
    groups = doc.get("dependency-groups", {})
    if isinstance(groups, dict):
        for group, specs in groups.items():
            d.pep508_list(specs, f"group:{group}", _named_scope(group))
    poetry = doc.get("tool", {}).get("poetry", {}) if isinstance(doc.get("tool"), dict) else {}
    if isinstance(poetry, dict):
        _poetry(d, poetry)


def _poetry(d: _Declarations, poetry: dict[str, Any]) -> None:
    """`[tool.poetry]`: its main table (required, or optional with `optional = true`, in the
    extras that list it), `dev-dependencies`, and groups (dev and test by name)."""
    extras: dict[str, tuple[str, ...]] = {}
    for extra, names in (poetry.get("extras") or {}).items():
        for name in names if isinstance(names, list) else ():
            if isinstance(name, str):
                extras[canonicalize_name(name)] = (*extras.get(canonicalize_name(name), ()), extra_scope(extra))
    d.named("python", poetry.get("dependencies"), "poetry", ("required",), extras=extras)
    d.named("python", poetry.get("dev-dependencies"), "poetry:dev", ("dev",))
    for group, table in (poetry.get("group") or {}).items():
        d.named("python", table.get("dependencies") if isinstance(table, dict) else None, f"poetry:{group}",
                _named_scope(group))


def _requirements(d: _Declarations, text: str) -> None:
    logical = text.replace("\\\n", " ")
    for raw in logical.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            option = line.split()[0]
            if option in ("-e", "--editable"):
                d.problems.append(f"{line!r}: an editable requirement names no distribution this can read")
            continue  # -r/-c name other files (read on their own when they match), -i/--hash are not names
        d.pep508(line, "requirements", requirements_scope(d.path))


def _setup_cfg(d: _Declarations, text: str) -> None:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    if parser.has_option("options", "install_requires"):
        for line in parser.get("options", "install_requires").splitlines():
            if line.strip():
                d.pep508(line.strip(), "install_requires", ("required",))
    if parser.has_section("options.extras_require"):
        for extra, value in parser.items("options.extras_require"):
            for line in value.splitlines():
                if line.strip():
                    d.pep508(line.strip(), f"optional:{extra}", ("optional", extra_scope(extra)))


def read_manifest(path: str, data: bytes) -> Manifest | Skipped:
    if len(data) > MAX_BLOB_BYTES:
        return Skipped(path=path, reason=f"{len(data)} bytes, above the {MAX_BLOB_BYTES}-byte limit")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return Skipped(path=path, reason=f"cannot decode as UTF-8: {exc.reason} at byte {exc.start}")
    d = _Declarations(path)
    name = path.rsplit("/", 1)[-1]
    try:
        if name == "pyproject.toml":
            _pyproject(d, tomllib.loads(text))
        elif name == "package.json":
            doc = json.loads(text)
            if not isinstance(doc, dict):
                return Skipped(path=path, reason="package.json is not a JSON object")
            for group, scopes in (("dependencies", ("required",)), ("devDependencies", ("dev",)),
                                  ("peerDependencies", ("required",)), ("optionalDependencies", ("optional",))):
                d.named("npm", doc.get(group), group, scopes)
        elif name == "setup.cfg":
            _setup_cfg(d, text)
        else:
            _requirements(d, text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, configparser.Error) as exc:
        return Skipped(path=path, reason=f"cannot parse: {exc}")
    return Manifest(declarations=tuple(d.found), problems=tuple(d.problems))


# -- assembling a fingerprint -------------------------------------------------------------------


Entry = tuple[str, str, int]  # (path, blob oid, git file mode)
LINK_MODE = 0o120000
GITLINK_MODE = 0o160000  # a submodule: a commit of another repository, whose tree is not here
_MAX_LINK_HOPS = 8


def _link_target(path: str, symlinks: Mapping[str, str]) -> str | None:
    """Where a symlink leads inside the tree, following links up to `_MAX_LINK_HOPS`; None when it
    leaves the workspace (an absolute target, or a `..` past the root) or loops."""
    for _ in range(_MAX_LINK_HOPS):
        target = symlinks[path]
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if target.startswith("/") or joined == ".." or joined.startswith("../") or joined == ".":
            return None
        if joined not in symlinks:
            return joined
        path = joined
    return None


def resolve_links(entries: list[Entry], symlinks: Mapping[str, str]) -> tuple[list[Entry], list[Skipped]]:
    """The tree as a checkout would read it: a symlink to a blob inside the tree is that blob under
    the link's path; a symlink to a directory inside, every blob under it under the link's path (one
    level: links met there are not expanded again); a symlink out of the workspace, and a submodule
    (gitlink), are unread subtrees (`Skipped(tree=True)`): what they could hold is undecidable."""
    blobs = {path: (oid, mode) for path, oid, mode in entries if mode not in (LINK_MODE, GITLINK_MODE)}
    by_dir: dict[str, list[str]] = {}
    for path in blobs:
        for i in range(1, path.count("/") + 1):
            by_dir.setdefault("/".join(path.split("/")[:i]), []).append(path)
    added: list[Entry] = []
    unread: list[Skipped] = []
    for path, oid, mode in entries:
        if mode == GITLINK_MODE:
            unread.append(Skipped(path=path, reason=f"a submodule (gitlink to {oid[:12]}) whose content is not read", tree=True))
        elif mode == LINK_MODE and path in symlinks:
            target = _link_target(path, symlinks)
            if target is None:  # a module or manifest by its name is that file; any other name could be a directory
                one_file = path.endswith(".py") or is_manifest(path)
                unread.append(Skipped(path=path, reason=f"a symlink out of the workspace ({symlinks[path]})", tree=not one_file))
            elif target in blobs:
                added.append((path, *blobs[target]))
            else:
                added += [(path + inner[len(target):], *blobs[inner]) for inner in by_dir.get(target, ())]
    return entries + added, unread


def _summarize(entries: Iterable[Entry], load: Callable[[str], bytes], previous: BlobCache
               ) -> tuple[BlobCache, dict[str, tuple[str, bool]], int, int]:
    paths = {path for path, _, _ in entries}
    package_dirs = frozenset(p[: -len("/__init__.py")] for p in paths if p.endswith("/__init__.py"))
    cache: BlobCache = {}
    names: dict[str, tuple[str, bool]] = {}
    parsed = reused = 0
    for path, oid, mode in entries:
        if mode == LINK_MODE or not (path.endswith(".py") or is_manifest(path)):
            continue
        module, is_package = module_name(path, package_dirs) if path.endswith(".py") else ("", False)
        names[path] = (module, is_package)
        key = (path, oid, module)
        summary = previous.get(key)
        if summary is None:
            parsed += 1
            try:
                data = load(oid)
            except Exception as exc:  # noqa: BLE001 (a missing or corrupt object: that file is skipped, the build goes on)
                summary = Skipped(path=path, reason=f"cannot read the blob {oid[:12]}: {exc}")
            else:
                summary = read_python(path, module, is_package, data) if path.endswith(".py") else read_manifest(path, data)
        else:
            reused += 1
        cache[key] = summary
    return cache, names, parsed, reused


@dataclass
class _Index:
    """What `assemble` gathers from the summaries of a tree's blobs."""

    modules: dict[str, str]
    tops: set[str]
    imported: dict[str, list[Site]] = field(default_factory=dict)
    maybe: dict[str, list[Site]] = field(default_factory=dict)
    uses: dict[str, list[Site]] = field(default_factory=dict)
    env_reads: dict[str, list[Site]] = field(default_factory=dict)
    env_dynamic: list[Site] = field(default_factory=list)
    imports_dynamic: list[Site] = field(default_factory=list)
    definitions: set[str] = field(default_factory=set)
    bases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    reexports: dict[str, str] = field(default_factory=dict)
    stars: dict[str, tuple[str, ...]] = field(default_factory=dict)
    all_names: dict[str, tuple[str, ...]] = field(default_factory=dict)
    dependencies: dict[str, list[Declaration]] = field(default_factory=dict)
    manifests: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    signatures: dict[str, list[Assigned]] = field(default_factory=dict)
    values: dict[str, list[Assigned]] = field(default_factory=dict)

    def add_manifest(self, path: str, summary: Manifest) -> None:
        self.manifests.append(path)
        self.skipped.extend(Skipped(path=path, reason=p) for p in summary.problems)
        for dec in summary.declarations:
            key = f"{dec.ecosystem}:{canonicalize_name(dec.name) if dec.ecosystem == 'python' else dec.name}"
            self.dependencies.setdefault(key, []).append(dec)

    def add_python(self, path: str, module: str, summary: PyFile) -> None:
        _index_python(path, summary, self.imported, self.maybe, self.modules, self.tops)
        self.definitions.update(summary.definitions)
        self.bases.update(summary.classes)
        for name, params, line in summary.signatures:
            self.signatures.setdefault(name, []).append(Assigned(text=params, path=path, line=line))
        for name, literal, line, source in summary.values:
            self.values.setdefault(name, []).append(Assigned(text=literal, path=path, line=line, source=source))
        self.reexports.update(summary.reexports)
        if summary.stars:
            self.stars[module] = summary.stars
        if summary.all_names is not None:
            self.all_names[module] = summary.all_names
        for used, scope, line in summary.uses:
            self.uses.setdefault(used, []).append(Site(path=path, line=line, scope=scope))
        for name, line, scope, note in summary.env_reads:
            self.env_reads.setdefault(name, []).append(Site(path=path, line=line, scope=scope, note=note))
        self.env_dynamic += [Site(path=path, line=line, scope=scope, note=why) for line, scope, why in summary.env_dynamic]
        self.imports_dynamic += [Site(path=path, line=line, scope=scope, note="import of a computed name")
                                 for line, scope in summary.imports_dynamic]


def _module_paths(names: Mapping[str, tuple[str, bool]]) -> tuple[dict[str, str], set[str]]:
    """Each module's file (the first path, in order, that claims it), and which modules are packages."""
    modules: dict[str, str] = {}
    packages = set()
    for path, (module, is_package) in sorted(names.items()):
        if path.endswith(".py") and module:
            modules.setdefault(module, path)
            if is_package:
                packages.add(module)
    return modules, packages


def assemble(head: str, entries: list[Entry], load: Callable[[str], bytes], previous: BlobCache | None = None,
             *, symlinks: Mapping[str, str] | None = None, walk_cache: dict[object, object] | None = None,
             previous_skeletons: Mapping[str, str] | None = None) -> Fingerprint:
    """The fingerprint of one tree: `entries` are its blobs, `load` reads a blob by oid. Summaries
    in `previous` (the last build's cache) are reused for every blob whose oid is unchanged."""
    entries, unread = resolve_links(entries, symlinks or {})
    cache, names, parsed, reused = _summarize(entries, load, previous or {})
    files = frozenset(path for path, _, _ in entries)
    dirs = frozenset("/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1))
    modules, packages = _module_paths(names)
    idx = _Index(modules=modules, tops={m.split(".")[0] for m in modules}, definitions=set(modules), skipped=unread)
    for (path, _, module), summary in sorted(cache.items()):
        if isinstance(summary, Skipped):
            idx.skipped.append(summary)
        elif isinstance(summary, Manifest):
            idx.add_manifest(path, summary)
        elif modules.get(module) == path:  # else a second file claiming a module another file already defines
            idx.add_python(path, module, summary)
    frozen = {k: tuple(v) for k, v in idx.imported.items()}
    dependencies = {k: tuple(v) for k, v in idx.dependencies.items()}
    named = workspace_names(modules, idx.definitions, [*frozen, *idx.maybe], idx.reexports, files, idx.env_reads, dependencies)
    return Fingerprint(
        head=head, files=files, dirs=dirs, symlinks=dict(symlinks or {}), modules=modules, packages=frozenset(packages),
        imported=frozen, maybe_imported={k: tuple(v) for k, v in idx.maybe.items() if k not in frozen},
        uses={k: tuple(v) for k, v in idx.uses.items()}, definitions=frozenset(idx.definitions), bases=idx.bases,
        reexports=idx.reexports, stars=idx.stars, all_names=idx.all_names,
        env_reads={k: tuple(v) for k, v in idx.env_reads.items()},
        env_dynamic=tuple(idx.env_dynamic), imports_dynamic=tuple(idx.imports_dynamic),
        dependencies=dependencies, manifests=tuple(idx.manifests), names=named,
        skeletons=skeletons(named, previous_skeletons),
        dynamic_manifests=tuple(sorted(p for p in files if p == "setup.py" or p.endswith("/setup.py"))),
        skipped=tuple(idx.skipped), signatures={k: tuple(v) for k, v in idx.signatures.items()},
        values={k: tuple(v) for k, v in idx.values.items()}, parsed=parsed, reused=reused, cache=cache, walk_cache=walk_cache or {},
    )


def workspace_names(modules: Iterable[str], definitions: Iterable[str], imported: Iterable[str], reexports: Iterable[str],
                    paths: Iterable[str], env_reads: Iterable[str], dependencies: Mapping[str, tuple[Declaration, ...]]) -> frozenset[str]:
    """Every name an anchor could name: the parts of modules, definitions, imported modules and
    re-exports, path parts, environment variables read, declared dependencies (as written and PEP 503)."""
    names: set[str] = set()
    for dotted in (modules, definitions, imported, reexports):
        for name in dotted:
            names.update(p for p in name.split(".") if p)
    for path in paths:
        names.update(p for p in path.split("/") if p)
    names.update(env_reads)
    for key, decls in dependencies.items():
        names.add(key.split(":", 1)[1])
        names.update(d.name for d in decls)
    return frozenset(names)


def skeletons(names: Iterable[str], previous: Mapping[str, str] | None = None) -> dict[str, str]:
    """skeleton -> the first name (sorted) with it; a name the previous build had keeps its skeleton
    without asking ICU again (a HEAD move adds few names)."""
    known = {name: sk for sk, name in (previous or {}).items()}
    out: dict[str, str] = {}
    for name in sorted(names):
        sk = known.get(name)
        out.setdefault(sk if sk is not None else folding.skeleton(name), name)
    return out


def _index_python(path: str, summary: PyFile, imported: dict[str, list[Site]], maybe: dict[str, list[Site]],
                  modules: Mapping[str, str], tops: set[str]) -> None:
    for stmt in summary.imports:
        if stmt.call:
            statement = f"{stmt.call}({stmt.module!r})"
        elif stmt.names:
            statement = f"from {stmt.module} import {', '.join(stmt.names)}"
        else:
            statement = f"import {stmt.module}"
        targets = [stmt.module]
        for name in stmt.names:
            sub = f"{stmt.module}.{name}"
            if sub in modules:
                targets.append(sub)
            elif name != "*" and stmt.module.split(".")[0] not in tops:
                maybe.setdefault(sub, []).append(Site(path=path, line=stmt.line, scope=stmt.scope, typing_only=stmt.typing_only,
                                                      note=f"{statement}: {name} may be a submodule"))
        for target in targets:
            parts = target.split(".")
            for end in range(1, len(parts) + 1):
                prefix = ".".join(parts[:end])
                how = statement if prefix == target else f"{statement}, which imports its parent {prefix}"
                note = "; ".join(n for n in (how, stmt.note) if n)
                imported.setdefault(prefix, []).append(Site(path=path, line=stmt.line, scope=stmt.scope, note=note,
                                                            typing_only=stmt.typing_only))


def with_timing(fp: Fingerprint, *, build_ms: float, built_at: float) -> Fingerprint:
    return dataclasses.replace(fp, build_ms=build_ms, built_at=built_at)
