"""Step 9, the model loop: offered exactly the binding, bounded by the tier's budgets.

Each turn sends the conversation with the bound tools. Every tool call is checked before it runs:

- its name must be in the binding, else it is **refused** (answered as an error, logged
  `tool.refused`, counted on the row); nothing the model says widens the binding;
- its arguments must parse as a JSON object and validate against the tool's schema;
- the same call (name and arguments) may run `think.max_repeat_calls` times; once more trips the
  circuit breaker and ends the loop;
- a tool that requires approval is not run: the call is queued for an operator and answered
  "queued for approval" (`wake.think.approval`, docs/approvals.md).

Handlers run under `think.tool_timeout_s`; an exception is answered as a tool error, never a
crash (except a stale fence: a newer holder exists and this wake must stop writing). Results are
cut to `think.tool_result_max_chars` with a marker. A successful call of a tool declared
`mutates` is recorded in `last_actions` in the wake's fenced transaction. Every message and every
call, with its outcome and latency, goes to the wake's transcript (`wake.think.transcript`).

The loop ends when the model answers without a tool call (`done`; `truncated` when that answer
hit its token limit), or when a budget is spent; then one last call asks for the summary with no
tool callable (`tool_choice: "none"`, or no tools at all: the route's `summary_tools`); any tool
call in its reply is not run. The final assistant text is the daybook entry; a final text that
was cut off ends with `CUT_OFF`, so neither the row nor the daybook passes it off as whole.

Every request that offers tools says its `tool_choice` (the tier's `tool_choice`, `auto` unless
set, its `first` for the first turn and `later` after; some servers drop tools without one); an
assistant turn that only called tools is sent back with `content: ""`, never null. A route with
`tool_calls = "json_schema"` offers the binding as one `response_format` schema instead
(`wake.think.structured`): the answer is read into the same tool calls, and each call's answer is
sent back as a user message.

Room in the context window: a route with `tokenizer_url` counts each prompt on its llama.cpp
server. Otherwise the previous turn's `usage.prompt_tokens` counts what was sent then, and what
was added since is estimated at `ESTIMATE_BYTES_PER_TOKEN` (the first turn is all estimate).

Context pressure (that count ÷ the window) is recorded before every call, and the agent's policy
acts on it before each turn's request (`wake.think.pressure`, docs/context.md). Tools see the
conversation through `ctx.conversation` (a `surfaces.conversation.Conversation` the loop owns);
a compaction they ask for is applied here, between turns, never while a turn is being answered.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ledgers import actions, context_events, introspection
from ledgers.errors import StaleFence
from ledgers.vocab import Status
from surfaces.conversation import Conversation
from surfaces.registry import Tool
from untrusted import spotlight
from wake import clock, logs, secrets
from wake.arrival.engine import Block
from wake.config import ModelRoute, plural
from wake.context import WakeContext
from wake.errors import ModelError
from wake.observe import metrics, tracing
from wake.think import approval, budget, prompt, structured, transcript
from wake.think.client import Client, Reply
from wake.think.pressure import Pressure, summary_body

TRUNCATED = "\n…[truncated: {shown} of {total} characters shown]"
CUT_OFF = "\n…[cut off: this reply reached its token limit]"
MIN_ROOM_TOKENS = 16
# Estimating tokens no server has counted yet. A byte-level BPE never makes more tokens than
# bytes; wake's prompts (English text and JSON schemas) measured 3.4-3.5 bytes a token on
# llama.cpp with SmolLM2's tokenizer (docs/model.md), so 2.5 leaves a margin for denser text. A
# chat template adds its role markers around each message.
ESTIMATE_BYTES_PER_TOKEN = 2.5
TEMPLATE_TOKENS_PER_MESSAGE = 8
TEMPLATE_TOKENS_BASE = 32


@dataclass(frozen=True, kw_only=True)
class Thought:
    status: Status  # completed | halted | failed (step 7's decisions add quiet)
    note: str
    error: str | None
    thinking: introspection.Thinking | None  # None: harness-only, nothing to record
    final_text: str | None


def api_key(route: ModelRoute) -> secrets.Secret | None:
    if route.api_key_credential is None:
        return None
    secret = secrets.read_secret(route.api_key_credential)
    if secret is None:
        raise ModelError(
            f"credential {route.api_key_credential!r} not found in $CREDENTIALS_DIRECTORY or "
            f"${secrets.env_name(route.api_key_credential)}"
        )
    return secret


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + TRUNCATED.format(shown=limit, total=len(text))


def estimate_tokens(size_bytes: int, messages: int) -> int:
    """A conservative token count of `size_bytes` of request JSON holding `messages` messages."""
    return math.ceil(size_bytes / ESTIMATE_BYTES_PER_TOKEN) + messages * TEMPLATE_TOKENS_PER_MESSAGE


def _json_default(value: object) -> object:
    return float(value) if isinstance(value, Decimal) else str(value)  # money as a number, as the CLI prints it


def _as_text(result: object) -> str:
    return result if isinstance(result, str) else json.dumps(result, default=_json_default, ensure_ascii=False)


def _error(message: str, outcome: str = "error") -> str:
    return transcript.ErrorAnswer(json.dumps({"error": message}, ensure_ascii=False), outcome)


class Loop:
    """The state of one wake's conversation."""

    def __init__(
        self, ctx: WakeContext, route_name: str, route: ModelRoute, blocks: Sequence[Block], client: Client,
        arrival: list[dict[str, Any]] | None = None,
    ) -> None:
        """`arrival`: the first messages as already built (a replay's, rebuilt from the ledger),
        instead of those `blocks` make."""
        self.ctx = ctx
        self.route_name = route_name
        self.route = route
        self.client = client
        self.conf = ctx.config.think
        self.log = logs.get("wake.think").bind(agent=ctx.agent_id, tier=ctx.tier, wake_id=str(ctx.wake_id))
        agent = ctx.config.agents[ctx.agent_id]
        self.budget = budget.WakeBudget(limits=ctx.config.tier(ctx.agent_id, ctx.tier).budget)
        self.daily = budget.DailyCap.of(ctx.stores, agent_id=ctx.agent_id, timezone=agent.timezone, now=ctx.now, cap_usd=agent.daily_cost_cap_usd)
        self.tools: dict[str, Tool] = {t.name: t for t in ctx.binding}
        self.specs = [prompt.tool_spec(t) for t in ctx.binding]
        self.choice = ctx.config.tier(ctx.agent_id, ctx.tier).tool_choice
        self.structured = route.tool_calls == "json_schema"
        self.marks = spotlight.for_agent(ctx.agent_id)
        self.messages = arrival if arrival is not None else prompt.messages(blocks, self.marks)
        if self.structured:  # the answer's shape, and how to finish, in the cached system prefix
            self.messages[0] = {**self.messages[0], "content": self.messages[0]["content"] + "\n\n" + structured.system_text(self.specs)}
        self.conv = Conversation(
            messages=self.messages, base=len(self.messages), context_window=route.context_window, policy=agent.context.policy,
            wake_ref=str(ctx.wake_id),
        )
        self.pressure = Pressure(ctx, self.conv, self._summarize)
        self.transcript = transcript.Recorder(ctx, self.messages, base=len(self.messages))  # what the model saw, every call
        self.tool_ctx = dataclasses.replace(ctx, conversation=self.conv)  # what tools see: the wake, and its conversation
        self.refusals = 0
        self.attempts = 0  # HTTP requests to the model, retries included
        # What the server counted of the last prompt sent: (body bytes, messages, prompt tokens).
        self.counted: tuple[int, int, int] | None = None
        self.repeats: collections.Counter[str] = collections.Counter()
        self.key: secrets.Secret | None = None
        # Today's spending: read once, then kept from what each call's `add` returns (the agent's
        # lease makes this wake the only spender meanwhile).
        self.today_usd = 0.0
        self.turn_text = ""  # the assistant's text of the turn whose calls are being answered (an approval's reason)

    def thinking(self, stop_reason: str | None) -> introspection.Thinking:
        u = self.budget.usage
        return introspection.Thinking(
            model=self.route.model, prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens,
            cached_tokens=u.cached_tokens, cost_usd=u.cost_usd, turns=self.budget.turns, tool_calls=self.budget.tool_calls,
            refusals=self.refusals, stop_reason=stop_reason,
        )

    async def _prompt_tokens(self, body: dict[str, Any], size: int) -> tuple[int, str]:
        """The prompt's tokens and how they were counted: the server's count, else the last count
        plus an estimate of what was added (scaled down by bytes when a compaction removed some)."""
        exact = await self.client.count_prompt_tokens(self.route, body, api_key=self.key)
        if exact is not None:
            return exact, "server"
        n_messages = len(body["messages"])
        if self.counted is None:
            return estimate_tokens(size, n_messages) + TEMPLATE_TOKENS_BASE, "estimate"
        sent_size, sent_messages, sent_tokens = self.counted
        if size < sent_size:
            return math.ceil(sent_tokens * size / sent_size), "usage"
        return sent_tokens + estimate_tokens(size - sent_size, max(0, n_messages - sent_messages)), "usage"

    def turn_choice(self, with_tools: bool) -> str:
        """This turn's tool choice: the tier's `first` on the first turn, `later` after; the
        summary call's is `none`."""
        if not with_tools:
            return "none"
        return self.choice.first if self.budget.turns == 0 else self.choice.later

    def _body(self, with_tools: bool) -> dict[str, Any]:
        choice = self.turn_choice(with_tools)
        if self.structured:
            return {"messages": self.messages, "response_format": structured.response_format(self.specs, choice)}
        keep_specs = with_tools or self.route.summary_tools == "choice_none"
        body: dict[str, object] = {"tools": self.specs} if keep_specs and self.specs else {}
        body["messages"] = self.messages
        if "tools" in body:
            body["tool_choice"] = choice if choice in ("auto", "required", "none") else {"type": "function", "function": {"name": choice}}
        return body

    def _read_structured(self, reply: Reply, with_tools: bool) -> Reply:
        """A JSON-schema answer read into the reply the loop knows: one tool call, or a final text.
        An answer that cannot be read is a final text when nothing could be called, else it is
        answered as an error on the next turn (a malformed call, counted as a refusal)."""
        answer = structured.parse(reply.content, cut=reply.finish_reason == "length")
        if answer.tool is not None and with_tools:  # (a call in the summary turn is not run, as with native calls)
            call = structured.as_tool_call(answer, f"call_{self.budget.turns}_0")
            return dataclasses.replace(reply, tool_calls=[call])
        if answer.final is not None:
            return dataclasses.replace(reply, content=answer.final, tool_calls=[])
        if not with_tools:
            return dataclasses.replace(reply, tool_calls=[])
        return dataclasses.replace(reply, tool_calls=[{"id": f"call_{self.budget.turns}_0", "unreadable": answer.problem}])

    async def _summarize(self, segment: list[dict[str, object]]) -> str:
        """The one model call of a summarize compaction; its usage counts against the wake's budgets."""
        body = summary_body(segment)
        body["max_tokens"] = self.conf.summary_max_tokens
        reply = await self.client.complete(self.route, body, api_key=self.key)
        self.attempts += reply.attempts
        self.budget.spend(reply.usage)
        self.today_usd = await self.daily.add(reply.usage.cost_usd)
        return reply.content or "(the summary came back empty)"

    async def _call(self, *, with_tools: bool, max_tokens: int) -> Reply | None:
        """One model call; `with_tools=False` is the summary call: no tool can be called."""
        choice = self.turn_choice(with_tools)
        body = self._body(with_tools)
        size = len(prompt.body_bytes(body))
        tokens, counted = await self._prompt_tokens(body, size)
        turn = self.budget.turns + 1
        if with_tools:  # the policy acts before a turn; the summary call only measures

            async def recount() -> tuple[int, str]:
                nonlocal body, size
                body = self._body(with_tools)
                size = len(prompt.body_bytes(body))
                return await self._prompt_tokens(body, size)

            tokens, counted = await self.pressure.before_call(turn=turn, tokens=tokens, counted=counted, recount=recount)
        room = self.route.context_window - tokens
        if room < MIN_ROOM_TOKENS:
            return None
        body["max_tokens"] = self.pressure.narrow(min(max_tokens, room), room) if with_tools else min(max_tokens, room)
        await self._record_turn(turn=turn, tokens=tokens, counted=counted, max_tokens=body["max_tokens"])
        try:
            reply = await self.client.complete(self.route, body, api_key=self.key)
        except ModelError as exc:
            self.attempts += exc.attempts
            raise
        self.attempts += reply.attempts
        if reply.usage.prompt_tokens > 0:
            self.counted = (size, len(body["messages"]), reply.usage.prompt_tokens)
        self.budget.turns += 1
        self.budget.spend(reply.usage)
        today = self.today_usd = await self.daily.add(reply.usage.cost_usd)
        metrics.observe_daily_cost(self.ctx.agent_id, today)
        if self.structured:  # the model's own JSON goes back as it was written; its call is read from it
            self.messages.append({"role": "assistant", "content": reply.content or ""})
            reply = self._read_structured(reply, with_tools)
        self.log.info(
            "model.turn", model=self.route.model, route=self.route_name, turn=self.budget.turns,
            tools_offered=len(structured.offered(self.specs, choice)) if self.structured or "tools" in body else 0, tool_choice=choice,
            prompt_tokens=reply.usage.prompt_tokens, completion_tokens=reply.usage.completion_tokens,
            cached_tokens=reply.usage.cached_tokens, cost_usd=round(reply.usage.cost_usd, 8), cost_reported=reply.usage.cost_reported,
            today_usd=round(today, 6), finish_reason=reply.finish_reason, tool_calls=len(reply.tool_calls),
            attempts=reply.attempts, latency_ms=round(reply.latency_ms, 2), max_tokens=body["max_tokens"],
        )
        if not self.structured:
            message: dict[str, object] = {"role": "assistant", "content": reply.content or ""}
            if reply.tool_calls:
                message["tool_calls"] = reply.tool_calls
            self.messages.append(message)
        return reply

    async def _record_turn(self, *, turn: int, tokens: int, counted: str, max_tokens: int) -> None:
        """Before each model call: the transcript so far and the turn's context measure, in the
        wake's fenced transaction (a replay, `wake.replay`, keeps them apart instead)."""
        async with self.ctx.harness_write() as conn:  # the transcript's texts: the shared content store
            await self.transcript.flush(conn, self.budget.turns)
            await context_events.record_turn(
                conn, wake_id=self.ctx.wake_id, turn=turn, agent_id=self.ctx.agent_id, prompt_tokens=tokens,
                context_window=self.route.context_window, counted=counted, max_tokens=max_tokens, at=clock.now(),
            )

    async def run(self) -> Thought:
        self.key = api_key(self.route)
        await self.pressure.load()
        self.today_usd = await self.daily.spent_usd()
        if self.daily.reached(self.today_usd):
            return Thought(
                status=Status.halted, note=f"daily cost cap reached (${self.today_usd:.4f} of ${self.daily.cap_usd:.4f} today): no model call",
                error=None, thinking=self.thinking("daily_cap"), final_text=None,
            )
        stop: str | None = None
        final: str | None = None
        summary_cut = False
        try:
            while stop is None:
                stop = self.budget.exhausted() or ("daily_cap" if self.daily.reached(self.today_usd) else None)
                if stop:
                    break
                reply = await self._call(with_tools=True, max_tokens=self.budget.output_tokens_left)
                if reply is None:
                    stop = "context_window"
                elif not reply.tool_calls:
                    final, stop = reply.content, "truncated" if reply.finish_reason == "length" else "done"
                else:
                    self.turn_text = reply.content or ""
                    stop = await self._tool_calls(reply.tool_calls)
            if stop not in ("done", "truncated"):
                summary = prompt.summary_request(stop)
                self.messages.append(summary)
                reply = await self._call(with_tools=False, max_tokens=self.conf.summary_max_tokens)
                final = reply.content if reply is not None else None
                summary_cut = reply is not None and reply.finish_reason == "length"
        except ModelError as exc:
            error = logs.redact_text(str(exc))
            same = f", the same error on {exc.same_error} of them" if exc.attempts > 1 else ""
            note = f"model call failed after {exc.attempts} attempt(s){same}; {self.attempts} request(s) in this wake"
            return Thought(status=Status.failed, note=note, error=error, thinking=self.thinking("error"), final_text=None)
        except StaleFence:
            raise  # a newer holder exists: this wake writes nothing more
        except BaseException as exc:  # cancelled or crashed mid-loop: what was spent still goes on the row
            stop = "aborted" if isinstance(exc, asyncio.CancelledError) else "error"
            await asyncio.shield(self._record_partial(stop))
            raise
        u = self.budget.usage
        cut = stop == "truncated" or summary_cut
        note = (
            f"model {self.route.model}: {plural(self.budget.turns, 'turn')} ({plural(self.attempts, 'request')}),"
            f" {plural(self.budget.tool_calls, 'tool call')}"
            f" ({self.refusals} refused), {u.prompt_tokens}+{u.completion_tokens} tokens ({u.cached_tokens} cached),"
            f" ${u.cost_usd:.6f}; stopped: {stop}{'; the summary was cut off at its token limit' if summary_cut else ''}"
        )
        final = (final + CUT_OFF) if final and cut else final
        return Thought(status=Status.completed, note=note, error=None, thinking=self.thinking(stop), final_text=final or None)

    async def _tool_calls(self, calls: list[dict[str, object]]) -> str | None:
        """Answer every call of one assistant turn (the API needs an answer to each); the stop
        reason if a budget or the breaker ended the loop."""
        stop: str | None = None
        for n, call in enumerate(calls):
            fn = call.get("function") if isinstance(call, dict) else None
            fn = fn if isinstance(fn, dict) else {}
            call_id = str(call.get("id") or f"call_{self.budget.turns}_{n}") if isinstance(call, dict) else f"call_{n}"
            name = str(fn.get("name") or "")
            started = clock.monotonic_ms()
            with tracing.tool_span(name=name, call_id=call_id, arguments=fn.get("arguments")) as span:
                answer, stop = await self._answer(call, name, fn, call_id, stop, started)
                tracing.tool_result(span, answer)
            # a tool's answer is stored text: marked data (`untrusted.spotlight`); a replay's recorded one was marked when recorded
            shown = answer if isinstance(answer, transcript.ShownAnswer) else self.marks.span(answer)
            if self.structured:
                self.messages.append(structured.tool_result_message(name or "(none)", shown))
            else:
                self.messages.append({"role": "tool", "tool_call_id": call_id, "content": shown})
            self.transcript.call(
                turn=self.budget.turns, call_id=call_id, tool=name, arguments=fn.get("arguments"), answer=answer,
                latency_ms=clock.monotonic_ms() - started, answered_by=self.messages[-1],
            )
        return stop

    async def _answer(self, call: object, name: str, fn: dict[str, object], call_id: str, stop: str | None, started: float) -> tuple[str, str | None]:
        """One call's answer, and the stop reason after it (`stop`: the one before it)."""
        if isinstance(call, dict) and "unreadable" in call:  # a JSON-schema answer that was no call and no final answer
            self.budget.tool_calls += 1  # an attempt to act that could not be read: a refused call, counted as one
            self.refusals += 1
            self.log.warning("tool.refused", tool=None, error=call["unreadable"])
            return _error(f"your answer could not be read: {call['unreadable']}", "refused"), stop
        if stop is not None:
            return _error(f"not run: the wake is ending ({stop})", "not_run"), stop
        if self.budget.tool_calls_left <= 0:
            return _error("not run: this wake's tool-call budget is spent", "not_run"), "max_tool_calls"
        self.budget.tool_calls += 1
        answer, tripped = await self._one(name, fn.get("arguments"), call_id, started=started)
        return answer, stop or tripped

    async def _one(self, name: str, raw_arguments: Any, call_id: str = "", *, started: float) -> tuple[str, str | None]:
        tool = self.tools.get(name)
        if tool is None:
            self.refusals += 1
            self.log.warning("tool.refused", tool=name, bound=sorted(self.tools))
            held = ", ".join(sorted(self.tools)) or "no tools"
            return _error(f"refused: tool {name!r} is not bound in this wake; you hold: {held}", "refused"), None
        try:
            arguments = raw_arguments if isinstance(raw_arguments, dict) else json.loads(raw_arguments or "{}")
        except (TypeError, ValueError) as exc:
            self.log.info("tool.call", tool=name, ok=False, error="arguments not JSON")
            return _error(f"arguments are not valid JSON: {exc}"), None
        if not isinstance(arguments, dict):
            self.log.info("tool.call", tool=name, ok=False, error="arguments not an object")
            return _error("arguments must be a JSON object"), None
        import jsonschema  # a tool call's arguments, checked: not imported by commands that make none (docs/performance.md)

        problem = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(dict(tool.parameters)).iter_errors(arguments))
        if problem is not None:
            where = "/".join(str(p) for p in problem.absolute_path) or "(top level)"
            self.log.info("tool.call", tool=name, ok=False, error="arguments invalid")
            return _error(f"arguments do not match the schema at {where}: {problem.message}"), None
        key = name + json.dumps(arguments, sort_keys=True, separators=(",", ":"))
        self.repeats[key] += 1
        if self.repeats[key] > self.conf.max_repeat_calls:
            self.log.warning("tool.breaker", tool=name, repeats=self.repeats[key])
            return _error(f"not run: this exact call was made more than {self.conf.max_repeat_calls} times in this wake"), "repeated_call"
        return await self._execute(tool, arguments, call_id, started=started), None

    async def _execute(self, tool: Tool, arguments: dict[str, object], call_id: str, *, started: float) -> str:
        """Answer a call that passed every check: queued for an operator when the tool requires
        approval, else run. The one place a call is carried out (a replay answers it from the
        recording instead, `wake.replay`)."""
        if tool.requires_approval:  # not run in this wake: it waits for an operator (docs/approvals.md)
            return await approval.queue(self.ctx, tool, arguments, turn=self.budget.turns, call_id=call_id, turn_text=self.turn_text)
        return await self._run(tool, arguments, started)

    async def _run(self, tool: Tool, arguments: dict[str, object], started: float) -> str:
        """Run a call that passed every check: its answer (an error answer when it failed). Its
        `tool.call` line's latency_ms counts from `started`, the call's start, as its transcript
        record does (the checks included: the first call also imports the schema validator), so
        one call has one latency."""
        name = tool.name
        try:
            result = await asyncio.wait_for(tool.handler(self.tool_ctx, **arguments), timeout=self.conf.tool_timeout_s)
        except StaleFence:
            raise
        except TimeoutError:
            self.log.warning("tool.call", tool=name, ok=False, error="timeout", latency_ms=round(clock.monotonic_ms() - started, 2))
            return _error(f"the tool timed out after {self.conf.tool_timeout_s}s")
        except Exception as exc:  # a handler may fail in any way; the model is told, the wake goes on
            message = logs.redact_text(f"{type(exc).__name__}: {exc}")
            self.log.warning("tool.call", tool=name, ok=False, error=message, latency_ms=round(clock.monotonic_ms() - started, 2))
            return _error(f"the tool failed: {message}")
        self.log.info("tool.call", tool=name, ok=True, mutates=tool.mutates, latency_ms=round(clock.monotonic_ms() - started, 2))
        if tool.mutates:
            await self._record_action(tool, arguments)
        return truncate(_as_text(result), self.conf.tool_result_max_chars)

    async def _record_partial(self, stop_reason: str) -> None:
        try:
            async with self.ctx.harness_write() as conn:  # the wake's row: the control plane
                await introspection.record_thinking(conn, self.ctx.wake_id, self.thinking(stop_reason))
        except Exception:  # the settle that follows reports the wake; this is best effort
            self.log.exception("think.record_failed", stop_reason=stop_reason)

    async def _record_action(self, tool: Tool, arguments: dict[str, object]) -> None:
        ctx = self.ctx
        async with ctx.harness_write() as conn:  # a confirmed action is the harness's record: the control plane
            await actions.record(
                conn, agent_id=ctx.agent_id, surface=f"wake.{ctx.tier}", tool=tool.name,
                summary=truncate(f"{tool.name} {json.dumps(arguments, sort_keys=True, default=str)}", 200),
                arguments=arguments, wake_id=ctx.wake_id, fence=ctx.fence, acted_at=clock.now(),
            )


async def run(ctx: WakeContext, *, route_name: str, route: ModelRoute, blocks: Sequence[Block], client: Client) -> Thought:
    """Run the model loop of one wake; its transcript is flushed however the loop ends."""
    loop = Loop(ctx, route_name, route, blocks, client)
    try:
        return await loop.run()
    finally:
        await asyncio.shield(loop.transcript.finish(loop.budget.turns))
