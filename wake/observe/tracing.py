"""A wake's OpenTelemetry traces (docs/traces.md): one `wake.run` span per wake
with a child for the claim, the lease, the binding, each arrival source, the manifest, each model
call (`chat {model}`) and each tool call (`execute_tool {name}`), exported over OTLP/HTTP by the
OpenTelemetry SDK.

Off unless the standard variables ask for it: `OTEL_TRACES_EXPORTER=otlp`, or an
`OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (`OTEL_TRACES_EXPORTER=none` or
`OTEL_SDK_DISABLED=true` turn it off again). Off, nothing of OpenTelemetry is imported, no tracer
provider is installed, and every span here is one shared no-op context manager. The SDK reads the
rest of its variables itself (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, the exporter's
headers, timeout and protocol, the batch processor's limits, the sampler).

Model and tool spans follow the GenAI semantic conventions of `SEMCONV_VERSION`. Message
content (the prompt's messages, the reply, a tool call's arguments and result) is recorded only
when `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is true, and redacted as a log line is.

Every span carries the wake's `wake.id`, `wake.agent`, `wake.tier`, `wake.slot` (the scheduled
slot, `none` for a wake without one) and, from the manifest on, `wake.manifest_root`.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import threading
import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import structlog

from wake import logs

if TYPE_CHECKING:
    import datetime

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

SEMCONV_VERSION = "1.37.0"  # the OpenTelemetry semantic conventions (gen_ai.*) these spans follow
SCOPE = "wake"
PROVIDER = "openai"  # gen_ai.provider.name: every model route speaks OpenAI's chat-completions API
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_TRUE = {"1", "true", "yes", "on", "span_only", "span_and_event"}

_lock = threading.Lock()
_provider: TracerProvider | None = None
_tracer: Tracer | None = None
_capture = False
# the attributes every span of the current wake carries (a dict per wake, filled as the wake learns them)
_wake_attrs: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("wake_trace_attrs", default=None)


class _NoSpan:
    """The span of a process that traces nothing: every call does nothing."""

    def set_attribute(self, key: str, value: object) -> None:
        pass

    def set_attributes(self, attributes: Mapping[str, object]) -> None:
        pass

    def record_exception(self, exc: BaseException) -> None:
        pass

    def set_status(self, *args: object, **kwargs: object) -> None:
        pass


NO_SPAN = _NoSpan()


@contextlib.contextmanager
def _no_span() -> Iterator[object]:
    yield NO_SPAN


def wanted(env: Mapping[str, str] | None = None) -> bool:
    """Whether the standard variables ask for traces (the module docstring)."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = {e.strip().lower() for e in env.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()}
    if "none" in exporters:
        return False
    if "otlp" in exporters:
        return True
    return bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def capture_wanted(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(CAPTURE_ENV, "").strip().lower() in _TRUE


def configure(env: Mapping[str, str] | None = None, *, exporter: Any = None) -> bool:
    """Install this process's tracer provider when the variables ask for one (or when `exporter`,
    a span exporter, is given: `bench/tracing.py`'s in-memory one), once; True when tracing is on.
    The provider is this module's, not OpenTelemetry's global one."""
    global _provider, _tracer, _capture
    with _lock:
        if _provider is not None:
            return True
        if exporter is None and not wanted(env):
            return False
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        from wake import __version__

        provider = TracerProvider(resource=Resource.create({"service.version": __version__}))  # OTEL_SERVICE_NAME etc. merged in
        provider.add_span_processor(BatchSpanProcessor(exporter))
        _provider, _capture = provider, capture_wanted(env)
        _tracer = provider.get_tracer(SCOPE, __version__, schema_url=f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}")
        return True


def shutdown() -> None:
    """Export what is buffered and uninstall the provider (the SDK also does this at exit)."""
    global _provider, _tracer
    with _lock:
        provider, _provider, _tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


def flush(timeout_ms: int = 10_000) -> None:
    """Export what the batch processor holds now."""
    if _provider is not None:
        _provider.force_flush(timeout_ms)


def enabled() -> bool:
    return _tracer is not None


def capturing() -> bool:
    """Whether message content goes onto the spans."""
    return _tracer is not None and _capture


def trace_id() -> str | None:
    """The current trace's id as 32 hex digits; None when nothing is traced."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """A child of the current span, carrying the wake's attributes; an exception that leaves it
    marks it an error (and goes on). Off: the no-op span."""
    tracer = _tracer
    if tracer is None:
        yield NO_SPAN
        return
    attrs = {**(_wake_attrs.get() or {}), **{k: v for k, v in (attributes or {}).items() if v is not None}}
    with tracer.start_as_current_span(name, attributes=attrs) as current:
        yield current


def _slot(scheduled_for: datetime.datetime | None) -> str:
    return scheduled_for.isoformat() if scheduled_for is not None else "none"


@contextlib.contextmanager
def wake_span(*, wake_id: uuid.UUID, agent: str, tier: str, trigger: str, scheduled_for: datetime.datetime | None) -> Iterator[Any]:
    """The wake's `wake.run` span, opened before its claim; a wake already inside its own (a
    claimed wake's `run_wake`) is given that one. Its log lines carry `trace_id` while it is open."""
    tracer = _tracer
    if tracer is None:
        yield NO_SPAN
        return
    current = _wake_attrs.get()
    if current is not None and current.get("wake.id") == str(wake_id):
        from opentelemetry import trace

        yield trace.get_current_span()
        return
    attrs = {"wake.id": str(wake_id), "wake.agent": agent, "wake.tier": str(tier), "wake.slot": _slot(scheduled_for)}
    token = _wake_attrs.set(attrs)
    try:
        with tracer.start_as_current_span("wake.run", attributes={**attrs, "wake.trigger": str(trigger)}) as current_span:
            with structlog.contextvars.bound_contextvars(trace_id=format(current_span.get_span_context().trace_id, "032x")):
                yield current_span
    finally:
        _wake_attrs.reset(token)


def manifest_root(root: str) -> None:
    """The wake's manifest is known: its root goes on the wake span and on every span after it."""
    if _tracer is None:
        return
    attrs = _wake_attrs.get()
    if attrs is not None:
        attrs["wake.manifest_root"] = root
    from opentelemetry import trace

    trace.get_current_span().set_attribute("wake.manifest_root", root)


def wake_status(status: str, error: str | None = None) -> None:
    """The wake's outcome on its span, the current one (`wake.status`; an error status with the
    row's error for a failed or aborted wake)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    current = trace.get_current_span()
    current.set_attribute("wake.status", str(status))
    if error is not None and str(status) in ("failed", "aborted"):
        current.set_status(trace.Status(trace.StatusCode.ERROR, logs.redact_text(error)[:500]))


# -- GenAI spans (semantic conventions SEMCONV_VERSION) ------------------------------------------


def _server(base_url: str) -> dict[str, object]:
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return {"server.address": parts.hostname, "server.port": port}


def chat_span(*, model: str, base_url: str, body: Mapping[str, object]) -> contextlib.AbstractContextManager[object]:
    """The span of one model call (`chat {model}`), with its request attributes."""
    if _tracer is None:
        return _no_span()
    attrs: dict[str, object] = {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": PROVIDER, "gen_ai.request.model": model, **_server(base_url),
    }
    for key, name in (("max_tokens", "gen_ai.request.max_tokens"), ("temperature", "gen_ai.request.temperature"),
                      ("top_p", "gen_ai.request.top_p"), ("seed", "gen_ai.request.seed")):
        if isinstance(body.get(key), (int, float)):
            attrs[name] = body[key]
    if _capture:
        attrs["gen_ai.input.messages"] = _json(body.get("messages") or [])
    return span(f"chat {model}", attrs)


def chat_reply(current: Any, *, response_model: str | None, response_id: str | None, finish_reason: str | None,
               input_tokens: int, output_tokens: int, message: Mapping[str, object] | None) -> None:
    """A model call's answer on its span."""
    if _tracer is None:
        return
    attrs: dict[str, object] = {"gen_ai.usage.input_tokens": input_tokens, "gen_ai.usage.output_tokens": output_tokens}
    if response_model:
        attrs["gen_ai.response.model"] = response_model
    if response_id:
        attrs["gen_ai.response.id"] = response_id
    if finish_reason:
        attrs["gen_ai.response.finish_reasons"] = [finish_reason]
    if _capture and message is not None:
        attrs["gen_ai.output.messages"] = _json([dict(message)])
    current.set_attributes(attrs)


def tool_span(*, name: str, call_id: str, arguments: object) -> contextlib.AbstractContextManager[object]:
    """The span of one tool call (`execute_tool {name}`)."""
    if _tracer is None:
        return _no_span()
    attrs: dict[str, object] = {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name or "(none)", "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }
    if _capture and arguments is not None:
        attrs["gen_ai.tool.call.arguments"] = arguments if isinstance(arguments, str) else _json(arguments)
    return span(f"execute_tool {name or '(none)'}", attrs)


def tool_result(current: Any, answer: str) -> None:
    if _capture:
        current.set_attribute("gen_ai.tool.call.result", logs.redact_text(str(answer)))


def _json(value: object) -> str:
    return json.dumps(logs.redact_data(value), ensure_ascii=False, default=str)
