"""Verify-on-read: a fact's typed anchors checked against the workspace fingerprint at HEAD.

`verify(anchors, fingerprint, budget_ms)` gives one `Verdict`:

- `verified`: every code anchor holds, matched with its type and place;
- `refuted`: an anchor the fact needs is absent at HEAD, or an `absent` anchor is present;
- `inconclusive`: no code anchors, the budget ran out, or an anchor could not be decided (a file
  that could hold it was skipped, `from a import b` with `a` outside the workspace, a computed
  environment name, an inherited attribute of a class from outside, ...). An inferred anchor (read
  from prose) never decides: what it found is reported and the verdict stays inconclusive.

Every verdict names the HEAD it was made at and says what was found, in words. `check` is the
per-retrieval entry point: one fingerprint (waited for within the budget) for many facts, one
deadline for all of them; whatever is not decided by the deadline is inconclusive, never late.
"""

from __future__ import annotations

import json
import posixpath
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from codecheck import coverage, names, typed_anchors
from codecheck.fingerprint import Declaration, Fingerprint, Site, canonicalize_name
from codecheck.typed_anchors import Anchor
from codecheck.workspace import Workspace, WorkspaceError
from untrusted import folding

VERIFIED, PARTLY, REFUTED, INCONCLUSIVE = "verified", "partly", "refuted", "inconclusive"
STATUSES: tuple[str, ...] = (VERIFIED, PARTLY, REFUTED, INCONCLUSIVE)
SETTLED: tuple[str, ...] = (VERIFIED,)  # the only status an arrival shows as settled
DEFAULT_BUDGET_MS = 50.0
HOLDS, FAILS, UNKNOWN = "holds", "fails", "unknown"
_MAX_HOPS = 8       # re-exports, star imports and base classes followed for one symbol
_SHOWN_SITES = 3    # sites quoted in evidence
# bases that add no attributes anyone anchors: their absence from the fingerprint is not a doubt
_INERT_BASES = frozenset({"object", "typing.Generic", "typing.Protocol"})

Clock = Callable[[], float]


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    anchor: Anchor
    outcome: str   # holds | fails | unknown, from the fact's side (an `absent` anchor holds when the thing is missing)
    evidence: str

    def as_dict(self) -> dict[str, object]:
        return {"anchor": self.anchor.to_json(), "outcome": self.outcome, "evidence": self.evidence}


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    status: str
    evidence: str
    head: str | None
    findings: tuple[Finding, ...] = ()
    elapsed_ms: float = 0.0
    uncovered: tuple[str, ...] = ()  # partly: what the value claims that no anchor covers (codecheck.coverage)

    def label(self) -> str:
        """The short form an arrival line carries: `verified @1a2b3c4d`, `REFUTED @1a2b3c4d: why`,
        `partly anchored @1a2b3c4d (total, sequence not checked)`."""
        at = f" @{self.head[:8]}" if self.head else ""
        if self.status == VERIFIED:
            return f"verified{at}"
        if self.status == PARTLY:
            return f"partly anchored{at} ({coverage.describe(self.uncovered)})"
        if self.evidence == NO_CODE_ANCHOR:
            return "inconclusive (no code anchor)"
        return f"{'REFUTED' if self.status == REFUTED else 'inconclusive'}{at}: {self.evidence}"

    def as_dict(self) -> dict[str, object]:
        return {"status": self.status, "evidence": self.evidence, "head": self.head,
                "findings": [f.as_dict() for f in self.findings], "elapsed_ms": round(self.elapsed_ms, 3),
                **({"uncovered": list(self.uncovered)} if self.uncovered else {})}


def unavailable(reason: str, head: str | None = None) -> Verdict:
    return Verdict(status=INCONCLUSIVE, evidence=reason, head=head)


# -- places -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Place:
    kind: str        # file | dir | definition
    path: str        # the file, the directory, or the definition's file
    scope: str = ""  # the definition

    def holds(self, site: Site) -> bool:
        if self.kind == "file":
            return site.path == self.path
        if self.kind == "dir":
            return site.path.startswith(self.path + "/")
        return site.path == self.path and (site.scope == self.scope or site.scope.startswith(self.scope + "."))

    def skip_scope(self) -> str:
        return self.path


def module_of(name: str, fp: Fingerprint) -> str | None:
    """The longest prefix of a dotted name that is a module of the workspace. Only the first
    `fp.module_depth` parts can be one, so this is linear in the name however long it is."""
    parts = name.split(".", fp.module_depth)[: fp.module_depth]
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in fp.modules:
            return candidate
    return None


_module_of = module_of


def _unread(path: str, fp: Fingerprint) -> str | None:
    """Why `path` cannot be decided: it is in a submodule or behind a symlink out of the workspace."""
    unread = fp.unread(path)
    return f"{unread.path} is {unread.reason}: {path} could be there" if unread is not None else None


Undecided = tuple[None, str]


def _place(where: str, fp: Fingerprint) -> _Place | str | Undecided:
    """Where an anchor must be, why that place does not exist at HEAD (a string), or why nobody
    here can tell (`(None, why)`: it is in an unread subtree)."""
    if typed_anchors.is_dotted(where):
        if where in fp.modules:
            path = fp.modules[where]
            return _Place("dir", posixpath.dirname(path)) if where in fp.packages else _Place("file", path)
        if where in fp.definitions:
            module = module_of(where, fp)
            assert module is not None  # a definition is always inside a module of the workspace
            return _Place("definition", fp.modules[module], where)
        if "." not in where and where in fp.dirs:  # `scripts`: a directory that is not a package
            return _Place("dir", where)
        unread = _unread(where.replace(".", "/"), fp)
        if unread is not None:
            return None, unread
        return f"{where} is neither a module nor a definition of the workspace"
    path = where.rstrip("/")
    if path in fp.files and fp.unread(path) is None:
        return _Place("file", path)
    if path in fp.dirs or fp.unread(path) is not None:
        return _Place("dir", path)
    return f"{where} is not in the tree"


def _sites(sites: Sequence[Site]) -> str:
    shown = ", ".join(s.describe() for s in sites[:_SHOWN_SITES])
    return shown + (f" and {len(sites) - _SHOWN_SITES} more" if len(sites) > _SHOWN_SITES else "")


def _skipped(fp: Fingerprint, scope: str | None) -> str | None:
    skipped = fp.skipped_under(scope)
    if not skipped:
        return None
    first = skipped[0]
    more = f" and {len(skipped) - 1} more" if len(skipped) > 1 else ""
    return f"{first.path} was skipped ({first.reason}){more} and could hold it"


# -- one anchor ---------------------------------------------------------------------------------

Match = tuple[bool | None, str]  # (present, or None when undecidable; what was seen)


def _path_kind(ref: str, fp: Fingerprint) -> tuple[str | None, str]:
    """What `ref` is at HEAD, symlinks followed inside the tree: `file`, `dir`, `missing`, or None
    when nobody here can tell (a link out of the workspace, an unread subtree), with what was seen."""
    path = ref
    via = ""
    for _ in range(_MAX_HOPS):
        if path in fp.symlinks:
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), fp.symlinks[path]))
            if fp.symlinks[path].startswith("/") or target == ".." or target.startswith("../"):
                return None, f"{path} is a symlink that escapes the workspace ({fp.symlinks[path]})"
            via, path = f" (a symlink to {target})", target
            continue
        if path in fp.dirs:
            return "dir", f"{ref} is a directory at HEAD{via}"
        if path in fp.files:
            return "file", f"{ref} is a file at HEAD{via}"
        parts = path.split("/")
        link = next(("/".join(parts[:i]) for i in range(1, len(parts)) if "/".join(parts[:i]) in fp.symlinks), None)
        if link is None:
            unread = _unread(path, fp)
            return (None, unread) if unread is not None else ("missing", f"{ref} is not in the tree")
        target = fp.symlinks[link]
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(link), target, path[len(link) + 1:]))
        if target.startswith("/") or joined == ".." or joined.startswith("../"):
            return None, f"{link} is a symlink that escapes the workspace ({target})"
        via, path = f" (through the symlink {link})", joined
    return None, f"{ref}: too many symlinks"


def _file(a: Anchor, fp: Fingerprint) -> Match:
    """A file (or a symlink to one); a directory of that path is not one (anchor it with `dir`)."""
    kind, seen = _path_kind(a.ref, fp)
    if kind is None:
        return None, seen
    if kind == "dir":
        return False, f"{seen}, not a file"
    return kind == "file", seen


def _dir(a: Anchor, fp: Fingerprint) -> Match:
    kind, seen = _path_kind(a.ref, fp)
    if kind is None:
        return None, seen
    if kind == "file":
        return False, f"{seen}, not a directory"
    return kind == "dir", seen


def _import(a: Anchor, fp: Fingerprint) -> Match:
    module = a.ref
    sites = fp.imported.get(module, ())
    place: _Place | None = None
    if a.where is not None:
        found = _place(a.where, fp)
        if isinstance(found, str):
            return False, found
        if isinstance(found, tuple):
            return found
        place = found
    if place is not None and place.kind == "definition":
        return _import_in_definition(module, place, sites, fp)
    placed = [s for s in sites if place is None or place.holds(s)]
    running = [s for s in placed if not s.typing_only]
    if running:
        return True, f"import {module} at {_sites(running)}"
    if placed:
        return None, f"{module} is imported only under TYPE_CHECKING at {_sites(placed)}, which never runs"
    elsewhere = f"; imported elsewhere: {_sites(sites)}" if sites else ""
    scope = place.skip_scope() if place is not None else None
    maybe = [s for s in fp.maybe_imported.get(module, ()) if place is None or place.holds(s)]
    if maybe:
        return None, f"{_sites(maybe)}: cannot tell without that package's source{elsewhere}"
    dynamic = [s for s in fp.imports_dynamic if place is None or place.holds(s)]
    if dynamic:
        return None, f"a computed import at {_sites(dynamic)} could import it{elsewhere}"
    skipped = _skipped(fp, scope)
    if skipped:
        return None, skipped + elsewhere
    where = f" in {a.where}" if a.where else " anywhere at HEAD"
    return False, f"no import of {module}{where}{elsewhere}"


def _import_in_definition(module: str, place: _Place, sites: Sequence[Site], fp: Fingerprint) -> Match:
    typed = [s for s in sites if s.path == place.path]
    in_file = [s for s in typed if not s.typing_only]
    inside = [s for s in in_file if place.holds(s)]
    if inside:
        return True, f"import {module} inside {place.scope} at {_sites(inside)}"
    if typed and not in_file:
        return None, f"{module} is imported only under TYPE_CHECKING at {_sites(typed)}, which never runs"
    if not in_file:
        skipped = _skipped(fp, place.path)
        if skipped:
            return None, skipped
        elsewhere = f"; imported elsewhere: {_sites(sites)}" if sites else ""
        return False, f"{place.path} does not import {module}{elsewhere}"
    used = [s for s in fp.uses.get(module, ()) if place.holds(s)]
    if used:
        return True, f"import {module} at {_sites(in_file)}, used in {place.scope} at lines {', '.join(str(s.line) for s in used[:5])}"
    users = sorted({s.scope for s in fp.uses.get(module, ()) if s.path == place.path})
    used_by = f", used by {', '.join(users[:4])}" if users else ", used nowhere in it"
    return False, f"{module} is imported at {_sites(in_file)}{used_by}; not used in {place.scope}"


def _symbol(a: Anchor, fp: Fingerprint) -> Match:
    return _resolve_symbol(a.ref, fp, 0, a.ref)


def _resolve_symbol(name: str, fp: Fingerprint, hops: int, asked: str) -> Match:
    if name in fp.definitions:
        module = module_of(name, fp)
        via = "" if name == asked else f" (as {name})"
        return True, f"{asked} is defined in {fp.modules[module] if module else '?'}{via}"
    if hops >= _MAX_HOPS:
        return None, f"{asked}: too many re-exports to follow"
    module = module_of(name, fp)
    if module is None:
        unread = _unread_module(name.split("."), "", fp)
        return (None, unread) if unread else (False, f"no module of the workspace defines {name}")
    path = fp.modules[module]
    if any(s.path == path for s in fp.skipped):
        return None, _skipped(fp, path) or ""
    rest = name[len(module) + 1:].split(".")
    head = f"{module}.{rest[0]}"
    tail = "".join("." + r for r in rest[1:])
    if head in fp.reexports:
        return _resolve_symbol(fp.reexports[head] + tail, fp, hops + 1, asked)
    if head in fp.definitions:
        return _inherited(head, rest[1:], fp, hops, asked)
    starred = _from_stars(module, rest, fp, hops, asked)
    if starred is not None:
        return starred
    if f"{module}.__getattr__" in fp.definitions:
        return None, f"{module} defines __getattr__: {rest[0]} may be made on access"
    unread = _unread_module(rest[:1], posixpath.dirname(path) if module in fp.packages else "", fp)
    if unread is not None:
        return None, unread
    return False, f"{module} ({path}) defines no {rest[0]}"


def _unread_module(parts: list[str], base: str, fp: Fingerprint) -> str | None:
    """Why a module named by `parts` under the directory `base` cannot be decided: its file (or
    package) is unread, a submodule or a symlink out of the workspace. None when it was read or is not there."""
    stem = posixpath.join(base, *parts) if base else "/".join(parts)
    for candidate in (stem, stem + ".py", stem + "/__init__.py"):
        unread = _unread(candidate, fp)
        if unread is not None:
            return unread
        skipped = next((s for s in fp.skipped if s.path == candidate), None)
        if skipped is not None:
            return f"{skipped.path} was skipped ({skipped.reason}) and could define it"
    return None


def _from_stars(module: str, rest: list[str], fp: Fingerprint, hops: int, asked: str) -> Match | None:
    """`module.rest` through the modules `module` star-imports; None when no star import bears on it."""
    for star in fp.stars.get(module, ()):
        if star in fp.modules:
            exported = fp.all_names.get(star)
            if exported is not None and rest[0] not in exported:
                continue
            if _resolve_symbol(f"{star}.{rest[0]}", fp, hops + 1, asked)[0] is not False:  # the name comes from here
                return _resolve_symbol(f"{star}.{'.'.join(rest)}", fp, hops + 1, asked)
        elif _module_of(star, fp) is None:
            return None, f"{module} star-imports {star}, outside the workspace: {rest[0]} may come from there"
    return None


def _inherited(cls: str, rest: list[str], fp: Fingerprint, hops: int, asked: str) -> Match:
    """`cls` is defined but `cls.rest` is not: look in its bases, as attribute lookup would."""
    unknown = []
    for base in fp.bases.get(cls, ()):
        if base in _INERT_BASES:
            continue
        if _module_of(base, fp) is None or base == "?":
            unknown.append(base)
            continue
        found = _resolve_symbol(f"{base}.{'.'.join(rest)}", fp, hops + 1, asked)
        if found[0] is True:
            return found
        if found[0] is None:
            unknown.append(base)
    if unknown:
        return None, f"{cls} has no {rest[0]} of its own; it may inherit one from {', '.join(unknown)}"
    return False, f"{cls} defines no {'.'.join(rest)}"


def _env(a: Anchor, fp: Fingerprint) -> Match:
    place: _Place | None = None
    if a.where is not None:
        found = _place(a.where, fp)
        if isinstance(found, str):
            return False, found
        if isinstance(found, tuple):
            return found
        place = found
    sites = fp.env_reads.get(a.ref, ())
    placed = [s for s in sites if place is None or place.holds(s)]
    if placed:
        return True, f"{a.ref} is read at {_sites(placed)}"
    elsewhere = f"; read elsewhere: {_sites(sites)}" if sites else ""
    dynamic = [s for s in fp.env_dynamic if place is None or place.holds(s)]
    if dynamic:
        return None, f"{a.ref} could be read at {_sites(dynamic)}{elsewhere}"
    skipped = _skipped(fp, place.skip_scope() if place is not None else None)
    if skipped:
        return None, skipped + elsewhere
    where = f" in {a.where}" if a.where else " anywhere at HEAD"
    return False, f"no read of the environment variable {a.ref}{where}{elsewhere}"


def _package(a: Anchor, fp: Fingerprint) -> Match:
    keys = []
    if a.ecosystem in (None, "python"):
        keys.append(f"python:{canonicalize_name(a.ref)}")
    if a.ecosystem in (None, "npm"):
        keys.append(f"npm:{a.ref}")
    found = [d for key in keys for d in fp.dependencies.get(key, ())]
    if found and a.scope is not None:
        return _scoped(a, found)
    if found:
        return True, "declared in " + ", ".join(d.describe() for d in found[:_SHOWN_SITES])
    bad = fp.skipped_under(None, python=False)
    if bad:
        return None, f"{bad[0].path}: {bad[0].reason}; {a.ref} may be declared there"
    if fp.dynamic_manifests:
        return None, f"{fp.dynamic_manifests[0]} may declare {a.ref} in code this does not run"
    if not fp.manifests:
        return None, "no dependency manifest at HEAD (pyproject.toml, requirements*.txt, setup.cfg, package.json)"
    return False, f"{a.ref} is not declared in {', '.join(fp.manifests)}"


def _scoped(a: Anchor, found: Sequence[Declaration]) -> Match:
    """A declared package against the scope the anchor names: in it; only in groups whose scope the
    manifest does not say (undecidable); or only in others (it is not depended on that way)."""
    assert a.scope is not None
    inside = [d for d in found if a.scope in d.scopes]
    if inside:
        return True, f"declared as {a.scope} in " + ", ".join(d.describe() for d in inside[:_SHOWN_SITES])
    unknown = [d for d in found if not d.scopes]
    if unknown:
        return None, (f"declared in {', '.join(d.describe() for d in unknown[:_SHOWN_SITES])}, "
                      f"a group the manifest does not say is {a.scope}")
    return False, f"{a.ref} is declared only as " + ", ".join(
        f"{'/'.join(d.scopes)} ({d.path} {d.group})" for d in found[:_SHOWN_SITES]) + f", not {a.scope}"


def _defined_as(name: str, fp: Fingerprint, table: Mapping[str, object]) -> str:
    """`name` with its re-exports followed (`rich.Console` -> `rich.console.Console`) until a
    name `table` knows, or as far as they lead."""
    for _ in range(_MAX_HOPS):
        if name in table or name in fp.definitions and name not in fp.reexports:
            return name
        module = module_of(name, fp)
        if module is None or module == name:
            return name
        rest = name[len(module) + 1:].split(".")
        head = f"{module}.{rest[0]}"
        if head not in fp.reexports:
            return name
        name = fp.reexports[head] + "".join("." + r for r in rest[1:])
    return name


def _not_there(a: Anchor, fp: Fingerprint, what: str) -> Match:
    """A signature or value anchor on a name with no def or assignment of it: absent (refuted)
    when the name is not defined at all, else undecidable, saying what the name is."""
    present, seen = _resolve_symbol(a.ref, fp, 0, a.ref)
    if present is False:
        return False, seen
    if present is None:
        return None, seen
    return None, f"{seen}, but not by {what} this can read ({what} made at run time, inherited or generated is not seen)"


def _signature(a: Anchor, fp: Fingerprint) -> Match:
    assert a.expected is not None
    name = _defined_as(a.ref, fp, fp.signatures)
    defs = fp.signatures.get(name)
    if defs is None and name in fp.bases:  # a class: its own __init__
        defs = fp.signatures.get(f"{name}.__init__")
        if defs is None:
            return None, (f"{a.ref} is a class with no __init__ of its own: its parameters come from a base or are "
                          "generated (dataclass, attrs, NamedTuple)")
    if defs is None:
        return _not_there(a, fp, "a def")
    texts = sorted({d.text or "" for d in defs})
    at = ", ".join(d.describe() for d in defs[:_SHOWN_SITES])
    if len(texts) > 1:
        return None, f"{a.ref} is defined {len(defs)} times with different parameters ({at}): which one runs is decided at run time"
    if texts[0] == a.expected:
        return True, f"{a.ref}({texts[0]}) at {at}"
    return False, f"{a.ref} takes ({texts[0]}) at {at}, not ({a.expected})"


def _value(a: Anchor, fp: Fingerprint) -> Match:
    assert a.expected is not None
    name = _defined_as(a.ref, fp, fp.values)
    assigned = fp.values.get(name)
    if assigned is None:
        return _not_there(a, fp, "an assignment")
    at = ", ".join(d.describe() for d in assigned[:_SHOWN_SITES])
    computed = [d for d in assigned if d.text is None]
    if computed:
        return None, (f"{a.ref} is computed at {computed[0].describe()} ({computed[0].source}): only a literal value can be "
                      "checked, so this cannot say whether it is " + a.expected)
    texts = sorted({d.text or "" for d in assigned})
    if len(texts) > 1:
        if a.expected not in texts:
            return False, f"{a.ref} is assigned {', '.join(texts)} ({at}), never {a.expected}"
        return None, f"{a.ref} is assigned {len(texts)} different values ({', '.join(texts)} at {at}): which one holds is decided at run time"
    if texts[0] == a.expected:
        return True, f"{a.ref} = {texts[0]} at {at}"
    return False, f"{a.ref} = {texts[0]} at {at}, not {a.expected}"


_MATCHERS: dict[str, Callable[[Anchor, Fingerprint], Match]] = {
    "file": _file, "dir": _dir, "import": _import, "symbol": _symbol, "env": _env, "package": _package,
    "signature": _signature, "value": _value,
}


def finding(anchor: Anchor, fp: Fingerprint) -> Finding:
    """What one code anchor shows at HEAD, from the fact's side. A non-ASCII identifier that looks
    like a name of the workspace without being it (a row written before the tool refused them)
    decides nothing: `codecheck.names`."""
    if not all(name.isascii() for name in names.identifiers(anchor)):
        fake = next((why for name in names.identifiers(anchor) if (why := names.lookalike(name, fp)) is not None), None)
        if fake is not None:
            return Finding(anchor=anchor, outcome=UNKNOWN, evidence=f"a look-alike: {fake}")
    present, seen = _MATCHERS[anchor.type](anchor, fp)
    if present is None:
        outcome = UNKNOWN
    else:
        outcome = HOLDS if present != anchor.negated else FAILS
    if anchor.inferred and outcome != UNKNOWN:
        return Finding(anchor=anchor, outcome=UNKNOWN,
                       evidence=f"inferred from prose, so not decisive: {'found' if present else 'not found'}: {seen}")
    return Finding(anchor=anchor, outcome=outcome, evidence=seen)


# -- a fact, and a retrieval --------------------------------------------------------------------


class Read(list[Anchor]):
    """A stored fact's anchors as read: at most `typed_anchors.MAX_ANCHORS` of them, and how many were
    stored (a row written before the cap, or around it, can hold more)."""

    def __init__(self, items: Sequence[Anchor], stored: int) -> None:
        super().__init__(items)
        self.stored = stored


def stored_anchors(stored: object) -> Read | str:
    """The anchors of a stored fact, the first `typed_anchors.MAX_ANCHORS` of them parsed (the rest are
    never read), or a string saying why they do not parse. The `check` key the arrival query adds
    to each anchor (its ledger lookup) is not part of it."""
    if isinstance(stored, str):
        stored = json.loads(stored)
    count = len(stored) if isinstance(stored, list) else 0
    if isinstance(stored, list):
        stored = [{k: v for k, v in a.items() if k != "check"} if isinstance(a, dict) else a
                  for a in stored[: typed_anchors.MAX_ANCHORS]]
    try:
        return Read(typed_anchors.parse(stored if stored is not None else []), count)
    except typed_anchors.AnchorError as exc:
        return f"the stored anchors do not parse: {exc}"


NO_CODE_ANCHOR = "no code anchor"


def verify(anchors: Sequence[Anchor], fp: Fingerprint, budget_ms: float = DEFAULT_BUDGET_MS, *,
           deadline: float | None = None, clock: Clock = time.perf_counter, share: bool = False, text: str | None = None,
           retrieval_end: float | None = None) -> Verdict:
    """The verdict of one fact's anchors at the fingerprint's HEAD. Past the budget (or the
    `deadline`, a `clock` time: the fact's share of a retrieval when `share`) what is left
    undecided makes it inconclusive, and so does a last anchor that ends past it: a late verdict
    is never returned. A fact stored with more than `typed_anchors.MAX_ANCHORS` anchors has the first
    of them checked: refuted if one fails, else inconclusive (the rest were never read). With the
    fact's `text`, anchors that all hold make it `partly` when the text claims names or numbers
    they do not cover (`codecheck.coverage`): verified is for what was checked, not more.

    With `share`, `retrieval_end` is the retrieval's own deadline: the share decides whether the
    next anchor is read, and a verdict decided past the share but before the retrieval's deadline
    still counts (a single check that a preemption or a collection made late has taken nothing
    the retrieval did not have; the next facts' shares are cut from what is left)."""
    started = clock()
    end = deadline if deadline is not None else started + budget_ms / 1000
    late = retrieval_end if share and retrieval_end is not None else end
    stored = anchors.stored if isinstance(anchors, Read) else len(anchors)
    code = [a for a in anchors[: typed_anchors.MAX_ANCHORS] if a.is_code]
    if not code:
        return Verdict(status=INCONCLUSIVE, evidence=NO_CODE_ANCHOR, head=fp.head)
    findings: list[Finding] = []
    for anchor in code:
        if clock() > end:
            return _over(findings, code, fp, budget_ms, share, (clock() - started) * 1000)
        found = finding(anchor, fp)
        if clock() > late:  # decided, but too late to count
            return _over(findings, code, fp, budget_ms, share, (clock() - started) * 1000)
        findings.append(found)
    elapsed = (clock() - started) * 1000
    failed = [f for f in findings if f.outcome == FAILS]
    if failed:
        text = "; ".join(f"{f.anchor.describe()}: {f.evidence}" for f in failed)
        return Verdict(status=REFUTED, evidence=text, head=fp.head, findings=tuple(findings), elapsed_ms=elapsed)
    unknown = [f for f in findings if f.outcome == UNKNOWN]
    over_cap = (f"{stored} anchors stored, above the cap of {typed_anchors.MAX_ANCHORS}: the first "
                f"{typed_anchors.MAX_ANCHORS} hold, the rest were not read") if stored > typed_anchors.MAX_ANCHORS else ""
    if unknown or over_cap:
        text = "; ".join([*([over_cap] if over_cap else []), *(f"{f.anchor.describe()}: {f.evidence}" for f in unknown)])
        return Verdict(status=INCONCLUSIVE, evidence=text, head=fp.head, findings=tuple(findings), elapsed_ms=elapsed)
    seen = "; ".join(f.evidence for f in findings)
    missing = coverage.uncovered(text, code) if text is not None else []
    if clock() > late:  # the coverage rule is part of the verdict: past the deadline it does not count either
        return _over(findings, code, fp, budget_ms, share, (clock() - started) * 1000)
    if missing:
        return Verdict(status=PARTLY, evidence=f"{coverage.describe(missing)} (the anchors hold: {seen})", head=fp.head,
                       findings=tuple(findings), elapsed_ms=elapsed, uncovered=tuple(missing))
    return Verdict(status=VERIFIED, evidence=seen, head=fp.head, findings=tuple(findings), elapsed_ms=elapsed)


def _over(findings: list[Finding], code: list[Anchor], fp: Fingerprint, budget_ms: float, share: bool, elapsed: float) -> Verdict:
    what = f"over its share of the {budget_ms:.0f} ms budget" if share else f"over the {budget_ms:.0f} ms budget"
    return Verdict(status=INCONCLUSIVE, head=fp.head, findings=tuple(findings), elapsed_ms=elapsed,
                   evidence=f"{what} after {len(findings)} of {len(code)} anchors")


def not_reached(budget_ms: float, head: str | None) -> Verdict:
    return Verdict(status=INCONCLUSIVE, evidence=f"not reached within the {budget_ms:.0f} ms budget", head=head)


def verify_many(facts: Sequence[Sequence[Anchor] | str], fp: Fingerprint, budget_ms: float = DEFAULT_BUDGET_MS, *,
                deadline: float | None = None, clock: Clock = time.perf_counter, texts: Sequence[str] | None = None) -> list[Verdict]:
    """Verdicts for many facts before one deadline, each fact held to its share: what is left of
    the budget divided by the facts still to check, so one fact with many or slow anchors cannot
    starve the others (a fact that finishes early leaves its rest to the next). A fact not reached
    by the deadline is inconclusive, `not reached`. A string is a fact whose anchors do not parse."""
    end = deadline if deadline is not None else clock() + budget_ms / 1000
    out: list[Verdict] = []
    for i, anchors in enumerate(facts):
        if isinstance(anchors, str):
            out.append(unavailable(anchors, fp.head))
            continue
        now = clock()
        if now >= end:
            out.append(not_reached(budget_ms, fp.head))
            continue
        out.append(verify(anchors, fp, budget_ms, deadline=now + (end - now) / (len(facts) - i), clock=clock, share=True,
                          text=texts[i] if texts is not None else None, retrieval_end=end))
    return out


def fact_anchors(stored: object, text: str) -> list[Anchor] | str:
    """A stored fact's anchors (`stored_anchors`), or those inferred from its text when it has no
    code anchors; a string saying why when the stored anchors no longer parse."""
    parsed = stored_anchors(stored)
    if isinstance(parsed, str) or any(a.is_code for a in parsed):
        return parsed
    return Read([*parsed, *typed_anchors.infer(text)], parsed.stored)


@dataclass(frozen=True, kw_only=True)
class Checked:
    """One retrieval: a verdict per fact, the HEAD, and how long it took."""

    verdicts: list[Verdict]
    head: str | None
    elapsed_ms: float
    fingerprint_ready: bool
    known: frozenset[int] = frozenset()  # the indices whose verdict came from `known`, not made again


def answer_reserve_ms(budget_ms: float) -> float:
    """What a retrieval keeps of its budget for the verdicts themselves and the event loop's
    wake-up after the wait for the fingerprint: a fifth, at most 10 ms."""
    return min(10.0, budget_ms / 5)


Known = Callable[[str], Awaitable[Mapping[int, Verdict]]]


async def check(workspace: Workspace | None, facts: Sequence[tuple[object, str]], budget_ms: float = DEFAULT_BUDGET_MS,
                *, clock: Clock = time.perf_counter, known: Known | None = None) -> Checked:
    """Verify many facts — (stored anchors JSON, fact text) pairs — at one HEAD within one budget.
    The fingerprint is waited for within the budget; a build still running then leaves every fact
    inconclusive (and goes on, so the next retrieval finds it). No workspace: all inconclusive.
    `known(head)` gives the verdicts already made at that HEAD (by index), which are not made
    again: a fingerprint is fixed per HEAD, and so is a verdict on it. Each other fact gets its
    share of what is left of the budget (`verify_many`). What the check imports is loaded before
    the budget's clock starts (`warm`)."""
    warm()
    started = clock()
    if workspace is None:
        verdict = unavailable("no workspace is configured for this agent")
        return Checked(verdicts=[verdict] * len(facts), head=None, elapsed_ms=(clock() - started) * 1000, fingerprint_ready=False)
    try:  # the wait leaves part of the budget for answering, so a cold retrieval ends inside it
        fp = await workspace.fingerprint_within(max(0.0, budget_ms - answer_reserve_ms(budget_ms)) / 1000)
    except WorkspaceError as exc:
        verdict = unavailable(f"could not check: {exc}")
        return Checked(verdicts=[verdict] * len(facts), head=None, elapsed_ms=(clock() - started) * 1000, fingerprint_ready=False)
    before = await known(fp.head) if known is not None else {}
    todo = [i for i in range(len(facts)) if i not in before]
    made = verify_many([fact_anchors(*facts[i]) for i in todo], fp, budget_ms, deadline=started + budget_ms / 1000, clock=clock,
                       texts=[facts[i][1] for i in todo])
    verdicts = dict(before) | dict(zip(todo, made, strict=True))
    return Checked(verdicts=[verdicts[i] for i in range(len(facts))], head=fp.head, elapsed_ms=(clock() - started) * 1000,
                   fingerprint_ready=True, known=frozenset(before))


def verify_json(stored: str | list[object], fp: Fingerprint, budget_ms: float = DEFAULT_BUDGET_MS, text: str | None = None) -> Verdict:
    """`verify` from the stored JSON form (a convenience for tools and tests)."""
    return verify(typed_anchors.parse(json.loads(stored) if isinstance(stored, str) else stored), fp, budget_ms, text=text)


def warm() -> None:
    """Import and load everything a check needs now, before any budget's clock starts: packaging
    (its PEP 503 names import its platform tags, ~10-30 ms), ICU's confusables data
    (`untrusted.folding.warm`), and the AST helpers. `check` calls it before its clock starts, so a
    fresh process's first retrieval does not spend its budget on imports. Idempotent."""
    global _warmed
    if _warmed:
        return
    from packaging.utils import canonicalize_name

    canonicalize_name("Warm_Up")
    folding.warm()
    typed_anchors.parse([{"type": "signature", "ref": "a.b", "params": "x=1"}, {"type": "value", "ref": "a.b", "value": "1"}])
    coverage.uncovered("`a.b` = 1, c and d", typed_anchors.parse([{"type": "package", "ref": "c"}]))
    _warmed = True


_warmed = False
