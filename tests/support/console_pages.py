"""The console from a test: its token as a systemd credential, the CSRF token of a logged-in page,
a form body of generated text, the verdict on a generated request, and a tool with one flow label."""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
import pytest

from surfaces.registry import tool

_NONE: dict[str, Any] = {"type": "object", "properties": {}}


def credential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, token: str) -> None:
    """`token` as the console's token credential (CREDENTIALS_DIRECTORY), no WAKE_CONSOLE_TOKEN."""
    credentials = tmp_path / "credentials"
    credentials.mkdir(exist_ok=True)
    (credentials / "wake_console_token").write_text(token + "\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(credentials))
    monkeypatch.delenv("WAKE_CONSOLE_TOKEN", raising=False)


async def csrf_of(http: httpx.AsyncClient, path: str = "/agents/demo") -> str:
    """The CSRF token in the page at `path`, which a logged-in client must be shown."""
    page = await http.get(path)
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    assert csrf is not None, page.text[:500]
    return csrf.group(1)


def form_body(data: dict[str, str]) -> bytes:
    """`data` form-encoded, lone surrogates and all (generated text has them)."""
    return urllib.parse.urlencode({k: v.encode("utf-8", "surrogatepass") for k, v in data.items()}).encode()


def with_query(path: str, query: dict[str, str]) -> str:
    """`path` with `query` form-encoded after it, lone surrogates and all (httpx's `params` cannot carry them)."""
    return f"{path}?{form_body(query).decode()}" if query else path


def judge(statuses: list[int], status: int, text: str, before: object, after: object) -> None:
    """A generated request's answer: never a 5xx, and nothing written unless it was answered 303."""
    statuses.append(status)
    assert status < 500, text[:300]
    if status != 303:
        assert after == before, (status, text[:300])


def labelled(name: str, label: str) -> Any:
    """A wake tool `name` that carries the one flow label `label`."""
    @tool(name=name, description=f"The {label} tool.", parameters=_NONE, surfaces={"wake"}, flows={label})
    async def handler(ctx: Any) -> str:
        return name

    return handler
