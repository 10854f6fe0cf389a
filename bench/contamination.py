"""Memory contamination on a codebase nobody here wrote: add-only, retraction, verify-on-read.

    python bench/contamination.py [--runs 200] [--budget-ms 50] [--json]

The workspace is the installed source of httpx (a dependency of this project) at the version
installed, copied into a temporary git repository and committed, with a pyproject.toml rebuilt
from the distribution's own metadata (Requires-Dist and Provides-Extra), so the verifier reads
real blobs of a real git HEAD.

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
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pygit2
from packaging.requirements import Requirement

from codecheck import anchors, build_worker, verify, workspace

TRUE, CONTRADICT, SILENT, TRAP = "TRUE", "CONTRADICT", "SILENT", "PRESENT-TRAP"


@dataclass(frozen=True)
class Fact:
    key: str
    value: str
    label: str
    anchors: list[dict[str, Any]]

    @property
    def false(self) -> bool:
        return self.label != TRUE


def imp(ref: str, where: str | None = None) -> dict[str, Any]:
    return {"type": "import", "ref": ref, **({"where": where} if where else {})}


def sym(ref: str) -> dict[str, Any]:
    return {"type": "symbol", "ref": ref}


def env(ref: str, where: str | None = None) -> dict[str, Any]:
    return {"type": "env", "ref": ref, **({"where": where} if where else {})}


def pkg(ref: str) -> dict[str, Any]:
    return {"type": "package", "ref": ref}


def file(ref: str) -> dict[str, Any]:
    return {"type": "file", "ref": ref}


def absent(anchor: dict[str, Any]) -> dict[str, Any]:
    return {"type": "absent", "anchor": anchor}


FACTS: list[Fact] = [
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
    lines += [f"{extra} = {json.dumps(specs)}" for extra, specs in optional.items()]
    return "\n".join(lines) + "\n"


def make_workspace(base: Path, package: str = "httpx") -> tuple[Path, str]:
    """A git repository holding the installed source of `package` and its rebuilt pyproject.toml."""
    dist = importlib.metadata.distribution(package)
    source = Path(str(dist.locate_file(package)))
    root = base / f"{package}-{dist.version}"
    shutil.copytree(source, root / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (root / "pyproject.toml").write_text(_pyproject(dist), encoding="utf-8")
    commit(root, f"{package} {dist.version} as installed")
    return root, dist.version


def commit(root: Path, message: str) -> str:
    repo = pygit2.init_repository(str(root)) if not (root / ".git").exists() else pygit2.Repository(str(root))
    repo.index.add_all()
    repo.index.write()
    tree = repo.index.write_tree()
    sig = pygit2.Signature("bench", "bench@localhost", 1_700_000_000, 0)
    parents = [] if repo.head_is_unborn else [repo.head.target]
    return str(repo.create_commit("HEAD", sig, sig, message, tree, parents))


# -- the arms -----------------------------------------------------------------------------------


def _text_search(fact: Fact, blobs: dict[str, str]) -> str:
    """The untyped baseline: each anchor's token anywhere in the text at HEAD."""
    corpus = "\n".join(blobs.values())
    for raw in fact.anchors:
        negated = raw["type"] == "absent"
        inner = raw["anchor"] if negated else raw
        token = inner["ref"].rsplit(".", 1)[-1] if inner["type"] == "symbol" else inner["ref"]
        present = inner["ref"] in blobs if inner["type"] == "file" else token in corpus
        if present == negated:
            return verify.REFUTED
    return verify.VERIFIED


def _block(shown: list[tuple[Fact, str]]) -> str:
    lines = [f"- {f.key}: {f.value}" + ("" if status in ("", verify.VERIFIED) else f" [{status}]") for f, status in shown]
    return "Facts:\n" + "\n".join(lines) + "\n"


def arm_row(name: str, statuses: list[str]) -> dict[str, Any]:
    """Figures for one arm from each fact's status at arrival ('' = shown unchecked, 'retracted')."""
    false = [f for f in FACTS if f.false]
    adopted = [f for f, s in zip(FACTS, statuses, strict=True) if f.false and s in ("", verify.VERIFIED)]
    persistent = [f for f, s in zip(FACTS, statuses, strict=True) if f.false and s not in (verify.REFUTED, "retracted")]
    shown = [(f, s) for f, s in zip(FACTS, statuses, strict=True) if s not in (verify.REFUTED, "retracted")]
    wrongly = [f for f, s in zip(FACTS, statuses, strict=True) if not f.false and s in (verify.REFUTED, "retracted")]
    traps = [f for f, s in zip(FACTS, statuses, strict=True) if f.label == TRAP and s in ("", verify.VERIFIED)]
    return {
        "arm": name, "adoption": len(adopted) / len(false), "adopted": [f.key for f in adopted],
        "traps_adopted": len(traps), "persistent_false": len(persistent),
        "block_tokens": len(_block(shown).encode()) // 4, "true_refuted": [f.key for f in wrongly],
        "true_verified": sum(1 for f, s in zip(FACTS, statuses, strict=True) if not f.false and s == verify.VERIFIED),
    }


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def run(runs: int, budget_ms: float) -> dict[str, Any]:
    pairs = [(f.anchors, f.value) for f in FACTS]
    for f in FACTS:
        anchors.parse(f.anchors)  # every anchor is well formed, or this stops here naming it
    with tempfile.TemporaryDirectory(prefix="wake-contamination-") as tmp:
        root, version = make_workspace(Path(tmp))
        # the text-search baseline reads the same files (the working tree is HEAD: just committed)
        blobs = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
                 for p in sorted(root.rglob("*")) if p.is_file() and ".git" not in p.relative_to(root).parts}

        # cold: a new workspace and a new build worker, nothing cached anywhere
        build_worker.WORKER.close()
        now = [0.0]  # the workspace clock: moved by hand below, so the TTL expires when this says
        ws = workspace.Workspace(root, clock=lambda: now[0])
        started = time.perf_counter()
        cold_budgeted = await verify.check(ws, pairs, budget_ms)
        cold_budgeted_ms = (time.perf_counter() - started) * 1000
        await asyncio.to_thread(ws.fingerprint, 120)
        cold_ready_ms = (time.perf_counter() - started) * 1000
        checked = await verify.check(ws, pairs, budget_ms)
        build_ms = ws.fingerprint().build_ms

        # steady: HEAD within its TTL, the fingerprint cached
        steady = []
        for _ in range(runs):
            started = time.perf_counter()
            await verify.check(ws, pairs, budget_ms)
            steady.append(time.perf_counter() - started)
        text_search = []
        for _ in range(max(1, runs // 10)):
            started = time.perf_counter()
            baseline = [_text_search(f, blobs) for f in FACTS]
            text_search.append(time.perf_counter() - started)

        # HEAD moves (one file edited): the incremental build re-parses one blob
        (root / "httpx" / "_utils.py").write_text((root / "httpx" / "_utils.py").read_text() + "\n# edited\n")
        commit(root, "edit one file")
        now[0] += ws.head_ttl_s + 1
        started = time.perf_counter()
        fp_moved = await ws.fingerprint_within(60)
        incremental_ms = (time.perf_counter() - started) * 1000

    rows = [
        arm_row("add-only", [""] * len(FACTS)),
        arm_row("retraction", ["retracted" if f.label == CONTRADICT else "" for f in FACTS]),
        arm_row("verify (text search)", baseline),
        arm_row("verify-on-read", [v.status for v in checked.verdicts]),
    ]
    per_fact = _median_ms(steady) / len(FACTS)
    return {
        "httpx": version, "head": checked.head, "facts": {label: sum(1 for f in FACTS if f.label == label)
                                                          for label in (TRUE, CONTRADICT, SILENT, TRAP)},
        "arms": rows,
        "verdicts": [{"key": f.key, "label": f.label, **v.as_dict()} for f, v in zip(FACTS, checked.verdicts, strict=True)],
        "latency": {
            "budget_ms": budget_ms,
            "cold_budgeted_retrieval_ms": round(cold_budgeted_ms, 2),
            "cold_budgeted_inconclusive": sum(1 for v in cold_budgeted.verdicts if v.status == verify.INCONCLUSIVE),
            "cold_fingerprint_build_ms": round(build_ms, 2),
            "cold_until_ready_ms": round(cold_ready_ms, 2),
            "steady_retrieval_ms": round(_median_ms(steady), 3),
            "steady_per_fact_ms": round(per_fact, 4),
            "steady_retrieval_p99_ms": round(sorted(steady)[int(len(steady) * 0.99) - 1] * 1000, 3),
            "text_search_retrieval_ms": round(_median_ms(text_search), 3),
            "head_moved_incremental_build_ms": round(incremental_ms, 2),
            "head_moved_parsed_blobs": fp_moved.parsed, "head_moved_reused_blobs": fp_moved.reused,
        },
    }


def _print(result: dict[str, Any]) -> None:
    counts = ", ".join(f"{n} {label}" for label, n in result["facts"].items())
    print(f"httpx {result['httpx']} at HEAD {result['head'][:12]}: {len(FACTS)} facts ({counts})\n")
    arms = result["arms"]
    width = 24
    print(f"{'':<30}" + "".join(f"{r['arm']:>{width}}" for r in arms))
    false_total = sum(1 for f in FACTS if f.false)
    table = [
        ("false facts adopted", [f"{r['adoption']:.0%} ({len(r['adopted'])}/{false_total})" for r in arms]),
        ("present-traps adopted", [f"{r['traps_adopted']}/{result['facts'][TRAP]}" for r in arms]),
        ("persistent false facts", [str(r["persistent_false"]) for r in arms]),
        ("facts block (bytes/4)", [str(r["block_tokens"]) for r in arms]),
        ("true facts refuted", [str(len(r["true_refuted"])) for r in arms]),
        ("true facts verified", [str(r["true_verified"]) if r["arm"].startswith("verify") else "-" for r in arms]),
    ]
    for name, cells in table:
        print(f"{name:<30}" + "".join(f"{c:>{width}}" for c in cells))
    lat = result["latency"]
    print(f"\nlatency (budget {lat['budget_ms']:.0f} ms per retrieval, {len(FACTS)} facts a retrieval)")
    print(f"  cold, budgeted retrieval:        {lat['cold_budgeted_retrieval_ms']:8.2f} ms "
          f"({lat['cold_budgeted_inconclusive']} of {len(FACTS)} inconclusive: the fingerprint was still building)")
    print(f"  cold fingerprint build:          {lat['cold_fingerprint_build_ms']:8.2f} ms (in the worker, from nothing)")
    print(f"  cold, until the fingerprint was ready: {lat['cold_until_ready_ms']:8.2f} ms (worker start included)")
    print(f"  HEAD moved, incremental build:   {lat['head_moved_incremental_build_ms']:8.2f} ms "
          f"({lat['head_moved_parsed_blobs']} blob parsed, {lat['head_moved_reused_blobs']} reused)")
    print(f"  steady retrieval (cache hit):    {lat['steady_retrieval_ms']:8.3f} ms median, "
          f"{lat['steady_retrieval_p99_ms']:.3f} ms p99")
    print(f"  steady per fact:                 {lat['steady_per_fact_ms']:8.4f} ms")
    print(f"  baseline text search retrieval:  {lat['text_search_retrieval_ms']:8.3f} ms (same run)")
    fooled = next(r for r in arms if r["arm"] == "verify (text search)")["adopted"]
    print(f"\ntext search adopted: {', '.join(fooled) or 'none'}")
    for v in result["verdicts"]:
        if v["label"] != TRUE and v["status"] != verify.REFUTED or v["label"] == TRUE and v["status"] != verify.VERIFIED:
            print(f"  note {v['key']} ({v['label']}): {v['status']}: {v['evidence'][:160]}")


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
