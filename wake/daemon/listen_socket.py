"""The listening socket of an HTTP endpoint wake serves (the inbox, the console, `wake mcp serve`):
bound and listening before anything names its address, so a client that reads the address cannot
connect too early; port 0 picks a free one."""

from __future__ import annotations

import socket

from wake.config import parse_listen
from wake.errors import ListenError


def bind(listen: str, what: str) -> socket.socket:
    """The listening socket for `listen` ("HOST:PORT"); `what` names the endpoint in the one line
    a bad or busy address gives. Raises ListenError (exit 78)."""
    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        raise ListenError(f"bad {what} listen address: {exc}") from None
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot serve the {what} on {listen}: {exc.strerror or exc}") from exc
    sock.setblocking(False)
    return sock


def url_of(sock: socket.socket) -> str:
    """`http://host:port` of a bound socket, an IPv6 host in brackets."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
