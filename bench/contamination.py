"""Memory contamination on codebases nobody here wrote: add-only, retraction, verify-on-read.

    python bench/contamination.py [--runs 200] [--budget-ms 50] [--json]

Three workspaces of different shapes, each the installed source of a distribution from PyPI at the
version installed, copied into a temporary git repository and committed, with a pyproject.toml
rebuilt from the distribution's own metadata (Requires-Dist, Provides-Extra, console scripts), so
the verifier reads real blobs of a real git HEAD: httpx (a dependency of this project: an HTTP
client with a CLI), jsonschema (a validation library whose format checkers are optional extras,
with a console script) and rich (a terminal-output library: the one issue 39's defects were found
on, with subpackage data directories, overloaded and keyword-only callables, literal and computed
constants). A second commit adds what the anchor classes need: a symlinked module
inside the package and one pointing out of the workspace, a `scripts/` directory that is not a
package, and a submodule (a gitlink, whose content is never there).

Besides the base set below, each codebase carries facts of the classes verify-on-read must get
right: unanchored (no code anchor: never shown as settled), scoped package (a required dependency
versus an optional extra), symlink, directory, submodule, dir or file (a `file` anchor on a
directory, a `dir` anchor on a file), look-alike (an anchor whose name is a Cyrillic look-alike of
a workspace name: refused by the fact tools at write time, counted as never stored; one of a name
no workspace has, allowed); rich adds signature (parameters), value (a constant's literal) and
wider than its anchors (a value naming what no anchor covers: partly anchored, never settled);
and a starved budget: one stored fact
with 4,000 anchors put first in a retrieval after the others were checked once, which must keep
every fact refuted before out of the arrival.

The fact set (written by hand against httpx 0.28.1, every anchor checked): 25 TRUE, 22 CONTRADICT
(the code shows something else), 3 SILENT (the code is mute: nothing there), and 7 PRESENT-TRAPS
(false facts whose token is in the code for an unrelated reason: in a comment, in another file,
in a sibling class, a local dict named `environ`, a declared-but-unused or imported-but-undeclared
package). The "agent" is the arrival: a false fact is adopted when it reaches the arrival as
anything but refuted or inconclusive.

Arms:
- add-only: every fact reaches the arrival as written.
- retraction: a perfect honest reviewer retracted every fact the code contradicts (the 22
  CONTRADICT facts, as in the experiment this rebuilds); retracted facts are filtered out.
- verify (text search): the untyped baseline, measured in the same run: an anchor holds when its
  token occurs anywhere in the blobs at HEAD (what a grep-style anchor check sees).
- verify-on-read: `codecheck.verify.check`, typed and placed anchors against the fingerprint at HEAD.

Token size of the facts block is its UTF-8 bytes / 4: a rough, tokenizer-free figure that is fair
for comparing the arms with each other, not a model's count.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pygit2
from packaging.requirements import Requirement
from pygit2.enums import FileMode

from codecheck import build_worker, names, typed_anchors, verify, workspace

TRUE, CONTRADICT, SILENT, TRAP = "TRUE", "CONTRADICT", "SILENT", "PRESENT-TRAP"
REFUSED = "refused"  # the fact tool refused its anchors at write time (a look-alike): never stored
BASE = "base"
CLASSES = ("unanchored", "scoped package", "symlink", "directory", "submodule", "signature", "value", "dir or file",
           "look-alike", "wider than its anchors")


@dataclass(frozen=True)
class Fact:
    key: str
    value: str
    label: str
    anchors: list[dict[str, Any]]
    cls: str = BASE

    @property
    def false(self) -> bool:
        return self.label != TRUE


def imp(ref: str, where: str | None = None) -> dict[str, Any]:
    return {"type": "import", "ref": ref, **({"where": where} if where else {})}


def sym(ref: str) -> dict[str, Any]:
    return {"type": "symbol", "ref": ref}


def env(ref: str, where: str | None = None) -> dict[str, Any]:
    return {"type": "env", "ref": ref, **({"where": where} if where else {})}


def pkg(ref: str, scope: str | None = None) -> dict[str, Any]:
    return {"type": "package", "ref": ref, **({"scope": scope} if scope else {})}


def file(ref: str) -> dict[str, Any]:
    return {"type": "file", "ref": ref}


def absent(anchor: dict[str, Any]) -> dict[str, Any]:
    return {"type": "absent", "anchor": anchor}


def dir_(ref: str) -> dict[str, Any]:
    return {"type": "dir", "ref": ref}


def sig(ref: str, params: str) -> dict[str, Any]:
    return {"type": "signature", "ref": ref, "params": params}


def val(ref: str, value: str) -> dict[str, Any]:
    return {"type": "value", "ref": ref, "value": value}


_CYRILLIC = {"a": "\u0430", "e": "\u0435", "o": "\u043e", "i": "\u0456", "c": "\u0441", "p": "\u0440"}


def cyrillic(name: str) -> str:
    """`name` with its last letter that has a Cyrillic twin swapped for it: renders the same."""
    for i in range(len(name) - 1, -1, -1):
        if name[i] in _CYRILLIC:
            return name[:i] + _CYRILLIC[name[i]] + name[i + 1:]
    raise ValueError(f"{name!r} has no letter with a Cyrillic look-alike")


HTTPX_FACTS: list[Fact] = [
    # -- TRUE (25) ------------------------------------------------------------------------------
    Fact("client_class", "The sync client is httpx._client.Client, exported as httpx.Client.", TRUE,
         [sym("httpx._client.Client"), sym("httpx.Client")]),
    Fact("async_client", "httpx.AsyncClient shares BaseClient with the sync client.", TRUE,
         [sym("httpx.AsyncClient"), sym("httpx._client.BaseClient")]),
    Fact("send_entry", "Client.send is the entry point that handles auth, then redirects.", TRUE,
         [sym("httpx._client.Client.send"), sym("httpx._client.Client._send_handling_redirects")]),
    Fact("transport_httpcore", "The default transport is built on httpcore.", TRUE,
         [imp("httpcore", "httpx/_transports/default.py"), pkg("httpcore")]),
    Fact("idna_hosts", "Hostnames are IDNA-encoded with the idna package in the URL parser.", TRUE,
         [imp("idna", "httpx/_urlparse.py"), pkg("idna")]),
    Fact("certifi_bundle", "create_ssl_context loads certifi's CA bundle.", TRUE,
         [imp("certifi", "httpx._config.create_ssl_context"), pkg("certifi")]),
    Fact("ssl_cert_file", "SSL_CERT_FILE from the environment overrides the CA bundle.", TRUE,
         [env("SSL_CERT_FILE", "httpx/_config.py")]),
    Fact("ssl_cert_dir", "SSL_CERT_DIR can point create_ssl_context at a directory of CAs.", TRUE,
         [env("SSL_CERT_DIR", "httpx._config.create_ssl_context")]),
    Fact("zlib_gzip", "gzip and deflate bodies are decoded with zlib.", TRUE,
         [imp("zlib", "httpx._decoders.GZipDecoder"), imp("zlib", "httpx._decoders.DeflateDecoder")]),
    Fact("brotli_optional", "Brotli decoding is the optional brotli extra, imported in _decoders.py.", TRUE,
         [imp("brotli", "httpx/_decoders.py"), pkg("brotli")]),
    Fact("zstd_decoder", "zstd bodies are decoded with zstandard (an optional extra).", TRUE,
         [imp("zstandard", "httpx._decoders.ZStandardDecoder"), pkg("zstandard")]),
    Fact("cli_stack", "The httpx command line is built on click, rich and pygments.", TRUE,
         [imp("click", "httpx/_main.py"), imp("rich.console", "httpx/_main.py"), pkg("click"), pkg("pygments")]),
    Fact("http2_extra", "HTTP/2 is the optional h2 extra, checked for when a client is made with http2=True.", TRUE,
         [pkg("h2"), imp("h2", "httpx._client.Client.__init__")]),
    Fact("socks_extra", "SOCKS proxies need the socksio extra, checked for in the default transport.", TRUE,
         [pkg("socksio"), imp("socksio", "httpx/_transports/default.py")]),
    Fact("netrc_auth", "NetRCAuth reads credentials with the standard library's netrc.", TRUE,
         [sym("httpx.NetRCAuth"), imp("netrc", "httpx._auth.NetRCAuth")]),
    Fact("digest_auth", "DigestAuth hashes its challenge response with hashlib.", TRUE,
         [sym("httpx._auth.DigestAuth"), imp("hashlib", "httpx._auth.DigestAuth")]),
    Fact("env_proxies", "Proxies from the environment come from urllib.request's getproxies.", TRUE,
         [sym("httpx._utils.get_environment_proxies"), imp("urllib.request", "httpx._utils.get_environment_proxies")]),
    Fact("mock_transport", "MockTransport answers requests with a handler, no network.", TRUE,
         [sym("httpx.MockTransport"), file("httpx/_transports/mock.py")]),
    Fact("wsgi_transport", "WSGITransport calls a WSGI application in-process.", TRUE,
         [sym("httpx._transports.wsgi.WSGITransport.handle_request"), file("httpx/_transports/wsgi.py")]),
    Fact("trio_detection", "The ASGI transport detects trio with sniffio.", TRUE,
         [imp("sniffio", "httpx._transports.asgi.is_running_trio")]),
    Fact("status_codes", "Status codes are an IntEnum, httpx.codes.", TRUE,
         [sym("httpx.codes.NOT_FOUND"), imp("enum", "httpx/_status_codes.py")]),
    Fact("timeout_hierarchy", "ConnectTimeout is a TimeoutException, a TransportError.", TRUE,
         [sym("httpx.ConnectTimeout"), sym("httpx._exceptions.TransportError")]),
    Fact("anyio_declared", "anyio is a declared runtime dependency.", TRUE, [pkg("anyio")]),
    Fact("no_requests", "httpx does not use the requests library.", TRUE,
         [absent(imp("requests")), absent(pkg("requests"))]),
    Fact("multipart_mimetypes", "Multipart file fields guess their content type with mimetypes.", TRUE,
         [imp("mimetypes", "httpx._multipart._guess_content_type")]),
    # -- CONTRADICT (22): the code shows something else -----------------------------------------
    Fact("transport_urllib3", "The default transport is built on urllib3.", CONTRADICT,
         [imp("urllib3", "httpx/_transports/default.py")]),
    Fact("idna_codec", "Hostnames are encoded with the standard library's encodings.idna codec.", CONTRADICT,
         [imp("encodings.idna", "httpx/_urlparse.py")]),
    Fact("truststore_bundle", "The CA bundle comes from the truststore package.", CONTRADICT,
         [imp("truststore", "httpx/_config.py"), pkg("truststore")]),
    Fact("send_dispatch", "The client's entry point is Client.dispatch.", CONTRADICT,
         [sym("httpx._client.Client.dispatch")]),
    Fact("async_session", "The async client is httpx.AsyncSession.", CONTRADICT, [sym("httpx.AsyncSession")]),
    Fact("gzip_module", "gzip bodies are decoded with the gzip module.", CONTRADICT,
         [imp("gzip", "httpx._decoders.GZipDecoder")]),
    Fact("structlog_logging", "The client logs through structlog.", CONTRADICT,
         [imp("structlog", "httpx/_client.py")]),
    Fact("tenacity_retries", "Retries are implemented with tenacity in the client.", CONTRADICT,
         [imp("tenacity", "httpx/_client.py"), pkg("tenacity")]),
    Fact("hyper_http2", "HTTP/2 support comes from the hyper package.", CONTRADICT, [pkg("hyper")]),
    Fact("argparse_cli", "The command line is built on argparse.", CONTRADICT, [imp("argparse", "httpx/_main.py")]),
    Fact("orjson_bodies", "JSON request bodies are encoded with orjson.", CONTRADICT, [imp("orjson", "httpx/_content.py")]),
    Fact("urlsplit_parser", "URLs are parsed with urllib.parse in the URL parser.", CONTRADICT,
         [imp("urllib.parse", "httpx/_urlparse.py")]),
    Fact("cookies_plain_dict", "Cookies are kept in a plain dict: no http.cookiejar.", CONTRADICT,
         [absent(imp("http.cookiejar", "httpx/_models.py"))]),
    Fact("sync_transport_name", "The sync transport is httpx.SyncHTTPTransport.", CONTRADICT,
         [sym("httpx.SyncHTTPTransport")]),
    Fact("httpx_proxy_env", "Proxies are configured with the HTTPX_PROXY environment variable.", CONTRADICT,
         [env("HTTPX_PROXY")]),
    Fact("timeout_env", "Default timeouts come from HTTPX_TIMEOUT.", CONTRADICT, [env("HTTPX_TIMEOUT", "httpx/_config.py")]),
    Fact("digest_cryptography", "DigestAuth uses the cryptography package.", CONTRADICT,
         [imp("cryptography", "httpx/_auth.py"), pkg("cryptography")]),
    Fact("asgi_asyncio_only", "The ASGI transport is asyncio only: it never imports trio.", CONTRADICT,
         [absent(imp("trio", "httpx/_transports/asgi.py"))]),
    Fact("no_cli_module", "httpx ships no command line module.", CONTRADICT, [absent(file("httpx/_main.py"))]),
    Fact("multipart_encoder_file", "Multipart encoding lives in httpx/_multipart_encoder.py.", CONTRADICT,
         [file("httpx/_multipart_encoder.py")]),
    Fact("public_decoders", "The decoders live in a public module, httpx/decoders.py.", CONTRADICT,
         [file("httpx/decoders.py")]),
    Fact("reads_no_env", "httpx reads no environment variables at all.", CONTRADICT, [absent(env("SSL_CERT_FILE"))]),
    # -- SILENT (3): the code is mute -----------------------------------------------------------
    Fact("celery_refresh", "Connection pools are refreshed by a Celery task.", SILENT, [imp("celery"), pkg("celery")]),
    Fact("redis_cache", "Responses are cached in Redis.", SILENT, [imp("redis"), pkg("redis")]),
    Fact("prometheus_metrics", "Request metrics are exported to Prometheus.", SILENT,
         [imp("prometheus_client"), pkg("prometheus-client")]),
    # -- PRESENT-TRAPS (7): the token is there, for another reason ------------------------------
    Fact("h2_in_transport", "HTTP/2 framing is done with h2 inside the default transport.", TRAP,
         [imp("h2", "httpx/_transports/default.py")]),     # h2 is imported only by _client.py, to check it is installed
    Fact("brotli_via_zlib", "Brotli bodies are decompressed with zlib.", TRAP,
         [imp("zlib", "httpx._decoders.BrotliDecoder")]),  # zlib is imported in that file, for gzip and deflate
    Fact("asgi_on_anyio", "The ASGI transport runs on anyio.", TRAP,
         [imp("anyio", "httpx/_transports/asgi.py")]),     # anyio is declared in pyproject.toml, never imported
    Fact("sniffio_declared", "sniffio is a declared dependency.", TRAP, [pkg("sniffio")]),  # imported, never declared
    Fact("no_proxy_env", "_utils.py reads NO_PROXY from the environment.", TRAP,
         [env("NO_PROXY", "httpx/_utils.py")]),            # NO_PROXY is in comments; getproxies() reads it in the stdlib
    Fact("wsgi_request_method_env", "The WSGI transport reads REQUEST_METHOD from the process environment.", TRAP,
         [env("REQUEST_METHOD", "httpx/_transports/wsgi.py")]),  # a local dict named environ, not os.environ
    Fact("client_ssl_context", "Client.__init__ builds TLS contexts with ssl.", TRAP,
         [imp("ssl", "httpx._client.Client.__init__")]),   # ssl is imported in _client.py only under TYPE_CHECKING
]


JSONSCHEMA_FACTS: list[Fact] = [
    # -- TRUE (20) ------------------------------------------------------------------------------
    Fact("validation_error", "Validation errors are jsonschema.exceptions.ValidationError.", TRUE,
         [sym("jsonschema.exceptions.ValidationError")]),
    Fact("draft2020", "The 2020-12 validator is made by create() in validators.py.", TRUE,
         [sym("jsonschema.validators.Draft202012Validator"), sym("jsonschema.validators.create")]),
    Fact("format_checks", "FormatChecker registers checkers with its checks decorator.", TRUE,
         [sym("jsonschema._format.FormatChecker.checks")]),
    Fact("legacy_refs", "Legacy $recursiveRef lookups come from referencing.jsonschema.", TRUE,
         [imp("referencing.jsonschema", "jsonschema/_legacy_keywords.py")]),
    Fact("rpds_types", "The type checker keeps its checkers in an rpds HashTrieMap.", TRUE,
         [imp("rpds", "jsonschema/_types.py"), pkg("rpds-py", "required")]),
    Fact("attrs_errors", "Errors are attrs classes.", TRUE, [imp("attrs", "jsonschema/exceptions.py"), pkg("attrs", "required")]),
    Fact("idna_format", "Hostname formats use idna, from the format extra.", TRUE,
         [imp("idna", "jsonschema._format"), pkg("idna", "extra:format")]),
    Fact("webcolors_optional", "CSS colours are checked with webcolors, an optional dependency.", TRUE,
         [imp("webcolors", "jsonschema/_format.py"), pkg("webcolors", "optional")]),
    Fact("cli_argparse", "The command line parses its arguments with argparse.", TRUE, [imp("argparse", "jsonschema/cli.py")]),
    Fact("cli_entry", "The jsonschema command runs jsonschema.cli.main; python -m jsonschema too.", TRUE,
         [sym("jsonschema.cli.main"), file("jsonschema/__main__.py")]),
    Fact("ipv4_ipaddress", "ipv4 is checked with ipaddress.", TRUE, [imp("ipaddress", "jsonschema._format.is_ipv4")]),
    Fact("cli_json", "The command line reads instances with json.", TRUE, [imp("json", "jsonschema/cli.py")]),
    Fact("remote_requests", "The legacy resolver fetches remote refs with requests when it is installed.", TRUE,
         [imp("requests", "jsonschema.validators._RefResolver.resolve_remote"), absent(pkg("requests"))]),
    Fact("specifications", "The metaschemas come from jsonschema-specifications.", TRUE,
         [imp("jsonschema_specifications", "jsonschema/validators.py"), pkg("jsonschema-specifications", "required")]),
    Fact("fractions_multiple", "multipleOf is computed with fractions.", TRUE, [imp("fractions", "jsonschema/_keywords.py")]),
    Fact("type_checker", "TypeChecker.is_type decides a JSON type.", TRUE, [sym("jsonschema._types.TypeChecker.is_type")]),
    Fact("utils_urlsplit", "_utils.py splits URLs with urllib.parse.", TRUE, [imp("urllib.parse", "jsonschema/_utils.py")]),
    Fact("validator_protocol", "The Validator protocol is in protocols.py.", TRUE, [sym("jsonschema.protocols.Validator")]),
    Fact("best_match_heapq", "Error relevance uses heapq.", TRUE, [imp("heapq", "jsonschema/exceptions.py")]),
    Fact("referencing_required", "referencing is a required dependency.", TRUE, [pkg("referencing", "required")]),
    # -- CONTRADICT (11) ------------------------------------------------------------------------
    Fact("cli_click", "The command line is built on click.", CONTRADICT, [imp("click", "jsonschema/cli.py")]),
    Fact("pointer_in_validators", "validators.py resolves pointers with jsonpointer.", CONTRADICT,
         [imp("jsonpointer", "jsonschema/validators.py")]),
    Fact("cli_parser", "The command line is a Parser class.", CONTRADICT, [sym("jsonschema.cli.Parser")]),
    Fact("private_cli", "The command line lives in jsonschema/_cli.py.", CONTRADICT, [file("jsonschema/_cli.py")]),
    Fact("pydantic_models", "Schemas are pydantic models.", CONTRADICT, [pkg("pydantic")]),
    Fact("dataclass_errors", "Errors are dataclasses.", CONTRADICT, [imp("dataclasses", "jsonschema/exceptions.py")]),
    Fact("cli_no_argparse", "The command line does not use argparse.", CONTRADICT, [absent(imp("argparse", "jsonschema/cli.py"))]),
    Fact("type_validate", "TypeChecker.validate validates a schema.", CONTRADICT, [sym("jsonschema._types.TypeChecker.validate")]),
    Fact("no_cli", "jsonschema ships no cli module.", CONTRADICT, [absent(file("jsonschema/cli.py"))]),
    Fact("ipv4_socket", "ipv4 is checked with socket.inet_aton.", CONTRADICT, [imp("socket", "jsonschema._format.is_ipv4")]),
    Fact("no_requests", "jsonschema never imports requests.", CONTRADICT, [absent(imp("requests", "jsonschema/"))]),
    # -- SILENT (3) -----------------------------------------------------------------------------
    Fact("redis_cache", "Compiled schemas are cached in Redis.", SILENT, [imp("redis"), pkg("redis")]),
    Fact("celery_batch", "Batch validation runs as Celery tasks.", SILENT, [imp("celery"), pkg("celery")]),
    Fact("s3_schemas", "Remote schemas are fetched from S3 with boto3.", SILENT, [imp("boto3"), pkg("boto3")]),
    # -- PRESENT-TRAPS (3) ----------------------------------------------------------------------
    Fact("email_fqdn", "Email addresses are checked with fqdn.", TRAP,
         [imp("fqdn", "jsonschema._format.is_email")]),      # fqdn is imported in that file, for hostnames
    Fact("types_collections", "_types.py uses collections.abc at run time.", TRAP,
         [imp("collections.abc", "jsonschema/_types.py")]),  # only under TYPE_CHECKING
    Fact("idna_required", "idna is a required dependency.", TRAP, [pkg("idna", "required")]),  # only in the extras
]


@dataclass(frozen=True)
class Codebase:
    """One installed distribution as a workspace, and what its class facts need to know of it."""

    package: str
    facts: list[Fact]
    alias_of: str        # a module file the in-tree symlink points at
    alias_import: str    # an import that file makes at module level
    alias_def: str       # a definition in it
    required: str        # a required dependency
    extra: tuple[str, str]  # an optional dependency and its extra
    edit: str            # the file edited when HEAD moves


def class_facts(cb: Codebase) -> list[Fact]:
    """The anchor classes, the same for every codebase (named from what it holds)."""
    p = cb.package
    dep, extra = cb.extra
    return [
        Fact("u_celery", "Background jobs run on Celery.", SILENT, [], "unanchored"),
        Fact("u_redis", "Results are cached in Redis.", SILENT, [], "unanchored"),
        Fact("u_library", f"{p} is a library.", TRUE, [], "unanchored"),
        Fact("s_required", f"{cb.required} is a required dependency.", TRUE, [pkg(cb.required, "required")], "scoped package"),
        Fact("s_extra", f"{dep} is the optional {extra} extra.", TRUE, [pkg(dep, f"extra:{extra}")], "scoped package"),
        Fact("s_extra_required", f"{dep} is a required dependency.", CONTRADICT, [pkg(dep, "required")], "scoped package"),
        Fact("s_required_optional", f"{cb.required} is only an optional extra.", CONTRADICT,
             [pkg(cb.required, "optional")], "scoped package"),
        Fact("l_import", f"{p}/_alias.py imports {cb.alias_import}.", TRUE, [imp(cb.alias_import, f"{p}/_alias.py")], "symlink"),
        Fact("l_symbol", f"{p}._alias defines {cb.alias_def}.", TRUE, [sym(f"{p}._alias.{cb.alias_def}")], "symlink"),
        Fact("l_false", f"{p}/_alias.py uses requests.", CONTRADICT, [imp("requests", f"{p}/_alias.py")], "symlink"),
        Fact("l_outside", f"{p}/_outside.py never imports json.", SILENT, [absent(imp("json", f"{p}/_outside.py"))], "symlink"),
        Fact("d_slash", "The release script runs git through subprocess.", TRUE, [imp("subprocess", "scripts/")], "directory"),
        Fact("d_dot", "The scripts use subprocess.", TRUE, [imp("subprocess", "./scripts")], "directory"),
        Fact("d_false", "The scripts use requests.", CONTRADICT, [imp("requests", "scripts/")], "directory"),
        Fact("m_absent", "The vendored legacy code never uses requests.", SILENT,
             [absent(imp("requests", "vendor/legacy"))], "submodule"),
        Fact("m_inside", "vendor/legacy/client.py uses urllib3.", SILENT, [imp("urllib3", "vendor/legacy/client.py")], "submodule"),
        Fact("p_package", f"{p}/ is a package directory.", TRUE, [dir_(p)], "dir or file"),
        Fact("p_scripts_dir", "scripts/ is a directory.", TRUE, [dir_("scripts")], "dir or file"),
        Fact("p_one_file", f"{p} is a single module file, not a package.", CONTRADICT, [file(p)], "dir or file"),
        Fact("p_scripts_file", "scripts is one file.", CONTRADICT, [file("scripts")], "dir or file"),
        Fact("p_edit_dir", f"{p}/{cb.edit} is a directory.", CONTRADICT, [dir_(f"{p}/{cb.edit}")], "dir or file"),
        Fact("k_import", f"{p}/_alias.py never imports {cb.alias_import}.", CONTRADICT,
             [absent(imp(cyrillic(cb.alias_import), f"{p}/_alias.py"))], "look-alike"),
        Fact("k_unplaced", f"Nothing imports {cb.alias_import}.", CONTRADICT, [absent(imp(cyrillic(cb.alias_import)))], "look-alike"),
        Fact("k_symbol", f"{p}._alias has no {cb.alias_def}.", CONTRADICT,
             [absent(sym(f"{p}._alias.{cyrillic(cb.alias_def)}"))], "look-alike"),
        Fact("k_real_absence", f"{p}/_alias.py never imports celery.", TRUE,
             [absent(imp(cyrillic("celery"), f"{p}/_alias.py"))], "look-alike"),  # a look-alike of no name there: allowed
    ]


_TRACK = ("sequence, description='Working...', total=None, completed=0, auto_refresh=True, console=None, transient=False, "
          "get_time=None, refresh_per_second=10, style='bar.back', complete_style='bar.complete', "
          "finished_style='bar.finished', pulse_style='bar.pulse', update_period=0.1, disable=False, show_speed=True")

RICH_FACTS: list[Fact] = [
    # -- TRUE -------------------------------------------------------------------------------------
    Fact("console", "rich.console.Console renders to the terminal.", TRUE, [sym("rich.console.Console")]),
    Fact("syntax_pygments", "Syntax highlighting uses Pygments lexers.", TRUE, [imp("pygments.lexers", "rich/syntax.py")]),
    Fact("markdown_it", "rich.markdown parses with markdown_it.", TRUE, [imp("markdown_it", "rich/markdown.py")]),
    Fact("pygments_required", "pygments is a required dependency.", TRUE, [pkg("pygments", "required")]),
    Fact("windows_file", "rich/_windows.py holds the Windows feature detection.", TRUE, [file("rich/_windows.py")]),
    Fact("no_requests", "rich never imports requests.", TRUE, [absent(imp("requests", "rich/"))]),
    Fact("get_console", "rich.get_console returns the global console.", TRUE, [sym("rich.get_console")]),
    # -- CONTRADICT -------------------------------------------------------------------------------
    Fact("redis_styles", "Styles are cached in redis by rich/style.py.", CONTRADICT, [imp("redis", "rich/style.py")]),
    Fact("console_requests", "rich/console.py imports requests.", CONTRADICT, [imp("requests", "rich/console.py")]),
    Fact("colorama_required", "colorama is a required dependency.", CONTRADICT, [pkg("colorama", "required")]),
    Fact("no_pygments_pkg", "rich declares no dependency on pygments.", CONTRADICT, [absent(pkg("pygments"))]),
    Fact("table_module", "rich.table defines no Table.", CONTRADICT, [absent(sym("rich.table.Table"))]),
    # -- SILENT -----------------------------------------------------------------------------------
    Fact("telemetry", "rich sends usage telemetry to Sentry.", SILENT, []),
    Fact("windows_true", "rich.console.WINDOWS is True.", SILENT, [val("rich.console.WINDOWS", "True")], "value"),
    # -- signature --------------------------------------------------------------------------------
    Fact("track_sig", "rich.progress.track takes the sequence first, then description and total.", TRUE,
         [sig("rich.progress.track", _TRACK)], "signature"),
    Fact("add_row_sig", "Table.add_row takes *renderables, style and end_section.", TRUE,
         [sig("rich.table.Table.add_row", "self, *renderables, style=None, end_section=False")], "signature"),
    Fact("print_sig", "rich.print takes *objects, sep, end, file and flush.", TRUE,
         [sig("rich.print", "*objects, sep=' ', end='\\n', file=None, flush=False")], "signature"),
    Fact("track_total_first", "track(total, sequence) takes the total first.", CONTRADICT,
         [sig("rich.progress.track", "total, sequence")], "signature"),
    Fact("add_row_keyword", "Table.add_row takes style as its only, keyword-only, parameter.", CONTRADICT,
         [sig("rich.table.Table.add_row", "self, *, style=None")], "signature"),
    Fact("print_one", "rich.print takes a single obj.", CONTRADICT, [sig("rich.print", "obj")], "signature"),
    # -- value ------------------------------------------------------------------------------------
    Fact("jupyter_columns", "JUPYTER_DEFAULT_COLUMNS is 115.", TRUE, [val("rich.console.JUPYTER_DEFAULT_COLUMNS", "115")], "value"),
    Fact("jupyter_lines", "JUPYTER_DEFAULT_LINES is 100.", TRUE, [val("rich.console.JUPYTER_DEFAULT_LINES", "100")], "value"),
    Fact("syntax_theme", "Syntax's DEFAULT_THEME is 'monokai'.", TRUE, [val("rich.syntax.DEFAULT_THEME", "'monokai'")], "value"),
    Fact("columns_80", "JUPYTER_DEFAULT_COLUMNS = 80", CONTRADICT, [val("rich.console.JUPYTER_DEFAULT_COLUMNS", "80")], "value"),
    Fact("locals_20", "LOCALS_MAX_LENGTH is 20.", CONTRADICT, [val("rich.traceback.LOCALS_MAX_LENGTH", "20")], "value"),
    Fact("theme_solarized", "Syntax's DEFAULT_THEME is 'solarized'.", CONTRADICT,
         [val("rich.syntax.DEFAULT_THEME", "'solarized'")], "value"),
    # -- dir or file ------------------------------------------------------------------------------
    Fact("unicode_dir", "rich/_unicode_data/ is a package directory.", TRUE, [dir_("rich/_unicode_data")], "dir or file"),
    Fact("progress_dir", "rich/progress/ is a package directory.", CONTRADICT, [dir_("rich/progress")], "dir or file"),
    Fact("unicode_one_file", "rich/_unicode_data is one module file.", CONTRADICT, [file("rich/_unicode_data")], "dir or file"),
    # -- look-alike -------------------------------------------------------------------------------
    Fact("no_pygments", "rich does not use Pygments.", CONTRADICT, [absent(imp(cyrillic("pygments")))], "look-alike"),
    Fact("add_row_removed", "Table.add_row was removed.", CONTRADICT,
         [absent(sym("rich.table.Table." + cyrillic("add_row")))], "look-alike"),
    # -- wider than its anchors (issue 39's three that read verified, and their kin) -----------------
    Fact("track_partly", "`track(total, sequence)` takes the total first.", CONTRADICT,
         [sym("rich.progress.track")], "wider than its anchors"),
    Fact("columns_partly", "JUPYTER_DEFAULT_COLUMNS = 80", CONTRADICT,
         [sym("rich.console.JUPYTER_DEFAULT_COLUMNS")], "wider than its anchors"),
    Fact("windows_dropped", "Rich dropped Windows support.", CONTRADICT, [file("rich/_windows.py")], "wider than its anchors"),
    Fact("three_deps", "rich depends on pygments, markdown-it-py and colorama.", CONTRADICT,
         [pkg("pygments"), pkg("markdown-it-py")], "wider than its anchors"),
    Fact("two_deps", "rich depends on pygments and markdown-it-py.", TRUE, [pkg("pygments")], "wider than its anchors"),
]


CODEBASES = [
    Codebase("httpx", HTTPX_FACTS, "_decoders.py", "zlib", "GZipDecoder", "httpcore", ("h2", "http2"), "_utils.py"),
    Codebase("jsonschema", JSONSCHEMA_FACTS, "_utils.py", "itertools", "format_as_index", "attrs", ("webcolors", "format"),
             "_utils.py"),
    Codebase("rich", RICH_FACTS, "_loop.py", "typing", "loop_first", "pygments", ("ipywidgets", "jupyter"), "_timer.py"),
]


# -- the workspace ------------------------------------------------------------------------------


def _pyproject(dist: importlib.metadata.Distribution) -> str:
    """pyproject.toml rebuilt from the distribution's metadata: runtime and optional dependencies."""
    extras = dist.metadata.get_all("Provides-Extra") or []
    runtime: list[str] = []
    optional: dict[str, list[str]] = {e: [] for e in extras}
    for text in dist.requires or []:
        req = Requirement(text)
        marker = str(req.marker) if req.marker else ""
        extra = next((e for e in extras if f'extra == "{e}"' in marker), None)
        rest = marker.replace(f' and extra == "{extra}"', "").replace(f'extra == "{extra}"', "").strip() if extra else marker
        spec = f"{req.name}{req.specifier}" + (f"; {rest}" if rest else "")
        (optional[extra] if extra else runtime).append(spec)
    lines = ["[project]", f'name = "{dist.metadata["Name"]}"', f'version = "{dist.version}"',
             f"dependencies = {json.dumps(runtime)}", "", "[project.optional-dependencies]"]
    lines += [f"{json.dumps(extra)} = {json.dumps(specs)}" for extra, specs in optional.items()]
    scripts = [e for e in dist.entry_points if e.group == "console_scripts"]
    if scripts:
        lines += ["", "[project.scripts]", *(f"{json.dumps(e.name)} = {json.dumps(e.value)}" for e in scripts)]
    return "\n".join(lines) + "\n"


def make_workspace(base: Path, cb: Codebase) -> tuple[Path, str]:
    """A git repository holding the installed source of the package and its rebuilt pyproject.toml,
    then a commit adding what the class facts stand on: `_alias.py` (a symlink to a module of the
    package), `_outside.py` (a symlink out of the workspace), `scripts/` and a submodule."""
    package = cb.package
    dist = importlib.metadata.distribution(package)
    source = Path(str(dist.locate_file(package)))
    root = base / f"{package}-{dist.version}"
    shutil.copytree(source, root / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (root / "pyproject.toml").write_text(_pyproject(dist), encoding="utf-8")
    commit(root, f"{package} {dist.version} as installed")
    (root / package / "_alias.py").symlink_to(cb.alias_of)
    (root / package / "_outside.py").symlink_to("../../outside.py")
    (root / "scripts").mkdir()
    (root / "scripts" / "release.py").write_text("import subprocess\n\nsubprocess.run(['git', 'tag'], check=True)\n")
    commit(root, "the anchor classes", gitlinks={"vendor/legacy": "1" * 40})
    return root, dist.version


def commit(root: Path, message: str, gitlinks: dict[str, str] | None = None) -> str:
    repo = pygit2.init_repository(str(root)) if not (root / ".git").exists() else pygit2.Repository(str(root))
    repo.index.read()
    repo.index.add_all()
    for path, oid in (gitlinks or {}).items():  # a submodule: a commit of another repository, never fetched
        repo.index.add(pygit2.IndexEntry(path, pygit2.Oid(hex=oid), FileMode.COMMIT))
    repo.index.write()
    tree = repo.index.write_tree()
    sig = pygit2.Signature("bench", "bench@localhost", 1_700_000_000, 0)
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", sig, sig, message, tree, parents))


# -- the arms -----------------------------------------------------------------------------------


def _text_search(fact: Fact, blobs: dict[str, str]) -> str:
    """The untyped baseline: each anchor's token anywhere in the text at HEAD (no anchor: shown as written)."""
    corpus = "\n".join(blobs.values())
    for raw in fact.anchors:
        negated = raw["type"] == "absent"
        inner = raw["anchor"] if negated else raw
        token = inner["ref"].rsplit(".", 1)[-1] if inner["type"] in ("symbol", "signature", "value") else inner["ref"]
        if inner["type"] == "dir":
            present = any(path.startswith(inner["ref"].rstrip("/") + "/") for path in blobs)
        else:
            present = inner["ref"] in blobs if inner["type"] == "file" else token in corpus
        if present == negated:
            return verify.REFUTED
    return verify.VERIFIED if fact.anchors else ""


def _block(shown: list[tuple[Fact, str]]) -> str:
    lines = [f"- {f.key}: {f.value}" + ("" if status in ("", verify.VERIFIED) else f" [{status}]") for f, status in shown]
    return "Facts:\n" + "\n".join(lines) + "\n"


def arm_row(name: str, facts: list[Fact], statuses: list[str]) -> dict[str, Any]:
    """Figures for one arm from each fact's status at arrival ('' = shown unchecked, 'retracted')."""
    pairs = list(zip(facts, statuses, strict=True))
    false = [f for f in facts if f.false]
    adopted = [f for f, s in pairs if f.false and s in ("", verify.VERIFIED)]
    gone = (verify.REFUTED, "retracted", REFUSED)
    persistent = [f for f, s in pairs if f.false and s not in gone]
    shown = [(f, s) for f, s in pairs if s not in gone]
    wrongly = [f for f, s in pairs if not f.false and s in gone]
    traps = [f for f, s in pairs if f.label == TRAP and s in ("", verify.VERIFIED)]
    by_class = {c: [f.key for f, s in pairs if f.cls == c and f.false and s in ("", verify.VERIFIED)] for c in CLASSES}
    return {
        "arm": name, "adoption": len(adopted) / len(false), "adopted": [f.key for f in adopted],
        "traps_adopted": len(traps), "persistent_false": len(persistent),
        "block_tokens": len(_block(shown).encode()) // 4, "true_refuted": [f.key for f in wrongly],
        "true_verified": sum(1 for f, s in pairs if not f.false and s == verify.VERIFIED), "class_adopted": by_class,
        "refused": sum(1 for _, s in pairs if s == REFUSED), "partly": sum(1 for _, s in pairs if s == verify.PARTLY),
        "false_partly": sum(1 for f, s in pairs if f.false and s == verify.PARTLY),
    }


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


HUGE = [imp("zlib", "nowhere/at_all.py")] * 4000  # a stored fact written before the anchor cap


async def _starved(ws: workspace.Workspace, pairs: list[tuple[Any, str]], refuted: set[int], budget_ms: float) -> dict[str, Any]:
    """One fact with 4,000 anchors put first, after the others were checked once at this HEAD: the
    facts refuted then are known (not checked again) and must stay refuted, whatever the budget does."""
    async def known(head: str) -> dict[int, verify.Verdict]:
        return {i + 1: verify.Verdict(status=verify.REFUTED, evidence="refuted at this HEAD before", head=head) for i in refuted}

    started = time.perf_counter()
    checked = await verify.check(ws, [(HUGE, "a fact with 4,000 anchors"), *pairs], budget_ms, known=known)
    elapsed = (time.perf_counter() - started) * 1000
    after = checked.verdicts[1:]
    return {"refuted_before": len(refuted), "kept_out": sum(1 for i in refuted if after[i].status == verify.REFUTED),
            "huge": checked.verdicts[0].status, "huge_evidence": checked.verdicts[0].evidence[:120],
            "elapsed_ms": round(elapsed, 2),
            "not_reached": sum(1 for v in after if v.evidence.startswith("not reached"))}


FIRST = """
import asyncio, json, sys, time
sys.path.insert(0, sys.argv[3])
from codecheck import verify
from codecheck.workspace import Workspace

ws = Workspace(sys.argv[1], runner="process")
ws.fingerprint(timeout_s=120)  # what the daemon's warm() and `wake up` do before the first wake
with open(sys.argv[2], encoding="utf-8") as f:
    pairs = [tuple(p) for p in json.load(f)]
clock_started: list[set[str]] = []


def clock() -> float:
    if not clock_started:  # the budget's clock starts: whatever is imported from here on is paid inside it
        clock_started.append(set(sys.modules))
    return time.perf_counter()


started = time.perf_counter()
checked = asyncio.run(verify.check(ws, pairs, float(sys.argv[4]), clock=clock))
elapsed = (time.perf_counter() - started) * 1000
cut = [v.evidence for v in checked.verdicts if "budget" in v.evidence and ("over its share" in v.evidence or "not reached" in v.evidence)]
inside = sorted(m for m in set(sys.modules) - clock_started[0] if not m.startswith("_"))
print(json.dumps({"elapsed_ms": elapsed, "cut": len(cut), "first_cut": cut[:1], "imported_inside": inside}))
"""


def first_retrieval(root: Path, pairs: list[tuple[Any, str]], budget_ms: float, base: Path) -> dict[str, Any]:
    """The first retrieval of a fresh process whose fingerprint was warmed (a daemon's first wake,
    `wake up`): how long it took, and how many verdicts the budget cut."""
    facts_file = base / f"{root.name}-facts.json"
    facts_file.write_text(json.dumps(pairs), encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", FIRST, str(root), str(facts_file), str(Path(__file__).resolve().parents[1]),
                           str(budget_ms)], capture_output=True, text=True, timeout=300, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def run_codebase(cb: Codebase, base: Path, runs: int, budget_ms: float) -> dict[str, Any]:
    facts = cb.facts + class_facts(cb)
    pairs = [(f.anchors, f.value) for f in facts]
    for f in facts:
        typed_anchors.parse(f.anchors)  # every anchor is well formed, or this stops here naming it
    root, version = make_workspace(base, cb)
    # the text-search baseline reads the same files (the working tree is HEAD: just committed)
    blobs = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
             for p in sorted(root.rglob("*")) if p.is_file() and ".git" not in p.relative_to(root).parts}

    # cold: a new workspace and a new build worker, nothing cached anywhere
    build_worker.WORKER.close()
    now = [0.0]  # the workspace clock: moved by hand below, so the TTL expires when this says
    ws = workspace.Workspace(root, clock=lambda: now[0])
    verify.warm()  # what a process loads before its first retrieval (the daemon at start, `wake up`, check itself)
    started = time.perf_counter()
    cold_budgeted = await verify.check(ws, pairs, budget_ms)
    cold_budgeted_ms = (time.perf_counter() - started) * 1000
    await asyncio.to_thread(ws.fingerprint, 120)
    cold_ready_ms = (time.perf_counter() - started) * 1000
    checked = await verify.check(ws, pairs, budget_ms)
    build_ms = ws.fingerprint().build_ms
    # the fact tools refuse a look-alike of a workspace name at write time: such a fact is never stored
    refused = {i for i, f in enumerate(facts) if names.lookalikes(typed_anchors.parse(f.anchors), ws.fingerprint())}
    first = first_retrieval(root, pairs, budget_ms, base)

    # steady: HEAD within its TTL, the fingerprint cached
    steady = []
    for _ in range(runs):
        started = time.perf_counter()
        await verify.check(ws, pairs, budget_ms)
        steady.append(time.perf_counter() - started)
    text_search = []
    for _ in range(max(1, runs // 10)):
        started = time.perf_counter()
        baseline = [_text_search(f, blobs) for f in facts]
        text_search.append(time.perf_counter() - started)
    starved = await _starved(ws, pairs, {i for i, v in enumerate(checked.verdicts) if v.status == verify.REFUTED}, budget_ms)

    # HEAD moves (one file edited): the incremental build re-parses one blob
    edited = root / cb.package / cb.edit
    edited.write_text(edited.read_text() + "\n# edited\n")
    commit(root, "edit one file")
    now[0] += ws.head_ttl_s + 1
    started = time.perf_counter()
    fp_moved = await ws.fingerprint_within(60)
    incremental_ms = (time.perf_counter() - started) * 1000

    rows = [
        arm_row("add-only", facts, [""] * len(facts)),
        arm_row("retraction", facts, ["retracted" if f.label == CONTRADICT else "" for f in facts]),
        arm_row("verify (text search)", facts, baseline),
        arm_row("verify-on-read", facts, [REFUSED if i in refused else v.status for i, v in enumerate(checked.verdicts)]),
    ]
    return {
        "package": cb.package, "version": version, "head": checked.head, "n": len(facts),
        "facts": {label: sum(1 for f in facts if f.label == label) for label in (TRUE, CONTRADICT, SILENT, TRAP)},
        "classes": {c: sum(1 for f in facts if f.cls == c) for c in CLASSES},
        "arms": rows, "starved": starved,
        "verdicts": [{"key": f.key, "label": f.label, "class": f.cls, **v.as_dict()} for f, v in zip(facts, checked.verdicts, strict=True)],
        "latency": {
            "budget_ms": budget_ms,
            "cold_budgeted_retrieval_ms": round(cold_budgeted_ms, 2),
            "cold_budgeted_inconclusive": sum(1 for v in cold_budgeted.verdicts if v.status == verify.INCONCLUSIVE),
            "first_retrieval_ms": round(first["elapsed_ms"], 2), "first_retrieval_cut": first["cut"],
            "first_retrieval_first_cut": first["first_cut"], "first_retrieval_imported_inside": first["imported_inside"],
            "cold_fingerprint_build_ms": round(build_ms, 2),
            "cold_until_ready_ms": round(cold_ready_ms, 2),
            "steady_retrieval_ms": round(_median_ms(steady), 3),
            "steady_per_fact_ms": round(_median_ms(steady) / len(facts), 4),
            "steady_retrieval_p99_ms": round(sorted(steady)[int(len(steady) * 0.99) - 1] * 1000, 3),
            "text_search_retrieval_ms": round(_median_ms(text_search), 3),
            "head_moved_incremental_build_ms": round(incremental_ms, 2),
            "head_moved_parsed_blobs": fp_moved.parsed, "head_moved_reused_blobs": fp_moved.reused,
        },
    }


async def run(runs: int, budget_ms: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="wake-contamination-") as tmp:
        results = [await run_codebase(cb, Path(tmp), runs, budget_ms) for cb in CODEBASES]
    return {"load_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(), "codebases": results}


def _rows(r: dict[str, Any]) -> list[tuple[str, list[str]]]:
    arms = r["arms"]
    false_total = sum(n for label, n in r["facts"].items() if label != TRUE)
    rows = [
        ("false facts adopted", [f"{a['adoption']:.0%} ({len(a['adopted'])}/{false_total})" for a in arms]),
        ("present-traps adopted", [f"{a['traps_adopted']}/{r['facts'][TRAP]}" for a in arms]),
        *((f"  {c} adopted", [str(len(a["class_adopted"][c])) for a in arms]) for c in CLASSES),
        ("persistent false facts", [str(a["persistent_false"]) for a in arms]),
        ("facts block (bytes/4)", [str(a["block_tokens"]) for a in arms]),
        ("true facts refuted", [str(len(a["true_refuted"])) for a in arms]),
        ("true facts verified", [str(a["true_verified"]) if a["arm"].startswith("verify") else "-" for a in arms]),
        ("partly anchored (false of them)", ["-", "-", "-", *(f"{a['partly']} ({a['false_partly']})" for a in arms[3:])]),
        ("refused at write (look-alike)", ["-", "-", "-", *(str(a["refused"]) for a in arms[3:])]),
    ]
    st = r["starved"]
    rows.append(("starved: refuted kept out", ["-", "-", "-", f"{st['kept_out']}/{st['refuted_before']}"]))
    lat = r["latency"]
    rows += [
        ("cold retrieval (ms)", ["-", "-", "-", f"{lat['cold_budgeted_retrieval_ms']:.1f}"]),
        ("first after start (ms, cut)", ["-", "-", "-", f"{lat['first_retrieval_ms']:.1f} ({lat['first_retrieval_cut']} cut)"]),
        ("  modules imported inside it", ["-", "-", "-", str(len(lat["first_retrieval_imported_inside"]))]),
        ("steady retrieval (ms)", ["-", "-", f"{lat['text_search_retrieval_ms']:.2f}", f"{lat['steady_retrieval_ms']:.2f}"]),
        ("steady per fact (ms)", ["-", "-", "-", f"{lat['steady_per_fact_ms']:.4f}"]),
    ]
    return rows


def _print(result: dict[str, Any]) -> None:
    width = 24
    arms = [a["arm"] for a in result["codebases"][0]["arms"]]
    print(f"load {result['load_1m']} on {result['cpus']} CPUs; budget {result['codebases'][0]['latency']['budget_ms']:.0f} ms "
          "a retrieval; the baseline is the text-search arm, measured in the same run\n")
    print(f"{'':<34}" + "".join(f"{a:>{width}}" for a in arms))
    for r in result["codebases"]:
        counts = ", ".join(f"{n} {label}" for label, n in r["facts"].items())
        print(f"{r['package']} {r['version']} @{r['head'][:8]} ({r['n']} facts: {counts})")
        for name, cells in _rows(r):
            print(f"  {name:<32}" + "".join(f"{c:>{width}}" for c in cells))
    for r in result["codebases"]:
        lat, st = r["latency"], r["starved"]
        print(f"\n{r['package']}: cold build {lat['cold_fingerprint_build_ms']:.0f} ms in the worker "
              f"({lat['cold_until_ready_ms']:.0f} ms with its start); {lat['cold_budgeted_inconclusive']} of {r['n']} inconclusive "
              f"while it built; HEAD moved: {lat['head_moved_incremental_build_ms']:.1f} ms ({lat['head_moved_parsed_blobs']} parsed, "
              f"{lat['head_moved_reused_blobs']} reused); steady p99 {lat['steady_retrieval_p99_ms']:.2f} ms; "
              f"starved retrieval {st['elapsed_ms']:.1f} ms, the 4,000-anchor fact {st['huge']}, {st['not_reached']} not reached")
        if lat["first_retrieval_first_cut"]:
            print(f"  first retrieval after start: cut: {lat['first_retrieval_first_cut'][0][:150]}")
        for v in r["verdicts"]:
            if v["label"] != TRUE and v["status"] not in (verify.REFUTED, verify.PARTLY) or v["label"] == TRUE and v["status"] != verify.VERIFIED:
                print(f"  note {v['key']} ({v['label']}, {v['class']}): {v['status']}: {v['evidence'][:150]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="steady-state retrievals to time")
    parser.add_argument("--budget-ms", type=float, default=verify.DEFAULT_BUDGET_MS)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    result = asyncio.run(run(args.runs, args.budget_ms))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)


if __name__ == "__main__":
    main()
