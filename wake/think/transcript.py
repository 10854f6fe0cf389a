"""The witness of the hands: a wake's conversation as its model saw it, and every tool call.

The model loop hands its conversation (the list it sends) to a `Recorder`. Every message is
recorded once, in the order it entered the conversation, with the model turn after which it
entered (0: the arrival); every tool call the model made is recorded with its arguments as the
model sent them, the message that answered it, its latency and its outcome (`ok`, `error`,
`refused`, `not_run`). A message a compaction added (a summary note, a pruned placeholder) is
recorded where it was first sent; one a compaction removed stays (it was seen before).

Bodies are canonical JSON (sorted keys), redacted by the rules of the logs (`logs.redact_data`:
API keys, Authorization headers, DSN passwords, every secret wake has read, the value under a
sensitive key), and cut at `think.transcript_max_chars` with a marker that states the cap and the
full length; the arrival's messages are stored whole (they are the blocks, bounded by the
context window). They go to `manifest_contents` under their SHA-256, each once.

Records are flushed in the transaction the loop opens before each model call (one statement more)
and once when the loop ends; each flush sets the row's `transcript_root` over everything recorded.
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from ledgers import transcripts
from ledgers.errors import StaleFence
from wake import logs
from wake.context import WakeContext

CUT = "\n…[transcript: cut at {cap} of {total} characters]"


class ErrorAnswer(str):
    """A tool answer that reports an error rather than a handler's result; `outcome` says which."""

    outcome: str

    def __new__(cls, text: str, outcome: str = "error") -> ErrorAnswer:
        if outcome not in transcripts.OUTCOMES or outcome == "ok":
            raise ValueError(f"not an error outcome: {outcome!r}")
        answer = super().__new__(cls, text)
        answer.outcome = outcome
        return answer


class ShownAnswer(str):
    """A tool answer already in the form the model was shown (a replay's recorded answer, marked
    when it was recorded): the loop sends it as it is instead of marking it again. `outcome` as
    `ErrorAnswer`'s, "ok" for a result."""

    outcome: str

    def __new__(cls, text: str, outcome: str = "ok") -> ShownAnswer:
        answer = super().__new__(cls, text)
        answer.outcome = outcome
        return answer


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def redacted(text: str) -> str:
    """`text` under the log rules; JSON keeps its shape, with a sensitive key's value `***`."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            data = json.loads(text)
        except ValueError:
            return logs.redact_text(text)
        clean = logs.redact_data(data)
        return text if clean == data else json.dumps(clean, ensure_ascii=False)
    return logs.redact_text(text)


def capped(text: str, cap: int | None) -> tuple[str, bool]:
    if cap is None or len(text) <= cap:
        return text, False
    return text[:cap] + CUT.format(cap=cap, total=len(text)), True


class Recorder:
    """The transcript of one wake, kept in step with the loop's conversation."""

    def __init__(self, ctx: WakeContext, messages: list[dict[str, Any]], base: int) -> None:
        self.ctx = ctx
        self.conversation = messages  # the loop's list: compactions change it in place
        self.base = base  # the first `base` messages are the arrival, stored whole
        self.cap = ctx.config.think.transcript_max_chars
        self.log = logs.get("wake.think").bind(agent=ctx.agent_id, tier=ctx.tier, wake_id=str(ctx.wake_id))
        self._seen: dict[int, tuple[dict[str, object], int]] = {}  # id(message) -> (message, seq); holds each alive
        self.messages: list[transcripts.Message] = []
        self.calls: list[transcripts.Call] = []
        self._contents: dict[str, tuple[str, str]] = {}
        self._flushed = (0, 0)  # messages, calls written
        self.failed = False  # a flush failed: the rest is not recorded (the root would not follow)

    def _text(self, text: str, whole: bool) -> tuple[str, int, bool]:
        clean = redacted(text)
        stored, cut = capped(clean, None if whole else self.cap)
        return stored, len(clean), cut

    def _body(self, message: dict[str, Any], whole: bool) -> tuple[str, int, bool]:
        body = dict(message)
        chars, cut = 0, False
        if isinstance(body.get("content"), str):
            body["content"], n, cut = self._text(body["content"], whole)
            chars += n
        calls = []
        for call in body.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                arguments, n, was_cut = self._text(fn["arguments"], whole)
                call = {**call, "function": {**fn, "arguments": arguments}}
                chars, cut = chars + n, cut or was_cut
            calls.append(call)
        if calls:
            body["tool_calls"] = calls
        return canonical(body), chars, cut

    def observe(self, turn: int) -> None:
        """Record every message of the conversation not seen yet, in the order they stand."""
        for message in self.conversation:
            if id(message) in self._seen:
                continue
            seq = len(self.messages)
            self._seen[id(message)] = (message, seq)
            body, chars, cut = self._body(message, whole=seq < self.base)
            sha = transcripts.sha256(body)
            self._contents[sha] = ("message", body)
            self.messages.append(transcripts.Message(
                seq=seq, turn=turn, role=str(message.get("role")), sha256=sha, chars=chars, cut=cut,
            ))

    def stored_arguments(self, arguments: object) -> str:
        """A call's arguments as this transcript stores them: redacted under the log rules and cut
        at its cap (a replay compares a call with the recorded one in this form, since the raw text
        of a redacted or cut argument is not kept)."""
        text = arguments if isinstance(arguments, str) else canonical(arguments if arguments is not None else {})
        return self._text(text, whole=False)[0]

    def call(
        self, *, turn: int, call_id: str, tool: str, arguments: object, answer: str, latency_ms: float, answered_by: dict[str, object] | None = None,
    ) -> None:
        """Record one call of the assistant's turn, once its answer is in the conversation:
        `answered_by`, the message that carries it (a JSON-schema route answers in a user message),
        else the `tool` message naming the call's id."""
        self.observe(turn)
        seen = self._seen.get(id(answered_by)) if answered_by is not None else None
        answered = seen[1] if seen is not None else next(
            (seq for m, seq in reversed(self._seen.values()) if m.get("tool_call_id") == call_id and m.get("role") == "tool"), None
        )
        if answered is None:
            self.log.warning("transcript.unanswered", tool=tool, call_id=call_id)
            return
        stored = self.stored_arguments(arguments)
        sha = transcripts.sha256(stored)
        self._contents[sha] = ("arguments", stored)
        self.calls.append(transcripts.Call(
            seq=len(self.calls), turn=turn, call_id=call_id, tool=tool, arguments_sha256=sha, answer_seq=answered,
            outcome=answer.outcome if isinstance(answer, ErrorAnswer | ShownAnswer) else "ok", latency_ms=round(max(0.0, latency_ms), 3),
        ))

    @property
    def root(self) -> str | None:
        return transcripts.root_of(self.messages, self.calls) if self.messages else None

    async def flush(self, conn: asyncpg.Connection, turn: int) -> None:
        """Write what is new, in the caller's fenced transaction."""
        self.observe(turn)
        done_messages, done_calls = self._flushed
        if self.failed or (done_messages, done_calls) == (len(self.messages), len(self.calls)):
            return
        root = self.root
        assert root is not None
        new_messages, new_calls = self.messages[done_messages:], self.calls[done_calls:]
        needed = {m.sha256 for m in new_messages} | {c.arguments_sha256 for c in new_calls}
        contents = {k: v for k, v in self._contents.items() if k in needed}
        if not await transcripts.record(conn, self.ctx.wake_id, contents, new_messages, new_calls, root):
            self.failed = True
            self.log.warning("transcript.row_not_open", messages=len(new_messages), calls=len(new_calls))
            return
        self._flushed = (len(self.messages), len(self.calls))
        for sha in needed:  # stored now; what stays is only for later flushes
            self._contents.pop(sha, None)

    async def finish(self, turn: int) -> None:
        """The last flush, in its own fenced transaction; best effort (the settle reports the wake)."""
        try:
            self.observe(turn)
            if self._flushed != (len(self.messages), len(self.calls)) and not self.failed:
                async with self.ctx.harness_write() as conn:  # the shared content store: the owner's login
                    await self.flush(conn, turn)
        except StaleFence:
            self.failed = True  # a newer holder: this wake writes nothing more
        except Exception:
            self.failed = True
            self.log.exception("transcript.record_failed")
