"""`wake logs` over lines written by wake's own log configuration (wake.logs, JSON): rendering,
filters, lines that are not JSON events, and which wake a line belongs to when it does not say."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator

import pytest
import structlog
from click.testing import CliRunner

from wake import logs
from wake.observe import logread

W1 = "4c608aeb-d52c-4051-b606-ca2ea50ace34"
W2 = "f12e3bdb-0245-4eb2-9676-939c02f848d4"


@pytest.fixture
def emit() -> Iterator[tuple[io.StringIO, Callable[..., None]]]:
    """Log through `wake.logs.configure("json")` into a buffer, as `wake daemon` does to stdout."""
    out = io.StringIO()
    logs.configure("json", "debug", stream=out)

    def line(name: str, level: str = "info", /, **fields: object) -> None:
        getattr(logs.get("wake.test"), level)(name, **fields)

    yield out, line
    logging.getLogger().handlers[:] = []


def run(text: str, *args: str) -> tuple[int, list[str], str]:
    result = CliRunner().invoke(logread.logs_command, [*args, "--color", "never"], input=text.encode())
    return result.exit_code, result.stdout.splitlines(), result.stderr


def events_of(lines: list[str]) -> list[str]:
    """The event name of each rendered line (the console renderer puts it after the level)."""
    return [line.split("] ", 1)[1].split()[0] for line in lines if "] " in line]


def test_each_event_is_one_line_of_the_console_renderer(emit: tuple[io.StringIO, Callable[..., None]]) -> None:
    out, line = emit
    line("wake.started", agent="demo", tier="whisper", wake_id=W1, trigger="manual", scheduled_for=None)
    line("bind.done", agent="demo", tier="whisper", wake_id=W1, tools=["local_time", "wake_manifest"], bound=2)
    written = out.getvalue().splitlines()
    code, shown, _ = run(out.getvalue())
    assert code == 0 and len(shown) == len(written) == 2
    renderer = structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
    for source, rendered in zip(written, shown, strict=True):
        event = json.loads(source)
        assert rendered == renderer(None, event["level"], dict(event))
        assert rendered.startswith(event["timestamp"]) and "[info" in rendered
    assert "tools=['local_time', 'wake_manifest']" in shown[1]


def test_colours_only_when_asked_or_on_a_terminal(emit: tuple[io.StringIO, Callable[..., None]]) -> None:
    out, line = emit
    line("lease.lost", "warning", agent="demo", fence=3)
    coloured = CliRunner().invoke(logread.logs_command, ["--color", "always"], input=out.getvalue().encode())
    plain = CliRunner().invoke(logread.logs_command, [], input=out.getvalue().encode())  # auto: not a terminal
    assert "\x1b[" in coloured.stdout
    assert "\x1b[" not in plain.stdout and "lease.lost" in plain.stdout


def test_a_traceback_logged_with_exception_is_shown_under_its_event(emit: tuple[io.StringIO, Callable[..., None]]) -> None:
    out, line = emit
    try:
        raise RuntimeError("the store went away")
    except RuntimeError:
        line("wake.failed", "exception", agent="demo", tier="whisper", wake_id=W1)
    code, shown, _ = run(out.getvalue(), "--level", "error")
    assert code == 0
    assert events_of(shown[:1]) == ["wake.failed"]
    assert any(text.startswith("Traceback") for text in shown) and shown[-1] == "RuntimeError: the store went away"


def test_minimum_level(emit: tuple[io.StringIO, Callable[..., None]]) -> None:
    out, line = emit
    line("arrival.block", "debug", block="clock")
    line("lease.acquired", "info", agent="demo", fence=1)
    line("lease.renew_failed", "warning", agent="demo", error="timeout")
    line("daemon.task_failed", "error", task="slot", error="boom")
    line("daemon.side_task_failed", "critical", task="heartbeat", error="boom")
    assert events_of(run(out.getvalue(), "--level", "warning")[1]) == ["lease.renew_failed", "daemon.task_failed", "daemon.side_task_failed"]
    assert events_of(run(out.getvalue(), "--level", "ERROR")[1]) == ["daemon.task_failed", "daemon.side_task_failed"]
    assert len(run(out.getvalue(), "--level", "debug")[1]) == 5


def test_event_globs(emit: tuple[io.StringIO, Callable[..., None]]) -> None:
    out, line = emit
    for name in ("lease.acquired", "lease.lost", "fence.stale", "wake.skipped", "daemon.ready"):
        line(name, agent="demo")
    assert events_of(run(out.getvalue(), "--event", "lease.*")[1]) == ["lease.acquired", "lease.lost"]
    assert events_of(run(out.getvalue(), "--event", "lease.*", "--event", "*.stale")[1]) == ["lease.acquired", "lease.lost", "fence.stale"]
    assert events_of(run(out.getvalue(), "--event", "wake.[st]kipped")[1]) == ["wake.skipped"]


def test_lines_that_are_not_json_events_pass_through_unchanged(emit: tuple[io.StringIO, Callable[..., None]]) -> None:
    out, line = emit
    line("daemon.ready", replica="box:1:ab")
    junk = [
        "Traceback (most recent call last):", '  File "x.py", line 1, in <module>', "{not json", "[1, 2, 3]",
        '{"no_event": true}', '{"event": 5}', "", "\ttabbed",
    ]
    text = out.getvalue() + "\n".join(junk) + "\n"
    code, shown, _ = run(text, "--agent", "nobody")  # filters never hide a line that is not an event
    assert code == 0 and shown == junk


def test_bytes_that_are_not_utf8_never_stop_the_reading(emit: tuple[io.StringIO, Callable[..., None]]) -> None:
    out, line = emit
    line("daemon.ready", replica="r1")
    data = b"\xff\xfe garbage \xc3\n" + out.getvalue().encode()
    result = CliRunner().invoke(logread.logs_command, ["--color", "never"], input=data)
    assert result.exit_code == 0
    first, second = result.stdout.splitlines()
    assert "garbage" in first and events_of([second]) == ["daemon.ready"]


def _wake(line: Callable[..., None], wake_id: str, tier: str = "whisper", **started: object) -> Callable[..., None]:
    """A wake's bound lines, as `wake.cycle.run_wake` writes them."""

    def bound(name: str, **fields: object) -> None:
        line(name, agent="demo", tier=tier, wake_id=wake_id, **fields)

    bound("wake.started", trigger=started.get("trigger", "manual"), scheduled_for=started.get("scheduled_for"))
    return bound


def test_one_wake_story_includes_its_unbound_lines_and_its_lease(emit: tuple[io.StringIO, Callable[..., None]]) -> None:
    out, line = emit
    line("schema.migrated", version=7, name="wake_slots")
    line("trigger.received", request_id="r1", agent="demo", tier="whisper")
    line("lease.acquired", agent="demo", fence=4, ttl_ms=60000)
    w1 = _wake(line, W1)
    line("arrival.block", block="identity", retrieval="ok")  # the module logger: no agent, no wake id
    line("lease.lost", "warning", agent="demo", fence=4)  # the lease keeper: agent and fence only
    line("fence.stale", "warning", agent="demo", fence=4, newest=5)
    w1("wake.settled", status="aborted")
    line("lease.acquired", agent="demo", fence=5, ttl_ms=60000)
    w2 = _wake(line, W2)
    line("arrival.block", block="identity", retrieval="ok")
    w2("wake.settled", status="completed")
    line("fence.stale", "warning", agent="demo", fence=4, newest=5)  # later, still under W1's fence
    code, shown, _ = run(out.getvalue(), "--wake", W1[:6])
    assert code == 0
    assert events_of(shown) == [
        "trigger.received", "lease.acquired", "wake.started", "arrival.block", "lease.lost", "fence.stale", "wake.settled", "fence.stale",
    ]
    assert "fence=4" in shown[1] and not any(W2 in text for text in shown)
    _, second, _ = run(out.getvalue(), "--wake", W2)
    assert events_of(second) == ["lease.acquired", "wake.started", "arrival.block", "wake.settled"]
    assert "fence=5" in second[0]


def test_a_line_of_two_open_wakes_that_names_neither_belongs_to_neither(emit: tuple[io.StringIO, Callable[..., None]]) -> None:
    out, line = emit
    a = _wake(line, W1)
    line("arrival.block", block="only_w1_open")
    line("lease.acquired", agent="other", fence=1, ttl_ms=60000)
    b = _wake(line, W2)
    line("arrival.block", block="both_open")
    line("model.turn", agent="demo", tier="whisper", turn=1)  # both wakes are demo's: ambiguous too
    a("wake.settled", status="completed")
    line("arrival.block", block="only_w2_open")
    b("wake.settled", status="completed")
    _, first, _ = run(out.getvalue(), "--wake", W1[:8])
    assert [t for t in first if "arrival.block" in t and "block=" in t] == [t for t in first if "block=only_w1_open" in t]
    assert "model.turn" not in " ".join(first)
    _, second, _ = run(out.getvalue(), "--wake", W2[:8])
    assert [t.split("block=")[1].split()[0] for t in second if "arrival.block" in t] == ["only_w2_open"]


def test_process_events_are_never_given_to_the_one_open_wake(emit: tuple[io.StringIO, Callable[..., None]]) -> None:
    out, line = emit
    w = _wake(line, W1)
    line("daemon.heartbeat_failed", "warning", error="redis away")
    line("control.request_malformed", "warning", entry="x", error="y")
    w("wake.settled", status="completed")
    assert events_of(run(out.getvalue(), "--wake", W1)[1]) == ["wake.started", "wake.settled"]


def test_catch_up_is_shown_before_the_wake_of_its_slot(emit: tuple[io.StringIO, Callable[..., None]]) -> None:
    out, line = emit
    slot = "2026-07-16T03:30:00+00:00"
    line("wake.catch_up", agent="demo", tier="full", slot=slot, last=None)
    line("wake.catch_up", agent="demo", tier="surface", slot="2026-07-16T09:00:00+00:00", last=None)
    line("lease.acquired", agent="demo", fence=9, ttl_ms=60000)
    w = _wake(line, W1, tier="full", trigger="catch_up", scheduled_for=slot)
    w("wake.settled", status="completed")
    _, shown, _ = run(out.getvalue(), "--wake", W1)
    assert events_of(shown) == ["wake.catch_up", "lease.acquired", "wake.started", "wake.settled"]
    assert "tier=full" in shown[0]


def test_agent_and_tier_filters_take_the_wake_a_line_belongs_to(emit: tuple[io.StringIO, Callable[..., None]]) -> None:
    out, line = emit
    w = _wake(line, W1, tier="surface")
    line("arrival.block", block="identity")
    w("wake.settled", status="completed")
    line("arrival.block", block="no_wake_open")
    line("lease.acquired", agent="other", fence=1, ttl_ms=60000)
    assert events_of(run(out.getvalue(), "--tier", "surface")[1]) == ["wake.started", "arrival.block", "wake.settled"]
    assert events_of(run(out.getvalue(), "--agent", "demo")[1]) == ["wake.started", "arrival.block", "wake.settled"]
    assert events_of(run(out.getvalue(), "--agent", "other")[1]) == ["lease.acquired"]
    assert run(out.getvalue(), "--tier", "whisper")[1] == []


def test_a_wake_that_is_not_in_the_input_exits_1_with_one_line(emit: tuple[io.StringIO, Callable[..., None]]) -> None:
    out, line = emit
    _wake(line, W1)("wake.settled", status="completed")
    code, shown, err = run(out.getvalue(), "--wake", "0000")
    assert (code, shown) == (1, [])
    assert err.strip() == "wake: no event of wake '0000' in the input"


def test_a_prefix_of_several_wakes_shows_them_all_and_says_so(emit: tuple[io.StringIO, Callable[..., None]]) -> None:
    out, line = emit
    _wake(line, "abc-1")("wake.settled", status="completed")
    _wake(line, "abc-2")("wake.settled", status="completed")
    code, shown, err = run(out.getvalue(), "--wake", "abc")
    assert code == 0 and len(shown) == 4
    assert "matches 2 wakes" in err


def test_usage_errors_exit_2() -> None:
    runner = CliRunner()
    assert runner.invoke(logread.logs_command, ["--level", "loud"], input=b"").exit_code == 2
    assert runner.invoke(logread.logs_command, ["/nonexistent/wake.jsonl"]).exit_code == 2
    assert runner.invoke(logread.logs_command, ["--wake", " "], input=b"").exit_code == 2
