"""The console's routes (docs/console.md): pages rendered on the server from `wake.console.data`,
actions through `wake.console.actions`, each request checked by `wake.console.guard`.

Starlette: a small ASGI toolkit (routing, forms, cookies, streaming responses) and nothing more,
served by uvicorn in the daemon's own event loop. The live timeline is a server-sent event stream
(`/events`) that the page's one short script swaps into the table.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from wake import clock, logs
from wake.config import Config
from wake.console import actions, data
from wake.console.guard import CSRF_FIELD, SESSION_COOKIE, Guard, Refusal
from wake.errors import InvalidInput, NotFound, WakeError
from wake.stores import Stores

log = logs.get("wake.console")

# every page: never framed by another site, no referrer with ids leaves it
PAGE_HEADERS = {"X-Frame-Options": "DENY", "Content-Security-Policy": "frame-ancestors 'none'", "Referrer-Policy": "same-origin"}
BY_COOKIE = "wake_console_by"  # remembers who last acted from this browser, to fill in the next form
Handler = Callable[[Request], Awaitable[Response]]


@dataclass(kw_only=True)
class Console:
    """What the application serves from: the config (the daemon's current one), the stores, the
    guard, and the event that ends its live streams when the server stops."""

    config: Callable[[], Config]
    stores: Stores
    guard: Guard
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    now: Callable[[], dt.datetime] = clock.now


def _money(value: Any) -> str:
    return f"${Decimal(value or 0):.4f}"


def _when(value: dt.datetime | None) -> str:
    return f"{value.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S}" if value else "-"


def _duration(row: Any) -> str:
    if not row["finished_at"]:
        return "running"
    return f"{(row['finished_at'] - row['started_at']).total_seconds() * 1000:.0f} ms"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("wake.console", "templates"), autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters.update(money=_money, when=_when, duration=_duration, short=lambda v, n=8: str(v)[:n] if v else "-")
    return env


class Pages:
    """The handlers, over one `Console`."""

    def __init__(self, console: Console) -> None:
        self.c = console
        self.env = environment()

    # -- what every request needs -------------------------------------------------------------------

    def _session(self, request: Request) -> tuple[str | None, bool]:
        return self.c.guard.session_id(request.cookies.get(SESSION_COOKIE)), self.c.guard.bearer_ok(request.headers.get("authorization"))

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        sid, bearer = self._session(request)
        guard = self.c.guard
        context.update(
            request=request, guard=guard, csrf=guard.csrf_for(sid) if sid else "", csrf_field=CSRF_FIELD, signed_in=sid is not None or bearer,
            can_act=not guard.read_only and guard.token is not None and (sid is not None or bearer), by=request.cookies.get(BY_COOKIE, ""),
            done=request.query_params.get("done"), error=request.query_params.get("error"), now=self.c.now(),
        )
        return HTMLResponse(self.env.get_template(name).render(**context), status_code=status, headers=PAGE_HEADERS)

    def refuse(self, request: Request, refusal: Refusal) -> HTMLResponse:
        log.warning("console.refused", path=request.url.path, client=_client(request), why=refusal.why)
        return self.render(request, "error.html", status=refusal.status, message=refusal.why)

    def readable(self, handler: Handler) -> Handler:
        async def checked(request: Request) -> Response:
            sid, bearer = self._session(request)
            if not self.c.guard.may_read(sid=sid, bearer=bearer):
                return RedirectResponse(f"/login?next={urllib.parse.quote(str(request.url.path))}", status_code=303)
            try:
                return await handler(request)
            except InvalidInput as exc:
                return self.render(request, "error.html", status=400, message=str(exc))
            except NotFound as exc:
                return self.render(request, "error.html", status=404, message=str(exc))

        return checked

    # -- pages ----------------------------------------------------------------------------------------

    async def timeline(self, request: Request) -> Response:
        config = self.c.config()
        filters = data.Filters.parse(request.query_params, config)
        async with self.c.stores.pg_conn() as conn:
            t = await data.timeline(conn, config, filters, self.c.now())
        return self.render(request, "timeline.html", t=t)

    async def events(self, request: Request) -> Response:
        """The live timeline: the table's rows again whenever a wake appears or changes status."""
        config = self.c.config()
        filters = data.Filters.parse(request.query_params, config)
        rows_template = self.env.get_template("_rows.html")

        async def stream() -> AsyncIterator[str]:
            last: tuple[tuple[str, str], ...] | None = None
            yield f"retry: {int(config.console.live_poll_s * 1000) + 1000}\n\n"
            while not self.c.stop.is_set():
                async with self.c.stores.pg_conn() as conn:
                    rows = await data.recent(conn, filters)
                if (seen := data.fingerprint(rows)) != last:
                    last = seen
                    html = rows_template.render(rows=rows)
                    yield "event: wakes\n" + "".join(f"data: {line}\n" for line in html.splitlines()) + "\n"
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.c.stop.wait(), config.console.live_poll_s)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def wake(self, request: Request) -> Response:
        async with self.c.stores.pg_conn() as conn:
            wake_id = await data.resolve(conn, request.path_params["wake_id"])
            if str(wake_id) != request.path_params["wake_id"]:
                return RedirectResponse(f"/wakes/{wake_id}", status_code=303)
            page = await data.wake_page(conn, wake_id, self.c.now())
        return self.render(request, "wake.html", w=page, row=page.row)

    async def agent(self, request: Request) -> Response:
        config = self.c.config()
        async with self.c.stores.pg_conn() as conn:
            page = await data.agent_page(conn, config, request.path_params["agent_id"], self.c.now())
        return self.render(request, "agent.html", a=page)

    # -- signing in -----------------------------------------------------------------------------------

    async def login_form(self, request: Request) -> Response:
        return self.render(request, "login.html", next=_local(request.query_params.get("next")))

    async def login(self, request: Request) -> Response:
        form = await request.form()
        target = _local(str(form.get("next") or "/"))
        if self.c.guard.token is None:
            return self.refuse(request, Refusal(403, f"no console token is set ({self.c.guard.token_source}): nothing to log in with"))
        if not self.c.guard.token_matches(str(form.get("token") or "")):
            return self.refuse(request, Refusal(403, "that is not the console token"))
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(SESSION_COOKIE, self.c.guard.new_session(), httponly=True, samesite="strict", path="/")
        log.info("console.login", client=_client(request))
        return response

    async def logout(self, request: Request) -> Response:
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response

    # -- actions --------------------------------------------------------------------------------------

    async def act(self, request: Request) -> Response:
        form = await request.form()
        sid, bearer = self._session(request)
        refusal = self.c.guard.may_act(
            sid=sid, bearer=bearer, csrf=str(form.get(CSRF_FIELD) or "") or None, origin=request.headers.get("origin"),
            host=request.headers.get("host"),
        )
        if refusal is not None:
            return self.refuse(request, refusal)
        agent_id, action = request.path_params["agent_id"], request.path_params["action"]
        fields = {k: str(v) for k, v in form.items() if isinstance(v, str)}
        try:
            by = actions.who(fields.get("by"))
            done = await self._do(action, agent_id, fields, by)
        except WakeError as exc:
            status = 404 if isinstance(exc, NotFound) else 400
            log.info("console.action_refused", action=action, agent=agent_id, client=_client(request), error=str(exc))
            return self.render(request, "error.html", status=status, message=str(exc), back=f"/agents/{urllib.parse.quote(agent_id)}")
        log.info("console.action", action=action, agent=agent_id, by=by, client=_client(request), done=done.message)
        where = f"/wakes/{done.wake_id}" if done.wake_id else f"/agents/{urllib.parse.quote(agent_id)}"
        response = RedirectResponse(f"{where}?{urllib.parse.urlencode({'done': done.message})}", status_code=303)
        response.set_cookie(BY_COOKIE, by, httponly=True, samesite="strict", path="/", max_age=365 * 86400)
        return response

    async def _do(self, action: str, agent_id: str, f: dict[str, str], by: str) -> actions.Done:
        config, at = self.c.config(), self.c.now()
        if agent_id not in config.agents:
            raise NotFound(f"no agent {agent_id[:60]!r} is configured")
        if action == "trigger":
            return await actions.trigger(config, agent_id, f.get("tier"))
        why = actions.note(f.get("note"))
        async with self.c.stores.pg_conn() as conn:
            if action in ("ack", "revert"):
                finding = _finding_id(f.get("finding"))
                if action == "ack":
                    return await actions.ack(conn, agent_id, finding, by=by, why=why, at=at)
                return await actions.revert(conn, config, agent_id, finding, by=by, why=why, at=at)
            if action == "pause":
                return await actions.pause(conn, config, agent_id, tier=f.get("tier"), until_text=f.get("until"), reason=why, by=by, at=at)
            if action == "resume":
                return await actions.resume(conn, config, agent_id, tier=f.get("tier"))
            if action == "accept":
                return await actions.accept(conn, config, agent_id, f.get("kind", ""), f.get("finding", ""), by=by, why=why, at=at)
        raise NotFound(f"no action {action[:40]!r}")

    async def health(self, request: Request) -> Response:
        return PlainTextResponse("ok\n")


def _finding_id(text: str | None) -> int:
    value = (text or "").strip().lstrip("#")
    if not value.isdigit() or int(value) < 1:
        raise InvalidInput(f"a finding is named by its number, got {(text or '')[:20]!r}")
    return int(value)


def _local(target: str | None) -> str:
    """A redirect target on this console only (never another site)."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target


def _client(request: Request) -> str:
    return f"{request.client.host}:{request.client.port}" if request.client else "-"


def build(console: Console) -> Starlette:
    """The ASGI application."""
    p = Pages(console)
    return Starlette(routes=[
        Route("/", p.readable(p.timeline)),
        Route("/events", p.readable(p.events)),
        Route("/wakes/{wake_id}", p.readable(p.wake)),
        Route("/agents/{agent_id}", p.readable(p.agent)),
        Route("/agents/{agent_id}/{action}", p.act, methods=["POST"]),
        Route("/login", p.login_form),
        Route("/login", p.login, methods=["POST"]),
        Route("/logout", p.logout, methods=["POST"]),
        Route("/healthz", p.health),
    ])

