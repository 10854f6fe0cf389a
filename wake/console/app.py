"""The console's routes (docs/console.md): pages rendered on the server from `wake.console.data`
through Starlette's `Jinja2Templates`, one `Route` per action through `wake.console.form_actions`, every
`WakeError` a route raises answered by one exception handler, each request checked by
`wake.console.guard`.

Starlette: a small ASGI toolkit (routing, forms, cookies, streaming responses) and nothing more,
served by uvicorn in the daemon's own event loop. The live timeline is a server-sent event stream
(`/events`) that the page's one short script swaps into the table.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import hmac
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from secrets import token_bytes
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Receive, Scope, Send

from ledgers import introspection
from wake import clock, logs
from wake.config import Config, unstorable
from wake.console import data, form_actions, render
from wake.console.guard import CSRF_FIELD, SESSION_COOKIE, Guard, Refusal
from wake.errors import InvalidInput, NotFound, WakeError
from wake.stores import Stores

log = logs.get("wake.console")

# every page: never framed by another site, no referrer with ids leaves it
PAGE_HEADERS = {"X-Frame-Options": "DENY", "Content-Security-Policy": "frame-ancestors 'none'", "Referrer-Policy": "same-origin"}
BY_COOKIE = "wake_console_by"  # who last acted from this browser, for the next form (percent-encoded: a header is latin-1)
DONE_MAC = "done_mac"  # the `?done=` banner's MAC: the console shows only messages it chose itself
MAX_ID = 2**63 - 1  # a finding's and an approval's number is a bigint
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


@dataclass(frozen=True, kw_only=True)
class Act:
    """One action's request once its route let it through: the action, the configured agent of the
    URL, the form's fields, who acts (its `by`), when, and the config it acts under."""

    action: str
    config: Config
    agent_id: str
    form: dict[str, str]
    by: str
    at: dt.datetime

    def note(self) -> str | None:
        """The form's note, checked (at most `form_actions.NOTE_MAX` characters), or None."""
        return form_actions.note(self.form.get("note"))


def _money(value: Any) -> str:
    return f"${Decimal(value or 0):.4f}"


def _when(value: dt.datetime | None) -> str:
    return f"{value.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S}" if value else "-"


def _duration(row: introspection.WakeSummary | Mapping[str, Any]) -> str:
    """A listed row's (a record) or the wake page's row's (its columns) time from start to finish."""
    started, finished = (row.started_at, row.finished_at) if isinstance(row, introspection.WakeSummary) else (row["started_at"], row["finished_at"])
    if not finished:
        return "running"
    return f"{(finished - started).total_seconds() * 1000:.0f} ms"


def environment() -> jinja2.Environment:
    """The templates' environment (`Jinja2Templates` serves from it): autoescaped, strict about
    undefined names, with the console's filters."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("wake.console", "templates"), autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters.update(money=_money, when=_when, duration=_duration, short=lambda v, n=8: str(v)[:n] if v else "-")
    env.filters.update(render.FILTERS)  # stored text: `wake.console.render`
    return env


class Pages:
    """The handlers, over one `Console`: pages through `Jinja2Templates`, one route per action, and
    every `WakeError` a route raises answered in one place (`failed`, the app's exception handler)."""

    def __init__(self, console: Console) -> None:
        self.c = console
        self.templates = Jinja2Templates(env=environment(), context_processors=[self._context])
        self._flash_key = token_bytes(32)  # this process's: a banner link from elsewhere shows nothing

    # -- what every request needs -------------------------------------------------------------------

    def _now_s(self) -> float:
        return self.c.now().timestamp()

    def _session(self, request: Request) -> tuple[str | None, bool]:
        guard = self.c.guard
        return guard.session_id(request.cookies.get(SESSION_COOKIE), self._now_s()), guard.bearer_ok(request.headers.get("authorization"))

    def _flash_mac(self, message: str) -> str:
        return hmac.new(self._flash_key, message.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()

    def _done(self, request: Request) -> str | None:
        """The `?done=` banner, only when this console put it there (its MAC is this process's)."""
        message, mac = request.query_params.get("done"), request.query_params.get(DONE_MAC) or ""
        if not message or not mac.isascii() or not hmac.compare_digest(mac, self._flash_mac(message)):
            return None
        return message

    def _context(self, request: Request) -> dict[str, object]:
        """What every page's template sees besides its own values (the templates' context processor)."""
        sid, bearer = self._session(request)
        guard = self.c.guard
        return dict(
            guard=guard, csrf=guard.csrf_for(sid) if sid else "", csrf_field=CSRF_FIELD, signed_in=sid is not None or bearer,
            can_act=not guard.read_only and guard.token is not None and (sid is not None or bearer),
            by=urllib.parse.unquote(request.cookies.get(BY_COOKIE, "")),
            done=self._done(request), error=None, now=self.c.now(),
        )

    def page(self, request: Request, name: str, status: int = 200, **context: object) -> Response:
        return self.templates.TemplateResponse(request, name, context, status_code=status, headers=PAGE_HEADERS)

    def refuse(self, request: Request, refusal: Refusal) -> Response:
        log.warning("console.refused", path=request.url.path, client=_client(request), why=refusal.why)
        return self.page(request, "error.html", status=refusal.status, message=refusal.why)

    async def failed(self, request: Request, exc: Exception) -> Response:
        """Every `WakeError` a route raises: NotFound a 404, any other a 400, on the error page. After
        an action (`request.state.action`) it is logged and links back to the agent's page; on a page
        only NotFound and InvalidInput are the reader's doing, any other is a fault (a 500)."""
        status = 404 if isinstance(exc, NotFound) else 400
        action: str | None = getattr(request.state, "action", None)
        if action is None:
            if not isinstance(exc, NotFound | InvalidInput):
                raise exc
            return self.page(request, "error.html", status=status, message=str(exc))
        agent_id = request.path_params["agent_id"]
        log.info("console.action_refused", action=action, agent=agent_id, client=_client(request), error=str(exc))
        return self.page(request, "error.html", status=status, message=str(exc), back=f"/agents/{urllib.parse.quote(agent_id)}")

    def readable(self, handler: Handler) -> Handler:
        async def checked(request: Request) -> Response:
            sid, bearer = self._session(request)
            if not self.c.guard.may_read(sid=sid, bearer=bearer):
                return RedirectResponse(f"/login?next={urllib.parse.quote(str(request.url.path))}", status_code=303)
            return await handler(request)

        return checked

    # -- pages ----------------------------------------------------------------------------------------

    async def timeline(self, request: Request) -> Response:
        config = self.c.config()
        filters = data.Filters.parse(request.query_params, config)
        async with self.c.stores.pg_conn() as conn:
            t = await data.timeline(conn, config, filters, self.c.now())
        return self.page(request, "timeline.html", t=t)

    async def events(self, request: Request) -> Response:
        """The live timeline: the table's rows again whenever a wake appears or changes status."""
        config = self.c.config()
        filters = data.Filters.parse(request.query_params, config)
        rows_template = self.templates.get_template("_rows.html")

        async def stream() -> AsyncIterator[str]:
            last: tuple[tuple[str, str, str], ...] | None = None
            yield f"retry: {int(config.console.live_poll_s * 1000) + 1000}\n\n"
            while not self.c.stop.is_set():
                async with self.c.stores.pg_conn() as conn:
                    rows = await data.recent(conn, filters)
                    marks = await data.incident_marks(conn, rows)
                if (seen := data.fingerprint(rows, marks)) != last:
                    last = seen
                    html = rows_template.render(rows=rows, marks=marks)
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
        return self.page(request, "wake.html", w=page, row=page.row)

    async def agent(self, request: Request) -> Response:
        config = self.c.config()
        async with self.c.stores.pg_conn() as conn:
            page = await data.agent_page(conn, config, request.path_params["agent_id"], self.c.now())
        return self.page(request, "agent.html", a=page)

    async def replays(self, request: Request) -> Response:
        async with self.c.stores.pg_conn() as conn:
            page = await data.replays_page(conn, self.c.config(), request.path_params["agent_id"])
        return self.page(request, "replays.html", p=page)

    async def replay(self, request: Request) -> Response:
        """One of the agent's replays (a full id, or a unique prefix among its replays: redirected to the full id)."""
        agent_id, text = request.path_params["agent_id"], request.path_params["replay_id"]
        async with self.c.stores.pg_conn() as conn:
            replay_id = await data.resolve_replay(conn, agent_id, text)
            if str(replay_id) != text:
                return RedirectResponse(f"/agents/{urllib.parse.quote(agent_id, safe='')}/replays/{replay_id}", status_code=303)
            page = await data.replay_page(conn, self.c.config(), agent_id, replay_id)
        return self.page(request, "replay.html", r=page, row=page.row)

    async def eval_page(self, request: Request) -> Response:
        async with self.c.stores.pg_conn() as conn:
            found = await data.eval_of(conn, self.c.config(), request.path_params["agent_id"], request.path_params["eval_id"])
        return self.page(request, "eval.html", e=found, chart=data.can_chart())

    async def eval_chart(self, request: Request) -> Response:
        """The scorecard's chart, drawn from the stored row (`evaluate.chart_png`, as `wake eval --chart` draws it)."""
        from wake.replay import evaluate

        async with self.c.stores.pg_conn() as conn:
            found = await data.eval_of(conn, self.c.config(), request.path_params["agent_id"], request.path_params["eval_id"])
        if not data.can_chart():
            raise NotFound("no chart: this console has no matplotlib (pip install 'wake[eval]')")
        png = await asyncio.to_thread(evaluate.chart_png, found.scorecard)
        return Response(png, media_type="image/png", headers={**PAGE_HEADERS, "Cache-Control": "private, max-age=3600"})

    # -- signing in -----------------------------------------------------------------------------------

    async def login_form(self, request: Request) -> Response:
        return self.page(request, "login.html", next=_local(request.query_params.get("next")))

    async def login(self, request: Request) -> Response:
        guard, now_s, client = self.c.guard, self._now_s(), _client_host(request)
        wait_s = guard.throttle.locked(client, now_s)
        if wait_s > 0:  # the right token too: a guesser learns nothing while locked out
            log.warning("console.login_throttled", client=client, wait_s=round(wait_s))
            return self.refuse(request, Refusal(429, f"too many failed logins from {client}: try again in {wait_s:.0f} s"))
        form = await request.form()
        target = _local(str(form.get("next") or "/"))
        if guard.token is None:
            return self.refuse(request, Refusal(403, f"no console token is set ({guard.token_source}): nothing to log in with"))
        if not guard.token_matches(str(form.get("token") or "")):
            failures = guard.throttle.failed(client, now_s)
            log.warning("console.login_failed", client=client, failures=failures)
            return self.refuse(request, Refusal(403, "that is not the console token"))
        guard.throttle.succeeded(client)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(SESSION_COOKIE, guard.new_session(now_s), httponly=True, samesite="strict", path="/",
                            max_age=int(guard.sessions.ttl_s))
        log.info("console.login", client=_client(request))
        return response

    async def logout(self, request: Request) -> Response:
        self.c.guard.end_session(request.cookies.get(SESSION_COOKIE), self._now_s())  # the cookie acts no more, even kept
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        log.info("console.logout", client=_client(request))
        return response

    # -- actions: one route each, behind `action` --------------------------------------------------

    def action(self, do: Callable[[Act], Awaitable[form_actions.Done]], name: str | None = None) -> Handler:
        """An action's route: the guard (session or bearer, CSRF, Origin, read-only), the form's text,
        who acts and a configured agent, then `do`; answered with a redirect carrying its one line.
        `name` is the action's (None: the path's `{action}`, which no route serves)."""

        async def act(request: Request) -> Response:
            form = await request.form()
            sid, bearer = self._session(request)
            refusal = self.c.guard.may_act(
                sid=sid, bearer=bearer, csrf=str(form.get(CSRF_FIELD) or "") or None, origin=request.headers.get("origin"),
                host=request.headers.get("host"),
            )
            if refusal is not None:
                return self.refuse(request, refusal)
            fields = {k: str(v) for k, v in form.items() if isinstance(v, str)}
            for key, value in fields.items():
                if (why := unstorable(value, single_line=key != "note")) is not None:
                    raise InvalidInput(f"the form's {key[:40]!r} {why}")
            agent_id, action = request.path_params["agent_id"], name or request.path_params["action"]
            request.state.action = action  # from here a refusal is the action's (`failed`)
            by = form_actions.who(fields.get("by"))
            config = self.c.config()
            if agent_id not in config.agents:
                raise NotFound(f"no agent {agent_id[:60]!r} is configured")
            done = await do(Act(action=action, config=config, agent_id=agent_id, form=fields, by=by, at=self.c.now()))
            log.info("console.action", action=action, agent=agent_id, by=by, client=_client(request), done=done.message)
            where = f"/wakes/{done.wake_id}" if done.wake_id else f"/agents/{urllib.parse.quote(agent_id)}"
            query = urllib.parse.urlencode({"done": done.message, DONE_MAC: self._flash_mac(done.message)})
            response = RedirectResponse(f"{where}?{query}", status_code=303)
            response.set_cookie(BY_COOKIE, urllib.parse.quote(by, safe=""), httponly=True, samesite="strict", path="/", max_age=365 * 86400)
            return response

        return act

    async def trigger(self, a: Act) -> form_actions.Done:
        return await form_actions.trigger(a.config, a.agent_id, a.form.get("tier"))

    async def ack(self, a: Act) -> form_actions.Done:
        why = a.note()
        async with self.c.stores.pg_conn() as conn:
            return await form_actions.ack(conn, a.agent_id, _number("a finding", a.form.get("finding")), by=a.by, why=why, at=a.at)

    async def revert(self, a: Act) -> form_actions.Done:
        why = a.note()
        async with self.c.stores.pg_conn() as conn:
            finding = _number("a finding", a.form.get("finding"))
            return await form_actions.revert(conn, a.config, a.agent_id, finding, by=a.by, why=why, at=a.at)

    async def ack_incident(self, a: Act) -> form_actions.Done:
        """`wake incidents ack ID --by`'s writer, scoped to this agent (the note is checked, as every
        action's is, though the writer records none)."""
        a.note()
        async with self.c.stores.pg_conn() as conn:
            return await form_actions.ack_incident(conn, a.agent_id, a.form.get("incident"), by=a.by, at=a.at)

    async def pause(self, a: Act) -> form_actions.Done:
        why = a.note()
        async with self.c.stores.pg_conn() as conn:
            return await form_actions.pause(conn, a.config, a.agent_id, tier=a.form.get("tier"), until_text=a.form.get("until"), reason=why,
                                       by=a.by, at=a.at)

    async def resume(self, a: Act) -> form_actions.Done:
        a.note()  # checked, as every action's but trigger's is, though resume records none
        async with self.c.stores.pg_conn() as conn:
            return await form_actions.resume(conn, a.config, a.agent_id, tier=a.form.get("tier"))

    async def accept(self, a: Act) -> form_actions.Done:
        why = a.note()
        async with self.c.stores.pg_conn() as conn:
            return await form_actions.accept(conn, a.config, a.agent_id, a.form.get("kind", ""), a.form.get("finding", ""), by=a.by, why=why,
                                        at=a.at)

    def decide(self, decision: str) -> Callable[[Act], Awaitable[form_actions.Done]]:
        """approve (`approved`) or reject (`rejected`) one of the agent's approvals."""

        async def decided(a: Act) -> form_actions.Done:
            why = a.note()
            async with self.c.stores.pg_conn() as conn:
                approval = _number("an approval", a.form.get("approval"))
                return await form_actions.decide(conn, a.config, a.agent_id, approval, decision, by=a.by, why=why, at=a.at)

        return decided

    async def unknown(self, a: Act) -> form_actions.Done:
        raise NotFound(f"no action {a.action[:40]!r}")

    async def health(self, request: Request) -> Response:
        return PlainTextResponse("ok\n")


def _number(what: str, text: str | None) -> int:
    """A finding's or an approval's number (a bigint) from a form, else InvalidInput (a 400)."""
    value = (text or "").strip().lstrip("#")
    if not (value.isascii() and value.isdigit()) or len(value) > 19 or not 1 <= int(value) <= MAX_ID:
        raise InvalidInput(f"{what} is named by its number (1 to {MAX_ID}), got {(text or '')[:20]!r}")
    return int(value)


def _local(target: str | None) -> str:
    """A redirect target on this console only (never another site)."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return "/"
    return target


def _client(request: Request) -> str:
    return f"{request.client.host}:{request.client.port}" if request.client else "-"


def _client_host(request: Request) -> str:
    """Who a login attempt is counted against: the peer's address (its port changes per connection)."""
    return request.client.host if request.client else "-"


class _Checked:
    """Before any route: a Host the console answers to (else 421), and a path and query string
    with no NUL, lone surrogate or control character (else 400), each as one plain line."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self.guard.host_refusal(request.headers.get("host"))
        if refusal is None:
            why = unstorable(scope["path"], single_line=True)
            for key, value in request.query_params.multi_items():
                why = why or unstorable(key, single_line=True) or unstorable(value, single_line=True)
            refusal = Refusal(400, f"the address {why}") if why else None
        if refusal is None:
            await self.app(scope, receive, send)
            return
        log.warning("console.refused", path=str(scope["path"])[:200], client=_client(request), why=refusal.why)
        await PlainTextResponse(refusal.why + "\n", status_code=refusal.status, headers=PAGE_HEADERS)(scope, receive, send)


def build(console: Console) -> ASGIApp:
    """The ASGI application: the routes, behind the Host and address checks."""
    p = Pages(console)
    return _Checked(_routes(p), console.guard)


def _routes(p: Pages) -> Starlette:
    def acting(name: str, do: Callable[[Act], Awaitable[form_actions.Done]]) -> Route:
        return Route(f"/agents/{{agent_id}}/{name}", p.action(do, name), methods=["POST"])

    return Starlette(
        routes=[
            Route("/", p.readable(p.timeline)),
            Route("/events", p.readable(p.events)),
            Route("/wakes/{wake_id}", p.readable(p.wake)),
            Route("/agents/{agent_id}", p.readable(p.agent)),
            Route("/agents/{agent_id}/replays", p.readable(p.replays)),
            Route("/agents/{agent_id}/replays/{replay_id}", p.readable(p.replay)),
            Route("/agents/{agent_id}/evals/{eval_id}", p.readable(p.eval_page)),
            Route("/agents/{agent_id}/evals/{eval_id}/chart.png", p.readable(p.eval_chart)),
            acting("ack", p.ack),
            acting("revert", p.revert),
            acting("pause", p.pause),
            acting("resume", p.resume),
            acting("trigger", p.trigger),
            acting("accept", p.accept),
            acting("approve", p.decide("approved")),
            acting("reject", p.decide("rejected")),
            acting("ack-incident", p.ack_incident),
            Route("/agents/{agent_id}/{action}", p.action(p.unknown), methods=["POST"]),  # guarded like any action, then a 404
            Route("/login", p.login_form),
            Route("/login", p.login, methods=["POST"]),
            Route("/logout", p.logout, methods=["POST"]),
            Route("/healthz", p.health),
        ],
        exception_handlers={WakeError: p.failed},
    )
