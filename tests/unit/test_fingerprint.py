"""The fingerprint of a tree, built from blobs in memory: what counts as an import, a definition,
an environment read, a declared dependency; what is skipped and why."""

from __future__ import annotations

import hashlib

from codecheck import fingerprint
from codecheck.fingerprint import Fingerprint


def build(files: dict[str, str | bytes], previous: Fingerprint | None = None) -> Fingerprint:
    blobs = {path: body.encode() if isinstance(body, str) else body for path, body in files.items()}
    oids = {path: hashlib.sha1(data).hexdigest() for path, data in blobs.items()}
    by_oid = {oids[path]: data for path, data in blobs.items()}
    loaded: list[str] = []

    def load(oid: str) -> bytes:
        loaded.append(oid)
        return by_oid[oid]

    entries = [(path, oids[path], 0o100644) for path in sorted(blobs)]
    return fingerprint.assemble("a" * 40, entries, load, previous.cache if previous else None)


PKG = {
    "pkg/__init__.py": "from .client import *\nfrom .client import Client as PublicClient\n",
    "pkg/client.py": (
        "from __future__ import annotations\n"
        "import os\n"
        "import email.utils\n"
        "import zlib  # the gzip decoder\n"
        "from typing import TYPE_CHECKING\n"
        "from . import transports\n"
        "from .transports import http as h\n"
        "from concurrent import futures\n"
        "if TYPE_CHECKING:\n"
        "    import ssl\n"
        "__all__ = ['Client']\n"
        "KEY = 'PKG_TOKEN'\n"
        "# import redis  -- a comment is not an import\n"
        "DOC = 'import celery; os.environ[\"NOT_READ\"]'\n"
        "class Base:\n"
        "    def headers(self): return {}\n"
        "class Client(Base):\n"
        "    retries = 3\n"
        "    def send(self):\n"
        "        import importlib\n"
        "        importlib.import_module('json')\n"
        "        return zlib.decompress(b''), os.environ.get(KEY), os.getenv('PKG_HOME')\n"
        "    def close(self):\n"
        "        environ = {'REQUEST_METHOD': 'GET'}\n"
        "        return environ['REQUEST_METHOD']\n"
    ),
    "pkg/transports/__init__.py": "",
    "pkg/transports/http.py": "import h2o\n",
    "requirements-dev.txt": "Foo_Bar>=1  # dev\n-e git+https://example.org/x#egg=x\n-r base.txt\n\nnot a requirement ===\n",
}


def test_imports_are_exact_modules_from_the_syntax_tree() -> None:
    fp = build(PKG)
    assert {"os", "email.utils", "email", "zlib", "typing", "pkg", "pkg.transports", "pkg.transports.http", "h2o",
            "importlib", "json", "concurrent"} <= set(fp.imported)
    assert "redis" not in fp.imported and "celery" not in fp.imported  # a comment and a string
    assert "h2" not in fp.imported  # h2o is another module, not h2
    assert [s.note for s in fp.imported["email"]] == ["import email.utils, which imports its parent email"]
    # `from . import transports` names a submodule of the workspace: it imports pkg.transports
    assert any(s.path == "pkg/client.py" for s in fp.imported["pkg.transports"])
    # `from concurrent import futures`: concurrent is not in the workspace, so futures only *may* be a submodule
    assert "concurrent.futures" not in fp.imported and "concurrent.futures" in fp.maybe_imported
    assert [s.typing_only for s in fp.imported["ssl"]] == [True]
    assert fp.imported["json"][0].note == "importlib.import_module('json')"


def test_definitions_reexports_bases_and_uses() -> None:
    fp = build(PKG)
    assert {"pkg.client.Client", "pkg.client.Client.send", "pkg.client.Client.retries", "pkg.client.Base.headers",
            "pkg.client.KEY", "pkg.client", "pkg"} <= fp.definitions
    assert "pkg.client.Client.close.environ" not in fp.definitions  # a local variable is not a definition
    assert fp.reexports["pkg.PublicClient"] == "pkg.client.Client"
    assert fp.stars["pkg"] == ("pkg.client",) and fp.all_names["pkg.client"] == ("Client",)
    assert fp.bases["pkg.client.Client"] == ("pkg.client.Base",)
    assert {s.scope for s in fp.uses["zlib"]} == {"pkg.client.Client.send"}


def test_environment_reads_are_typed_not_textual() -> None:
    fp = build(PKG)
    assert set(fp.env_reads) == {"PKG_TOKEN", "PKG_HOME"}  # not NOT_READ (a string), not REQUEST_METHOD (a local dict)
    assert fp.env_reads["PKG_TOKEN"][0].note == "through the constant KEY"
    assert fp.env_dynamic == ()


def test_computed_and_whole_environment_reads_are_kept_as_doubts() -> None:
    fp = build({"m.py": "from os import environ\nimport os as o\ndef f(n):\n    return environ[n], dict(o.environ), o.environ.copy()\n"
                         "o.environ['SET'] = '1'\n"})
    assert fp.env_reads == {}
    assert sorted(s.note for s in fp.env_dynamic) == [
        "os.environ used as a whole", "os.environ used as a whole", "os.environ[...]: the name is computed",
    ]


def test_a_syntax_error_or_bad_bytes_skip_that_file_and_the_build_goes_on() -> None:
    fp = build({"ok.py": "import json\n", "broken.py": "def (:\n", "latin.py": b"x = '\xff\xfe'\n", "nul.py": b"x = 1\x00\n"})
    reasons = {s.path: s.reason for s in fp.skipped}
    assert reasons["broken.py"].startswith("syntax error at line 1")
    assert reasons["latin.py"].startswith("cannot decode")
    assert "nul.py" in reasons
    assert "json" in fp.imported  # the good file still counts
    assert fp.skipped_under("broken.py") and not fp.skipped_under("ok.py")


def test_a_coding_line_is_honoured() -> None:
    fp = build({"m.py": "# -*- coding: latin-1 -*-\nimport json\nS = 'caf\xe9'\n".encode("latin-1")})
    assert fp.skipped == () and "json" in fp.imported


def test_declared_dependencies_from_every_manifest_normalized() -> None:
    fp = build({
        **PKG,
        "pyproject.toml": (
            '[project]\nname = "p"\ndependencies = ["httpcore==1.*", "Zope.Interface"]\n'
            '[project.optional-dependencies]\nhttp2 = ["h2>=3,<5"]\n'
            '[dependency-groups]\ndev = ["pytest", {include-group = "lint"}]\n'
            '[tool.poetry.dependencies]\npython = "^3.11"\nrequests = "^2"\n'
            '[tool.poetry.group.docs.dependencies]\nmkdocs = "*"\n'
        ),
        "setup.cfg": "[options]\ninstall_requires =\n    attrs>=22\n[options.extras_require]\nfast =\n    orjson\n",
        "web/package.json": '{"dependencies": {"left-pad": "^1"}, "devDependencies": {"@types/node": "*"}}',
    })
    assert {"python:httpcore", "python:zope-interface", "python:h2", "python:pytest", "python:requests", "python:mkdocs",
            "python:attrs", "python:orjson", "python:foo-bar", "npm:left-pad", "npm:@types/node"} <= set(fp.dependencies)
    assert "python:python" not in fp.dependencies
    assert fp.dependencies["python:h2"][0].group == "optional:http2"
    # the unreadable lines of a requirements file are named, the rest of it still counts
    problems = [s.reason for s in fp.skipped if s.path == "requirements-dev.txt"]
    assert len(problems) == 2 and any("editable" in p for p in problems)


def test_a_manifest_that_does_not_parse_is_skipped_with_its_reason() -> None:
    fp = build({"pyproject.toml": "[project\n", "package.json": "[1, 2]"})
    reasons = {s.path: s.reason for s in fp.skipped}
    assert reasons["pyproject.toml"].startswith("cannot parse")
    assert reasons["package.json"] == "package.json is not a JSON object"


def test_module_names_follow_packages_and_src_layout() -> None:
    dirs = frozenset({"src/app", "src/app/sub", "lib/tool"})
    assert fingerprint.module_name("src/app/sub/x.py", dirs) == ("app.sub.x", False)
    assert fingerprint.module_name("src/app/__init__.py", dirs) == ("app", True)
    assert fingerprint.module_name("lib/tool/run.py", dirs) == ("tool.run", False)
    assert fingerprint.module_name("scripts/deploy.py", dirs) == ("scripts.deploy", False)
    assert fingerprint.module_name("setup.py", dirs) == ("setup", False)
    assert fingerprint.resolve_relative("app.sub.x", False, 2, "util") == "app.util"
    assert fingerprint.resolve_relative("app", True, 1, None) == "app"
    assert fingerprint.resolve_relative("x", False, 2, "y") is None


def test_an_unchanged_blob_is_not_parsed_again() -> None:
    first = build(PKG)
    second = build({**PKG, "pkg/transports/http.py": "import h2\n"}, previous=first)
    assert second.parsed == 1 and second.reused == len(PKG) - 1
    assert "h2" in second.imported and "h2o" not in second.imported
