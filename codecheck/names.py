"""Identifiers an attacker cannot fake: an anchor's names against the names the workspace defines,
compared by their Unicode TS #39 confusable skeletons (`untrusted.folding.skeleton`; the workspace's
names and their skeletons are built with its fingerprint, in the build worker: `Fingerprint.names`,
`Fingerprint.skeletons`).

`absent import pygmеnts` (a Cyrillic "е") holds in any workspace that imports `pygments`, and
renders the same: a look-alike verifies a false absence, and an `import`/`symbol` look-alike
refutes a true fact. So every identifier in an anchor that the workspace does not name verbatim
is looked up by its skeleton among the names it does (modules and their parts, definitions,
imported modules, environment reads, declared dependencies, path parts): one with the same
skeleton is a look-alike, refused at the tool (`lookalikes`) and undecidable at read time
(`codecheck.verify`). A non-ASCII name the code itself uses (it is there verbatim) stays allowed.

Without a fingerprint (`lookalikes(…, None)`) a non-ASCII identifier whose skeleton is plain ASCII
is refused: it looks like an ASCII name, and nothing here can say that the workspace uses it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from codecheck.fingerprint import Fingerprint, canonicalize_name
from codecheck.typed_anchors import Anchor
from untrusted import folding

_PARTS = re.compile(r"[./]+")


def identifiers(anchor: Anchor) -> list[str]:
    """The identifiers an anchor names: the parts of its ref and where (a package: its PEP 503
    name, an environment variable: the whole name)."""
    out: list[str] = []
    if anchor.type == "package":
        out.append(canonicalize_name(anchor.ref) if anchor.ecosystem != "npm" else anchor.ref)  # PEP 503, as declarations compare
    elif anchor.type == "env":
        out.append(anchor.ref)
    else:
        out += [p for p in _PARTS.split(anchor.ref) if p]
    if anchor.where is not None:
        out += [p for p in _PARTS.split(anchor.where) if p]
    return out


def workspace_names(fp: Fingerprint) -> frozenset[str]:
    """Every name the workspace defines or uses that an anchor could name (built with the fingerprint)."""
    return fp.names


def _codepoints(name: str) -> str:
    return ", ".join(f"U+{ord(c):04X} at {i}" for i, c in enumerate(name) if not c.isascii())


def lookalike(name: str, fp: Fingerprint | None) -> str | None:
    """Why `name` is a look-alike (None when it is not): the workspace name it imitates, or, with
    no fingerprint, that a non-ASCII name looks like a plain ASCII one."""
    if fp is not None and name in workspace_names(fp):
        return None
    if fp is None:
        if name.isascii():
            return None
        skeleton = folding.skeleton(name)
        if skeleton.isascii():
            return (f"{name!r} ({_codepoints(name)}) looks like the ASCII name {skeleton!r}, and the workspace could not be "
                    "read to show that the code uses it; write the name as the code spells it")
        return None
    real = fp.skeletons.get(folding.skeleton(name))
    if real is None or real == name:
        return None
    detail = f" ({_codepoints(name) or 'different letters'})"
    return f"{name!r}{detail} looks like {real!r}, which the workspace names, but is not it"


def lookalikes(anchors: Sequence[Anchor], fp: Fingerprint | None) -> list[tuple[int, Anchor, str]]:
    """Every anchor naming a look-alike: (index, anchor, why)."""
    out = []
    for i, anchor in enumerate(anchors):
        if not anchor.is_code:
            continue
        for name in identifiers(anchor):
            why = lookalike(name, fp)
            if why is not None:
                out.append((i, anchor, why))
                break
    return out
