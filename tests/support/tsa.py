"""A real RFC 3161 timestamp authority on loopback for the tests: `openssl ts -reply` behind a tiny
HTTP server, signing with a TSA certificate from a test CA that this module makes (in the test's
directory). `with serving(make(tmp_path)) as url:` gives the URL to configure as `[anchor] tsa_url`;
`Authority.ca` is the CA certificate (PEM) to configure as `[anchor] ca_file`."""

from __future__ import annotations

import contextlib
import http.server
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support import loopback_http

_TSA_CONF = """\
[tsa]
default_tsa = tsa_config
[tsa_config]
dir = {dir}
serial = $dir/serial
signer_cert = $dir/tsa.pem
signer_key = $dir/tsa.key
signer_digest = sha256
default_policy = 1.2.3.4.1
digests = sha256, sha384, sha512
accuracy = secs:1
ordering = no
tsa_name = no
ess_cert_id_chain = no
ess_cert_id_alg = sha256
"""

_EXT = """\
basicConstraints = critical, CA:false
keyUsage = critical, digitalSignature
extendedKeyUsage = critical, timeStamping
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""


@dataclass(frozen=True)
class Authority:
    dir: Path
    ca: Path  # the CA certificate (PEM): the root a verifier trusts
    config: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make(where: Path) -> Authority:
    """A test CA and a TSA certificate it signed (EC P-256 keys), with openssl's TSA config."""
    d = where / "tsa"
    d.mkdir(parents=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "3650", "-subj", "/CN=wake test CA", "-addext", "basicConstraints=critical,CA:true",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "tsa.key", "-out", "tsa.csr",
             "-subj", "/CN=wake test TSA", cwd=d)
    (d / "tsa.ext").write_text(_EXT, encoding="utf-8")
    _openssl("x509", "-req", "-in", "tsa.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "tsa.pem", "-days", "3650",
             "-extfile", "tsa.ext", cwd=d)
    (d / "serial").write_text("01\n", encoding="utf-8")
    (d / "tsa.cnf").write_text(_TSA_CONF.format(dir=d), encoding="utf-8")
    return Authority(dir=d, ca=d / "ca.pem", config=d / "tsa.cnf")


@dataclass
class Served:
    url: str
    requests: int = 0


@contextlib.contextmanager
def serving(authority: Authority) -> Iterator[Served]:
    """The authority over HTTP on 127.0.0.1: each POST's body is a query piped to `openssl ts -reply`."""
    lock = threading.Lock()  # openssl's serial file: one reply at a time

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the http.server API)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock, tempfile.TemporaryDirectory(dir=authority.dir) as tmp:
                query, reply = Path(tmp) / "q.tsq", Path(tmp) / "r.tsr"
                query.write_bytes(body)
                done = subprocess.run(["openssl", "ts", "-reply", "-config", str(authority.config), "-queryfile", str(query), "-out", str(reply)],
                                      capture_output=True, timeout=60)
                answer = reply.read_bytes() if done.returncode == 0 and reply.is_file() else b""
                served.requests += 1
            self.send_response(200 if answer else 500)
            self.send_header("Content-Type", "application/timestamp-reply")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the http.server API)
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served = Served(url=f"http://127.0.0.1:{server.server_address[1]}/tsa")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": loopback_http.SHUTDOWN_POLL_S}, name="test-tsa", daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
