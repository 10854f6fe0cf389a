"""Traces (docs/traces.md): `wake up` with a model call and a tool call, exported
over OTLP/HTTP to a real Jaeger running as its own process (tests/support/jaeger_server.py), and
read back through Jaeger's query API: the wake's span tree, the GenAI attributes of its model
call, the wake's id as its ledger row has it, and message content only with the option."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.jaeger_server import JaegerServer
from tests.support.openai_server import ScriptedServer, completion
from wake.observe import tracing

CLI = Callable[..., subprocess.CompletedProcess[str]]
PERSONA = "You are a careful agent who counts herons."
CONTENT_KEYS = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result"}


def _tags(span: dict[str, Any]) -> dict[str, Any]:
    return {t["key"]: t["value"] for t in span.get("tags", [])}


def _read_trace(jaeger: JaegerServer, trace_id: str, want_spans: int, timeout_s: float = 30) -> dict[str, Any]:
    """The trace once Jaeger holds at least `want_spans` of its spans (the exporter flushed them
    before `wake up` exited; the collector stores them a moment later)."""
    deadline = time.monotonic() + timeout_s
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            found = jaeger.query(f"/api/traces/{trace_id}").get("data") or []
        except OSError:  # 404 until the first span is stored
            found = []
        if found and len(found[0]["spans"]) >= want_spans:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"trace {trace_id} not in Jaeger with {want_spans} spans within {timeout_s}s: {found}\n{jaeger.log_tail()}")


def _wake(wake_cli: CLI, tmp_path: Path, jaeger: JaegerServer, service: str, **env: str) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    (tmp_path / "persona.md").write_text(PERSONA + "\n")
    with ScriptedServer() as server:
        server.push(completion(None, [("local_time", {})]), completion("Daybook: checked the time, all calm."))
        config = tmp_path / "wake.toml"
        config.write_text(
            f'[models.scripted]\nbase_url = "{server.url}"\nmodel = "scripted-1"\n'
            '[agents.demo]\npersona_files = ["persona.md"]\n'
            '[agents.demo.tiers.surface]\nbinds = ["wake.whisper", "wake.surface"]\nmodel = "scripted"\n'
        )
        otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_endpoint, "OTEL_SERVICE_NAME": service, **env}
        up = wake_cli("--config", str(config), "up", "--tier", "surface", extra_env=otel)
    assert up.returncode == 0, up.stderr
    wake_id = up.stdout.splitlines()[0].removeprefix("wake ")
    shown = json.loads(wake_cli("--config", str(config), "show", wake_id, "--json").stdout)
    text = wake_cli("--config", str(config), "show", wake_id).stdout
    assert f"trace_id: {shown['trace_id']}\n" in text  # `wake show` names its trace
    return shown, up


def test_a_wake_is_one_trace_in_jaeger_with_genai_spans_and_no_content(wake_cli: CLI, tmp_path: Path, jaeger: JaegerServer) -> None:
    service = f"wake-test-{uuid.uuid4().hex[:8]}"
    row, up = _wake(wake_cli, tmp_path, jaeger, service)
    trace_id = row["trace_id"]
    assert isinstance(trace_id, str) and len(trace_id) == 32
    # the wake's log lines carry its trace id
    lines = [json.loads(line) for line in up.stderr.splitlines() if line.startswith("{")]
    settled = [line for line in lines if line["event"] in ("wake.started", "model.turn", "tool.call", "wake.settled")]
    assert settled and all(line.get("trace_id") == trace_id for line in settled), settled

    trace = _read_trace(jaeger, trace_id, want_spans=8)
    spans = trace["spans"]
    assert {p["serviceName"] for p in trace["processes"].values()} == {service}
    by_id = {s["spanID"]: s for s in spans}
    roots = [s for s in spans if not s.get("references")]
    assert [s["operationName"] for s in roots] == ["wake.run"]
    root = roots[0]
    rtags = _tags(root)
    assert rtags["wake.id"] == row["wake_id"] and rtags["wake.agent"] == "demo" and rtags["wake.tier"] == "surface"
    assert rtags["wake.slot"] == "none" and rtags["wake.manifest_root"] == row["manifest_root"] and rtags["wake.status"] == "completed"

    def parent(s: dict[str, Any]) -> dict[str, Any]:
        return by_id[s["references"][0]["spanID"]]

    children = sorted(s["operationName"] for s in spans if s.get("references") and parent(s) is root)
    assert "wake.lease" in children and "wake.bind" in children and "wake.manifest" in children
    assert children.count("chat scripted-1") == 2 and any(n.startswith("wake.source ") for n in children)
    # every span carries the wake's attributes
    for s in spans:
        tags = _tags(s)
        assert (tags["wake.id"], tags["wake.agent"], tags["wake.tier"], tags["wake.slot"]) == (row["wake_id"], "demo", "surface", "none"), s
    chats = [s for s in spans if s["operationName"] == "chat scripted-1"]
    for chat in chats:
        tags = _tags(chat)
        assert tags["gen_ai.operation.name"] == "chat" and tags["gen_ai.provider.name"] == "openai"
        assert tags["gen_ai.request.model"] == "scripted-1" and tags["gen_ai.response.model"]
        assert tags["gen_ai.usage.input_tokens"] > 0 and tags["gen_ai.usage.output_tokens"] > 0
        assert tags["wake.manifest_root"] == row["manifest_root"]  # the model calls come after the manifest
    assert sum(_tags(c)["gen_ai.usage.input_tokens"] for c in chats) == row["prompt_tokens"]
    assert sum(_tags(c)["gen_ai.usage.output_tokens"] for c in chats) == row["completion_tokens"]
    (tool,) = [s for s in spans if s["operationName"] == "execute_tool local_time"]
    ttags = _tags(tool)
    assert ttags["gen_ai.operation.name"] == "execute_tool" and ttags["gen_ai.tool.name"] == "local_time" and ttags["gen_ai.tool.call.id"]
    assert parent(tool) is root
    # no message content without the option
    for s in spans:
        tags = _tags(s)
        assert not CONTENT_KEYS & set(tags), s
        assert not any("herons" in str(v) for v in tags.values())


def test_message_content_is_on_the_spans_only_with_the_option(wake_cli: CLI, tmp_path: Path, jaeger: JaegerServer) -> None:
    service = f"wake-test-{uuid.uuid4().hex[:8]}"
    row, _ = _wake(wake_cli, tmp_path, jaeger, service, **{tracing.CAPTURE_ENV: "true"})
    spans = _read_trace(jaeger, row["trace_id"], want_spans=8)["spans"]
    chats = [_tags(s) for s in spans if s["operationName"] == "chat scripted-1"]
    assert len(chats) == 2 and all("herons" in c["gen_ai.input.messages"] for c in chats)
    assert any("all calm" in c["gen_ai.output.messages"] for c in chats)
    (tool,) = [_tags(s) for s in spans if s["operationName"] == "execute_tool local_time"]
    assert "gen_ai.tool.call.result" in tool and tool["gen_ai.tool.call.arguments"] == "{}"
