"""wake.observe.tracing: off unless the standard variables ask; spans carry the wake's attributes;
message content only with the option (the Jaeger test, tests/acceptance/test_traces.py, reads
real exports back)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from wake.observe import tracing

OTEL_KEYS = ["OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    tracing.shutdown()
    monkeypatch.delenv(tracing.CAPTURE_ENV, raising=False)
    exporter = InMemorySpanExporter()
    assert tracing.configure({}, exporter=exporter)
    try:
        yield exporter
    finally:
        tracing.shutdown()


@pytest.mark.parametrize(("env", "on"), [
    ({}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
    ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, False),
    ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, False),
    ({"OTEL_SERVICE_NAME": "wake"}, False),
])
def test_traces_are_off_unless_the_standard_variables_ask(env: dict[str, str], on: bool) -> None:
    assert tracing.wanted(env) is on


@given(st.dictionaries(st.sampled_from(OTEL_KEYS), st.text(max_size=40)))
def test_any_values_of_the_variables_decide_without_failing(env: dict[str, str]) -> None:
    assert tracing.wanted(env) in (True, False)
    assert tracing.capture_wanted(env) in (True, False)


def test_off_no_provider_no_sdk_and_a_no_op_span() -> None:
    tracing.shutdown()
    assert not tracing.configure({})
    assert not tracing.enabled() and tracing.trace_id() is None
    with tracing.wake_span(wake_id=uuid.uuid4(), agent="a", tier="whisper", trigger="manual", scheduled_for=None) as span:
        with tracing.span("wake.bind") as child:
            assert span is child is tracing.NO_SPAN
    assert tracing._provider is None


def test_every_span_carries_the_wake_and_the_manifest_root_once_known(exported: InMemorySpanExporter) -> None:
    wake_id = uuid.uuid4()
    with tracing.wake_span(wake_id=wake_id, agent="a", tier="whisper", trigger="manual", scheduled_for=None):
        trace_id = tracing.trace_id()
        with tracing.span("wake.bind"):
            pass
        tracing.manifest_root("r00t")
        body = {"messages": [{"role": "user", "content": "secret plan"}]}
        with tracing.chat_span(model="m-1", base_url="http://127.0.0.1:9/v1", body=body) as chat:
            tracing.chat_reply(chat, response_model="m-1b", response_id="x", finish_reason="stop", input_tokens=5, output_tokens=2,
                               message={"role": "assistant", "content": "ok"})
        tracing.wake_status("completed")
    tracing.flush()
    spans = {s.name: s for s in exported.get_finished_spans()}
    assert set(spans) == {"wake.run", "wake.bind", "chat m-1"}
    assert trace_id is not None and all(format(s.context.trace_id, "032x") == trace_id for s in spans.values())
    for s in spans.values():
        assert s.attributes is not None and s.attributes["wake.id"] == str(wake_id) and s.attributes["wake.slot"] == "none"
    assert "wake.manifest_root" not in (spans["wake.bind"].attributes or {})  # ended before the manifest
    chat_attrs = dict(spans["chat m-1"].attributes or {})
    assert chat_attrs["wake.manifest_root"] == "r00t" and chat_attrs["gen_ai.response.model"] == "m-1b"
    assert chat_attrs["gen_ai.usage.input_tokens"] == 5 and chat_attrs["server.port"] == 9
    assert not any("secret plan" in str(v) for v in chat_attrs.values())
    assert (spans["wake.run"].attributes or {})["wake.status"] == "completed"


def test_content_only_with_the_variable_and_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    tracing.shutdown()
    exporter = InMemorySpanExporter()
    tracing.configure({tracing.CAPTURE_ENV: "True"}, exporter=exporter)
    try:
        body = {"messages": [{"role": "user", "content": "plan with key sk-abcdefghijklmnop"}]}
        with tracing.chat_span(model="m", base_url="https://h.example/v1", body=body):
            pass
    finally:
        tracing.shutdown()
    (span,) = exporter.get_finished_spans()
    text = str((span.attributes or {})["gen_ai.input.messages"])
    assert "plan with key" in text and "sk-abcdefghijklmnop" not in text
