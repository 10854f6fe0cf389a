"""Everything the CLI prints for a person, and its JSON: wakes, the ledger, diffs, the daemon's
status and triggers, doctor's checks, the capability map, retractions and probes. One table layout
(`table`) serves them all."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeVar

import ledgers.rows
from ledgers import introspection, queries
from untrusted import spotlight
from wake.config import plural

if TYPE_CHECKING:  # what is rendered, not imported to render it: a command imports the steps it runs
    import ledgers.actions
    import ledgers.outbox
    import ledgers.retractions
    from codecheck import workspace
    from ledgers import controls, facts, memory_ledger, probes, transcripts
    from surfaces import capability, probe
    from wake.cli import doctor
    from wake.daemon import remote
    from wake.run.cycle import WakeOutcome
    from wake.witness import anchor, manifest


def _default(value: object) -> object:
    if isinstance(value, ledgers.rows.Row):  # a ledger record: its columns, in its query's order
        return dict(ledgers.rows.fields(value))
    if isinstance(value, introspection.WakeRecord | introspection.WakeSummary):  # the wake row: its columns, the diff as stored
        return value.columns()
    if isinstance(value, introspection.WakeDiff):
        return value.as_json()
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, Decimal):  # money (numeric columns): a JSON number, as `wake up --json` prints it
        return float(value)
    return str(value)


def _plain(value: object) -> object:
    """A value for a text line: a Decimal in fixed notation (`0.00000000`, never `0E-8`)."""
    return format(value, "f") if isinstance(value, Decimal) else value


def to_json(value: object) -> str:
    return json.dumps(value, indent=2, default=_default, sort_keys=False)


def diff_lines(d: introspection.WakeDiff | None) -> list[str]:
    if d is None:
        return ["diff: (none)"]
    return [diff_line("agent", d.agent), diff_line("tier", d.tier)]


def diff_line(scope: str, part: introspection.Diff) -> str:
    if part.against is None:
        return f"diff vs previous {scope} wake: first wake"
    t, b = part.tools, part.blocks
    return (
        f"diff vs previous {scope} wake {part.against.wake_id[:8]}: tools +{len(t.added)} -{len(t.removed)} ~{len(t.changed)}"
        + "".join(f" {k}={','.join(names)}" for k, names in (("added", t.added), ("removed", t.removed), ("changed", t.changed)) if names)
        + "; blocks " + ", ".join(f"{k}={','.join(b.of(k))}" for k in b.KINDS if b.of(k) and k != "unchanged")
    )


def outcome(o: WakeOutcome) -> str:
    lines = [
        f"wake {o.wake_id}",
        f"agent {o.agent_id}  tier {o.tier}  trigger {o.trigger}  status {o.status}  ({o.duration_ms:.1f} ms)",
        f"manifest root {o.manifest.root if o.manifest else '-'}",
        f"tools bound ({len(o.binding)}): {', '.join(t.name for t in o.binding) or '(none)'}",
        "blocks:",
    ]
    for b in o.blocks:
        reason = f"  ({b.reason})" if b.reason else ""
        lines.append(f"  {b.name:<16} {b.cache_tier.name:<9} {b.retrieval:<8} {b.result:<8} {b.latency_ms:8.2f} ms  rows {b.rows}{reason}")
    lines += diff_lines(o.diff)
    lines += thinking_lines(o)
    if o.note:
        lines.append(f"note: {o.note}")
    if o.error:
        lines.append(f"error: {o.error}")
    if o.escalated is not None:
        lines += ["", f"escalated: {o.escalated.escalation_cause}", outcome(o.escalated)]
    return "\n".join(lines)


def thinking_lines(o: WakeOutcome) -> list[str]:
    """Steps 7 and 9 of a wake: the gate's verdict, the model's usage, the daybook text."""
    lines = [f"gate: {o.gate}"] if o.gate else []
    t = o.thinking
    if t is not None and t.model is not None:
        lines.append(
            f"model {t.model}: {plural(t.turns, 'turn')}, {plural(t.tool_calls, 'tool call')} ({t.refusals} refused), tokens {t.prompt_tokens} in"
            f" ({t.cached_tokens} cached) + {t.completion_tokens} out, ${t.cost_usd:.6f}, stopped: {t.stop_reason}"
        )
    if o.final_text:
        lines.append("daybook entry:")
        lines += [f"  {line}" for line in o.final_text.splitlines()]
    return lines


def thinking_json(o: WakeOutcome) -> dict[str, object]:
    t = o.thinking
    return {
        "gate": o.gate,
        "thinking": dataclasses.asdict(t) if t is not None else None,
        "final_text": o.final_text,
        "trigger": o.trigger,
        "escalation_cause": o.escalation_cause,
        "escalated": {"wake_id": o.escalated.wake_id, "tier": o.escalated.tier, "status": o.escalated.status, **thinking_json(o.escalated)}
        if o.escalated
        else None,
    }


def _text(value: object) -> str:
    """A column's value on a text line, never a Python repr: `-` for none, lists joined, mappings
    as compact JSON, times in ISO 8601, money in fixed notation."""
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ", ".join(_text(v) for v in value) or "(none)"
    if isinstance(value, Mapping):
        return json.dumps(value, default=_default, separators=(", ", ": "))
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(_plain(value))


B = TypeVar("B")


def in_arrival_order(blocks: Mapping[str, B], order: Sequence[str] | None) -> list[tuple[str, B]]:
    """The blocks in the order the prompt had them (`arrival_order`), any it does not name after."""
    named = [n for n in (order or ()) if n in blocks]
    return [(n, blocks[n]) for n in named] + [(n, b) for n, b in blocks.items() if n not in named]


def row(record: introspection.WakeRecord) -> str:
    r = record.columns()
    stored = ("note", "error", "final_text", "escalation_cause")  # stored text (the model's, a tool's, an error's): marked data
    lines = [f"{k}: {spotlight.OPERATOR.span(v) if k in stored and isinstance(v, str) else spotlight.neutral(_text(v))}"
             for k, v in r.items() if k not in ("blocks", "tool_hashes", "diff", "active_tool_names")]
    lines.append(f"active_tool_names: {', '.join(record.active_tool_names) or '(none)'}")
    lines.append("tool_hashes:")
    lines += [f"  {name:<24} {h}" for name, h in sorted(record.tool_hashes.items())]
    lines.append("blocks (in arrival order):")
    for name, b in in_arrival_order(record.blocks, record.arrival_order):
        reason = f"  ({b['reason']})" if b.get("reason") else ""
        latency = f"{b['latency_ms']:8.2f} ms" if b.get("latency_ms") is not None else "       - ms"
        lines.append(
            f"  {name:<16} {_text(b.get('cache_tier')):<9} {_text(b.get('retrieval')):<8} {_text(b.get('result')):<8} {latency}"
            f"  rows {_text(b.get('rows'))}  {_text(b.get('hash'))[:16]}{reason}"
        )
    lines += diff_lines(record.diff)
    return "\n".join(lines)


def ledger(rows: Sequence[introspection.WakeSummary]) -> str:
    header = ("STARTED (UTC)", "AGENT", "TIER", "TRIGGER", "STATUS", "TOOLS", "DURATION", "COST", "ROOT", "WAKE")
    body = []
    for r in rows:
        duration = f"{(r.finished_at - r.started_at).total_seconds() * 1000:.0f} ms" if r.finished_at else "running"
        body.append((
            f"{r.started_at.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S}", r.agent_id, r.tier, r.trigger, r.status,
            f"{r.active_tools_count}/{r.registry_tool_count}", duration,
            f"${r.cost_usd:.4f}" if r.model else "-", (r.manifest_root or "-")[:12], str(r.wake_id)[:8],
        ))
    return "\n".join(table(header, body, indent=""))


def trigger_lines(result: remote.TriggerResult, timeout_s: float) -> list[str]:
    """The human-readable end of a trigger (the `wake <id>` line is printed when it starts)."""
    if result.outcome == "settled":
        lines = [f"agent {result.agent}  tier {result.tier}  trigger manual  status {result.status}"]
        lines += [f"note: {result.note}"] if result.note else []
        lines += [f"error: {result.error}"] if result.error else []
        return lines
    if result.outcome == "started":
        return [f"started; not waiting for the outcome (see `wake show {result.wake_id}`)"]
    if result.outcome == "refused":
        return [f"the daemon refused the request: {result.reason}"]
    if result.wake_id:
        return [f"timed out after {timeout_s:g}s waiting for wake {result.wake_id} to settle; it is still running (see `wake show {result.wake_id}`)"]
    if result.withdrawn:
        return [f"timed out after {timeout_s:g}s: no daemon took the request; it was withdrawn and will not run"]
    return [f"timed out after {timeout_s:g}s: a daemon took the request but reported no start"]


def table(header: Sequence[str], rows: Sequence[Sequence[object]], indent: str = "  ", right: frozenset[int] = frozenset()) -> list[str]:
    """Columns as wide as their widest cell, two spaces apart; None shows as `-`; the columns in
    `right` are right-aligned. The one table layout of every command."""
    cells = [tuple(header), *(tuple("-" if c is None else str(c) for c in row) for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [
        (indent + "  ".join(f"{c:>{w}}" if i in right else f"{c:<{w}}" for i, (c, w) in enumerate(zip(row, widths, strict=True)))).rstrip()
        for row in cells
    ]


def _in(now: dt.datetime, at: str) -> str:
    seconds = (dt.datetime.fromisoformat(at) - now).total_seconds()
    if seconds < 0:
        return f"{-seconds:.0f}s ago"
    if seconds < 120:
        return f"in {seconds:.0f}s"
    if seconds < 7200:
        return f"in {seconds / 60:.0f}m"
    return f"in {seconds / 3600:.1f}h"


def status_lines(s: dict[str, Any]) -> list[str]:
    now = dt.datetime.fromisoformat(s["at"])
    lines: list[str] = [f"{h['store']}: {'ok' if h['ok'] else 'DOWN'} ({h['detail']})" for h in s.get("stores", [])]
    if lines:
        lines.append("")
    if s["replicas"]:
        lines.append(f"replicas ({len(s['replicas'])} live)")
        lines += table(
            ("REPLICA", "HOST", "PID", "VERSION", "UP SINCE (UTC)", "HEARTBEAT", "AGENTS"),
            [(r["replica_id"], r["host"], r["pid"], r["version"],
              f"{dt.datetime.fromisoformat(r['started_at']).astimezone(dt.UTC):%Y-%m-%d %H:%M:%S}", f"{r['heartbeat_age_s']:g}s ago",
              "leaving" if r.get("leaving") else r.get("owned", 0))
             for r in s["replicas"]],
        )
    else:
        lines.append(f"no daemon alive (no replica heartbeat in redis at {s['redis']})")
    lines.append("")
    lines.append("running wakes" + ("" if s["running"] else ": none"))
    if s["running"]:
        lines += table(
            ("AGENT", "TIER", "TRIGGER", "WAKE", "STARTED", "FENCE", "REPLICA"),
            [(w.get("agent"), w.get("tier"), w.get("trigger"), w.get("wake_id"),
              _in(now, w["started_at"]) if w.get("started_at") else None, w.get("fence"), w["replica_id"])
             for w in s["running"]],
        )
    lines.append("")
    lines.append("leases")
    lines += table(
        ("AGENT", "OWNER", "HELD", "HOLDER", "TTL LEFT", "FENCE"),
        [(r["agent"], r.get("owner"), "yes" if r["held"] else "no", r["holder"], f"{r['ttl_s']:g}s" if r["ttl_s"] is not None else None,
          r["fence"])
         for r in s["leases"]],
    )
    lines.append("")
    if s["daemon_alive"] or s["next_fires"]:
        # without a daemon, `wake.cli.health` computes them from the config; a paused one is marked
        lines.append("next fires" if s["daemon_alive"] else "next fires (from the config: no daemon alive to run them)")
        skipped = any(f.get("skipped") for f in s["next_fires"])
        lines += table(
            ("AGENT", "TIER", "AT (UTC)", "WHEN", "NEXT ACTIVE (UTC)", *(("SKIPPED",) if skipped else ())),
            [(f["agent"], f["tier"],
              f"{dt.datetime.fromisoformat(f['at']).astimezone(dt.UTC):%Y-%m-%d %H:%M:%S}" if f["at"] else "not scheduled",
              _in(now, f["at"]) if f["at"] else None, _next_active(f), *((f.get("skipped") or "",) if skipped else ()))
             for f in s["next_fires"]],
        )
    else:
        lines.append("next fires: unknown (no daemon alive to schedule them)")
    lines.append("")
    lines.append(f"trigger requests waiting: {s['pending_requests']}")
    return lines + controls_lines(s)


def _next_active(fire: Mapping[str, Any]) -> str | None:
    """The next fire inside the tier's active hours: `same` when it is the next fire itself."""
    if "next_active" not in fire:  # a snapshot from before active hours
        return None
    active = fire["next_active"]
    if active is None:
        return "none within reach" if fire.get("at") else None
    return "same" if active == fire["at"] else f"{dt.datetime.fromisoformat(active).astimezone(dt.UTC):%Y-%m-%d %H:%M:%S}"


def _utc(value: dt.datetime | None) -> str | None:
    return f"{value.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S}" if value else None


def controls_lines(s: Mapping[str, Any]) -> list[str]:
    """`wake status`: the pauses in force and the pending one-shots (from PostgreSQL)."""
    if "controls_error" in s:
        return ["", f"pauses and one-shots: unknown ({s['controls_error']})"]
    if "pauses" not in s:
        return []
    lines = ["", "pauses" + ("" if s["pauses"] else ": none")]
    if s["pauses"]:
        lines += table(
            ("AGENT", "TIER", "BY", "SINCE (UTC)", "UNTIL (UTC)", "REASON"),
            [(p.agent_id, p.tier, spotlight.neutral(p.paused_by), _utc(p.paused_at), _utc(p.until) or "resume",
              spotlight.neutral(p.reason) if p.reason else None) for p in s["pauses"]],
        )
    lines += ["", "one-shot wakes pending" + ("" if s["oneshots"] else ": none")]
    if s["oneshots"]:
        lines += oneshots(s["oneshots"])
    return lines + findings_lines(s.get("open_findings"))


def findings_lines(counts: Mapping[str, Mapping[str, int]] | None) -> list[str]:
    """`wake status`: each agent's open Cloister findings, every level (`wake memory findings` lists them)."""
    if counts is None:
        return []
    total = sum(sum(c.values()) for c in counts.values())
    lines = ["", "open memory findings" + (f" ({total}; wake memory findings --agent A lists them)" if total else ": none")]
    if total:
        lines += table(("AGENT", "HALT", "WARN", "LOG"), [(spotlight.neutral(a), c.get("HALT", 0), c.get("WARN", 0), c.get("LOG", 0))
                                                          for a, c in sorted(counts.items())])
    return lines


def oneshots(shots: Sequence[controls.OneShot]) -> list[str]:
    """`wake at --list`: each one-shot, its time, and what became of it."""
    if not shots:
        return ["no one-shot wakes pending"]

    def state(r: controls.OneShot) -> str:
        if r.cancelled_at:
            return f"cancelled by {r.cancelled_by}"
        if r.claimed_at:
            return f"ran: {r.status or 'claimed'} ({r.claimed_by})"
        return "pending"

    return table(
        ("ID", "AGENT", "TIER", "AT (UTC)", "STATE", "BY", "NOTE"),
        [(str(r.wake_id), r.agent_id, r.tier, _utc(r.fire_at), state(r), r.created_by, r.note) for r in shots],
        indent="",
    )


def outbox(deliveries: Sequence[ledgers.outbox.Delivery], targets: Mapping[int, str]) -> list[str]:
    """`wake outbox`: deliveries not sent yet, the newest first, each with its route's target
    (redacted: `wake.daemon.channels.route_target`)."""
    if not deliveries:
        return ["the outbox is empty: every delivery was sent"]
    return table(
        ("ID", "STATE", "ROUTE", "TARGET", "AGENT", "TIER", "WAKE", "ATTEMPTS", "QUEUED (UTC)", "LAST ERROR"),
        [(r.id, r.state, r.route, targets.get(r.id, "-"), r.agent_id, r.tier, str(r.wake_id)[:8], r.attempts, _utc(r.created_at), r.last_error)
         for r in deliveries],
        indent="", right=frozenset({0, 7}),
    )


def checks(checks: list[doctor.Check]) -> str:
    rows = [(c.check, c.status, f"{c.latency_ms:.2f} ms" if c.latency_ms is not None else "-", c.detail) for c in checks]
    return "\n".join(table(("CHECK", "STATUS", "LATENCY", "DETAIL"), rows, indent="", right=frozenset({2})))


def capability_map(cmap: capability.CapabilityMap) -> str:
    lines = [f"registry: {cmap.registry_size} tools"]
    width = max([len(t["name"]) for t in cmap.tools] + [4])
    lines.append(f"{'TOOL':<{width}}  {'MUT':<3}  {'SURFACES':<36}  {'FLOWS':<38}  BOUND BY")
    for t in cmap.tools:
        approval = "  (requires approval)" if t.get("requires_approval") else ""
        bound_by = ", ".join(t["bound_by"]) or "-"
        labels = ", ".join(t.get("flows", ())) or "-"
        mutates = "yes" if t["mutates"] else "no"
        lines.append(f"{t['name']:<{width}}  {mutates:<3}  {', '.join(t['surfaces']):<36}  {labels:<38}  {bound_by}{approval}")
    lines.append("")
    lines.append("tier                      bound / registry   binds")
    for label, tier in cmap.tiers.items():
        lines.append(f"{label:<25} {tier['bound']:>5} / {cmap.registry_size:<8}   {', '.join(tier['binds'])}")
        toxic = tier.get("toxic_flow")
        if toxic:
            lines.append(f"  ! toxic flow {toxic['id']}: untrusted input {', '.join(toxic['untrusted_input'])}; "
                         f"private data {', '.join(toxic['private_data'])}; egress {', '.join(toxic['egress'])}")
    lines.append("")
    lines.append("surface          tools declaring")
    for s, n in cmap.surfaces.items():
        lines.append(f"{s:<16} {n}")
    lines.append("")
    if cmap.inert:
        lines.append("inert declarations:")
        lines.extend(f"  ! {i}" for i in cmap.inert)
    else:
        lines.append("inert declarations: none")
    if cmap.unbound_builtins:
        lines.append(f"built-in tools no tier binds (the tiers' choice): {', '.join(cmap.unbound_builtins)}")
    return "\n".join(lines)


def retractions(rows: list[ledgers.retractions.Retraction], total: int, zone: str = "UTC") -> str:
    from surfaces import epistemic_tools
    from wake.arrival import falsifiers

    if not rows:
        return f"no retractions (0 of {total})"
    data = spotlight.OPERATOR  # what the agent wrote of its own claims: marked data
    out = []
    for r in rows:
        spec = epistemic_tools.spec_of(r)
        checked_text = f" on {falsifiers.local_date(r.falsifier_checked_at, zone)}: {r.falsifier_outcome}" if r.falsifier_checked_at else ""
        out += [
            f"{r.id}  {r.agent_id}  corrected {falsifiers.local_date(r.corrected_at, zone)}"
            f"  matures {falsifiers.local_date(r.matures_at, zone)}"
            f"  {r.verdict}{checked_text}  [{r.row_class}, caught by {r.caught_by}]",
            f"  retracted: {data.span(r.claim_verbatim)}",
            f"  stood on:  {data.span(r.stood_on)}",
            f"  why wrong: {data.span(r.why_wrong)}",
            f"  held now:  {data.span(r.corrected_claim)}",
            f"  test:      {data.span(r.test_procedure)}",
            f"  stands if: {data.span(r.expected_retraction_pass_obs)}",
            f"  restored if: {data.span(r.overturn_retraction_condition)}",
        ]
        if spec is not None:
            out.append(f"  probe:     {spec.describe()}")
    out.append(f"{len(rows)} of {total} shown")
    return "\n".join(out)


def probe_result(result: probe.ProbeResult) -> str:
    from surfaces import probe

    return f"{result.verdict}  {result.spec.describe()}\n{probe.note(result)}\nresolved: {result.resolved_path or '-'}"


def probe_self_test(test: probe.SelfTest) -> str:
    lines = [f"{'ok  ' if c['ok'] else 'FAIL'}  {c['name']}: expected {c['expect']}, got {c['got']}" for c in test.controls]
    lines.append("instrument passed its dual-needle controls" if test.passed
                 else "instrument FAILED its dual-needle controls: its verdicts are not trusted")
    return "\n".join(lines)


def probe_records(records: list[probes.ProbeRecord]) -> str:
    if not records:
        return "no probe records"
    out = []
    for r in records:
        what = (
            f"{r.target} {'does not contain' if r.negate else 'contains'} {r.needle!r}"
            if r.mode == "contains"
            else f"{r.target} {r.mode}"
        )
        cause = f" — {r.evidence.get('cause')}" if r.evidence.get("cause") else ""
        links = "".join(f"  {k} {str(v)[:8]}" for k, v in (("wake_id", r.wake_id), ("retraction_id", r.retraction_id)) if v)
        said = f"  (assertion: {r.assertion})" if r.assertion else ""
        failed = sum(1 for c in r.controls if not c.get("ok"))
        out.append(f"{r.checked_at:%Y-%m-%d %H:%M:%S}  {r.agent_id}  {r.verdict:<16} {what}{cause}  "
                   f"[instrument {r.instrument_state}, {len(r.controls)} controls, {failed} failed; {r.resolved_path or '-'}]"
                   f"{links}{said}  {str(r.id)[:8]}")
    return "\n".join(out)


def messages(sent: Sequence[Mapping[str, object]]) -> str:
    """The messages of a request as the model gets them, each under its role: the harness's
    preamble, the blocks and the closing instruction, nothing left out (`wake up --dry-run`)."""
    return "\n\n".join(f"--- {m['role']} ---\n{m.get('content') or ''}" for m in sent)


def facts_listing(rows: Sequence[facts.Fact], total: int) -> list[str]:
    """`wake facts`: one line per fact, its passport the harness's mark, its category, key, value and
    anchors marked data (`untrusted.spotlight`), then how many of how many were listed."""
    from ledgers import facts
    data = spotlight.OPERATOR
    out = []
    for r in rows:
        refs = ", ".join(
            f"{label} {str(getattr(r, k))[:8]}" for label, k in (("attested by", "attested_ref"), ("cites", "source_ref"),
                                                       ("supersedes", "supersedes_id"), ("wake", "wake_id")) if getattr(r, k)
        )
        when = f"recorded {r.recorded_at:%Y-%m-%d %H:%M}" + (f", superseded {r.superseded_at:%Y-%m-%d %H:%M}" if r.superseded_at else "")
        anchors = "".join(facts.anchor_text(a, data) for a in r.anchors)
        passport = spotlight.mark(f"{r.origin}, {when}")
        said = f"{data.span(r.category)}/{data.span(r.fact_key)}: {data.span(r.fact_value)}{anchors}"
        out.append(f"{str(r.fact_id)[:8]}  {spotlight.neutral(r.status):<10} {passport} {said}"
                   + (f"  <{spotlight.neutral(refs)}>" if refs else "") + f"  [{spotlight.neutral(r.agent_id)}]")
    out.append(f"{len(rows)} of {total} facts")
    return out


def arrival(blocks: Sequence[tuple[str, str | None]]) -> str:
    """`wake show --arrival`: the blocks as the prompt had them (`## name`, then the text)."""
    if not blocks:
        return "(this wake recorded no blocks)"
    missing = "(its text is not stored: recorded before the content store)"
    return "\n\n".join(f"## {spotlight.neutral(name)}\n{spotlight.terminal(text) if text is not None else missing}" for name, text in blocks)


def verify_lines(r: introspection.WakeRecord, recomputed: str, differences: Sequence[manifest.Difference]) -> list[str]:
    lines = [f"stored root     {r.manifest_root}", f"recomputed root {recomputed}  {'OK' if not differences else 'MISMATCH'}"]
    lines += [f"  {d.part}: {d.detail}" for d in differences]
    lines.append(f"chain link {r.chain_seq}  {r.chain}" if r.chain else "chain: not linked (open, or recorded before the chain)")
    return lines


def live_lines(r: introspection.WakeRecord, now: WakeOutcome) -> list[str]:
    """`wake verify --live`: the stored manifest against the sources and binding run now."""
    assert now.manifest is not None
    stored_blocks = {n: b["hash"] for n, b in r.blocks.items()}
    changed_blocks = sorted(n for n in set(stored_blocks) | set(now.manifest.blocks) if stored_blocks.get(n) != now.manifest.blocks.get(n))
    changed_tools = sorted(n for n in set(r.tool_hashes) | set(now.manifest.tools) if r.tool_hashes.get(n) != now.manifest.tools.get(n))
    return [
        f"live root       {now.manifest.root}  {'same' if now.manifest.root == r.manifest_root else 'differs'}",
        f"blocks that differ now: {', '.join(changed_blocks) or 'none'}",
        f"tools that differ now: {', '.join(changed_tools) or 'none'}",
        f"({now.note})",
    ]


def chain_lines(checks: Sequence[introspection.ChainCheck]) -> list[str]:
    """`wake verify --chain`: per agent, intact (with its head, to compare with `wake.settled chain=`) or the first break."""
    if not checks:
        return ["no chain yet: no wake has settled"]
    lines = []
    for c in checks:
        head = f"head link {c.head[0]} {c.head[1]}" if c.head else "no head"
        if c.why is None:
            lines.append(f"{c.agent_id}: OK, {c.rows} link(s); {head}")
            continue
        lines.append(f"{c.agent_id}: BROKEN ({c.rows} link(s) stored); {head}")
        if c.broken is not None:
            lines.append(f"  first broken row: wake {c.broken.wake_id} (link {c.broken.chain_seq}, {c.broken.status}, "
                         f"started {c.broken.started_at.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC)")
        lines.append(f"  {c.why}")
    return lines


def anchor_lines(anchored: Sequence[anchor.Anchored], checks: Sequence[anchor.AnchorCheck]) -> list[str]:
    """`wake verify --chain [--anchor]`: the heads just anchored, then per agent its anchors verified,
    or the first that no longer matches and the first row after the last that does."""
    lines = []
    for a in anchored:
        when = f"timestamped {a.gen_time.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC" if a.fresh and a.gen_time else "anchored before"
        lines.append(f"{a.agent_id}: anchored head link {a.chain_seq} {a.chain[:16]}... ({when})")
    for c in checks:
        if not c.anchors:
            continue
        if c.mismatch is None:
            how = f"{c.verified} of {c.anchors} anchor(s) verify" if c.verified == c.anchors else f"{c.anchors} anchor(s), not verified (no ca_file)"
            lines.append(f"{c.agent_id}: {how}")
            continue
        m = c.mismatch
        lines.append(f"{c.agent_id}: ANCHOR MISMATCH ({c.verified} of {c.anchors} anchor(s) verify before it)")
        where = f"after link {m.last_good}, the last anchored link that matches" if m.last_good else "from its start (no anchored link matches)"
        if m.first_suspect is not None:
            r = m.first_suspect
            lines.append(f"  the chain no longer matches an anchored head {where}: first row after it: wake {r.wake_id} (link {r.chain_seq}, "
                         f"{r.status}, started {r.started_at.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC)")
        else:
            lines.append(f"  the chain no longer matches an anchored head {where}")
        lines.append(f"  {m.why}")
    return lines


def fact_checks(report: Mapping[str, Any]) -> str:
    """`wake facts --check`: each fact's verdict at HEAD and what was seen, the counts, and the
    active facts it did not check (beyond --limit, or with no code anchor)."""
    checks: Sequence[Mapping[str, Any]] = report["facts"]
    out = []
    for c in checks:
        at = f" @{c['head'][:8]}" if c["head"] else ""
        data = spotlight.OPERATOR
        out.append(f"{str(c['fact_id'])[:8]}  {c['status']:<12}{at}  {data.span(c['fact_key'])}: {data.span(c['fact_value'])}")
        out.append(f"  {spotlight.mark(c['evidence'])}")
        out += [f"  - {spotlight.neutral(f['outcome'])}: {spotlight.mark(f['evidence'])}" for f in c["findings"]]
    counts = {s: sum(1 for c in checks if c["status"] == s) for s in ("verified", "partly", "refuted", "inconclusive")}
    recorded = "recorded in fact_checks" if report["recorded"] else "not recorded"
    partly = f"{counts['partly']} partly anchored (not settled), " if counts["partly"] else ""
    line = (f"{len(checks)} checked: {counts['verified']} verified, {partly}{counts['refuted']} refuted, "
            f"{counts['inconclusive']} inconclusive ({recorded})") if checks else "no active facts with code anchors to check"
    skipped = report["not_checked"]
    why = [*([f"beyond --limit {report['limit']}"] if skipped["beyond_limit"] else []),
           *([f"{skipped['no_code_anchor']} with no code anchor (arrivals show them inconclusive)"] if skipped["no_code_anchor"] else [])]
    if why:
        line += f"; {skipped['beyond_limit'] + skipped['no_code_anchor']} of {report['active']} active facts not checked: {', '.join(why)}"
    out.append(line)
    return "\n".join(out)


def workspace_status(agent: str, s: workspace.Status) -> str:
    """`wake workspace status`: HEAD, the fingerprint's age, size and build, the skipped files."""
    size = ", ".join(f"{k} {v}" for k, v in s.size.items()) or "-"
    lines = [
        f"agent {agent}: workspace {s.root}",
        *table(("", ""), [
            ("HEAD", s.head),
            ("fingerprint age", f"{s.fingerprint_age_s:.1f} s" if s.fingerprint_age_s is not None else None),
            ("build", f"{s.build_ms:.0f} ms ({s.parsed} blobs parsed, {s.reused} reused)" if s.build_ms is not None else None),
            ("size", size),
            ("skipped", len(s.skipped)),
        ])[1:],
    ]
    lines += [f"  skipped {k['path']}: {k['reason']}" for k in s.skipped]
    return "\n".join(lines)

def _size(n: int | None) -> str:
    return "-" if n is None else f"{n} B" if n < 1024 else f"{n / 1024:.1f} KB"


def memory_files(files: Sequence[Mapping[str, Any]], head: str | None) -> list[str]:
    """`wake memory ls`: one row per file, the exact total under them."""
    data = spotlight.OPERATOR  # a name and a description are stored text: marked data
    rows = [(data.span(f["path"]), _size(f["bytes"]), "read-only" if f["read_only"] else "",
             data.span(f["description"], 200) if f["description"] else "(no description)") for f in files]
    tip = f" at {head[:12]}" if head else ""
    return [*table(("PATH", "SIZE", "", "DESCRIPTION"), rows, indent="", right=frozenset({1})), f"{len(files)} files{tip}"]


def memory_log(commits: Sequence[Mapping[str, Any]], writes_recorded: int) -> list[str]:
    """`wake memory log`: each commit with the memory write that made it, or that none did."""
    from memory import provenance  # only the memory log reads commit trailers

    if not commits:
        return ["no commits"]
    out = []
    for c in commits:
        w: memory_ledger.MemoryWrite | None = c["write"]
        if w is None:
            made = "NOT the memory tool's (made with git directly)" if c["trailers"].get("Wake-Id") != "bootstrap" else "bootstrap"
        elif w.op == "revert":
            made = f"revert by {w.author}"
        else:
            made = f"{w.op} by {w.author}, wake {str(w.wake_id)[:8]} ({w.tier}, fence {w.fence})"
        sizes = f", {_size(w.bytes_before)} -> {_size(w.bytes_after)}" if w is not None else ""
        data = spotlight.OPERATOR  # a commit's summary, paths, provenance and reason are stored text: marked data
        out.append(f"{c['commit'][:12]}  {c['at']:%Y-%m-%d %H:%M:%S}  {data.span(c['summary'], 200)}")
        out.append(f"    {spotlight.neutral(made)}{sizes}; {', '.join(data.span(p) for p in c['paths']) or '(no file)'}")
        out.append(f"    text from: {data.span(provenance.describe(provenance.of_trailers(c['trailers'])), 300)}")
        if w is not None and w.reason:
            out.append(f"    reason: {data.span(w.reason, 300)} (recorded {w.at:%Y-%m-%d %H:%M:%S}, write #{w.write_id})")
    out.append(f"{len(commits)} commits shown; {writes_recorded} writes recorded")
    return out


def memory_findings(found: Sequence[memory_ledger.FindingRecord], total: int, state: str) -> list[str]:
    """`wake memory findings`: one row per finding, then each one's excerpt."""
    if not found:
        return [f"no {state if state != 'all' else ''} findings".replace("  ", " ")]
    head = ("ID", "SEVERITY", "STATE", "DOMAIN", "PATH", "RULE", "COMMIT", "AT", "ACTED")
    data = spotlight.OPERATOR
    body = [
        (f"#{r.finding_id}", r.severity, r.state, r.domain or "-", data.span(r.path, 80) if r.path else "(repository)", data.span(r.rule, 80),
         (r.commit_id or "uncommitted")[:12], f"{r.at:%Y-%m-%d %H:%M}",
         f"{spotlight.neutral(str(r.acked_by))} {r.acted_at:%Y-%m-%d %H:%M}" + (f": {data.span(r.note, 80)}" if r.note else "")
         if r.acted_at else None)
        for r in found
    ]
    out = table(head, body, indent="")
    for r in found:  # the excerpt quotes what the finding warns about: marked data, invisible characters shown
        out += [f"#{r.finding_id} {data.span(r.rule, 80)}:", *data.lines(str(r.excerpt or ""), indent="    ", max_lines=6, limit=200)]
    out.append(f"{len(found)} of {total} shown")
    return out


def memory_audit(v: Mapping[str, Any]) -> list[str]:
    """`wake memory audit`: what this audit read and found, then the open findings."""
    head = v["head"][:12] if v["head"] else "(no branch)"
    out = [f"audited {v['commits']} commits up to {head} and the work tree: {v['findings']} findings, {len(v['new'])} new"]
    data = spotlight.OPERATOR  # a finding's place: marked data (its rule is the canary's name)
    out += [f"  new #{n['id']} {n['severity']} {spotlight.neutral(n['rule'])} {data.span(n['path'], 200) if n['path'] else '(repository)'}"
            for n in v["new"]]
    out.append(f"open findings: {v['open_total']}")
    out += [
        f"  #{r.finding_id} {r.severity} {spotlight.neutral(r.rule)} {data.span(r.path, 200) if r.path else '(repository)'}"
        f" {(r.commit_id or 'uncommitted')[:12]}" for r in v["open"]
    ]
    out.append("HALT open: the agent's wakes make no model call until `wake memory ack` or `wake memory revert`" if v["halted"] else "no HALT open")
    return out


def transcript(t: Mapping[str, Any]) -> str:
    """`wake show --transcript`: the conversation as the model saw it, each call under the turn
    that made it, each answer with the call it answers."""
    head = f"wake {t['wake_id']}  agent {t['agent_id']}  tier {t['tier']}  status {t['status']}"
    if "replay_id" in t:  # a stored replay's (`ledgers.replays.as_dict`): each call also says what answered it
        head = f"replay {t['replay_id']} of {head}"
    if not t["messages"]:
        return head + "\n(no transcript: this wake sent nothing to a model)"
    calls = {(c["turn"], c["call_id"]): c for c in t["calls"]}
    by_answer = {c["answer_seq"]: c for c in t["calls"]}
    lines = [head, f"{len(t['messages'])} messages, {len(t['calls'])} tool calls; transcript root {t['transcript_root']}"]
    for m in t["messages"]:
        answered = by_answer.get(m["seq"])
        title = f"{m['role']} (turn {m['turn']})" if answered is None else (
            f"tool answer to {answered['call_id']} {answered['tool']}: {answered['outcome']}, {answered['latency_ms']:g} ms"
        )
        cut = f"  [cut: {m['chars']} characters in all]" if m["cut"] else ""
        lines += ["", f"### {m['seq']} {title}{cut}"]
        if not m["stored"]:
            lines.append("(its body is not stored)")
            continue
        if m["content"]:  # the model's own words are stored text; what the harness sent it is already marked
            content = str(m["content"])
            lines += spotlight.OPERATOR.lines(content) if m["role"] == "assistant" else [spotlight.terminal(content)]
        for call in m.get("tool_calls") or []:
            fn = call.get("function") or {}
            c = calls.get((m["turn"], call.get("id")))
            outcome = f"  -> {c['outcome']} (answer {c['answer_seq']})" if c is not None else ""
            if c is not None and "answered_from" in c:
                outcome += f", answered from {c['answered_from']}{', mutating' if c['mutates'] else ''}"
            arguments = fn.get("arguments")
            lines.append(f"call {spotlight.neutral(str(call.get('id')))}: {spotlight.neutral(str(fn.get('name')))} "
                         f"{spotlight.OPERATOR.span(arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False))}"
                         f"{outcome}")
    return "\n".join(lines)


def actions(rows: Sequence[ledgers.actions.Action], total: int, since: dt.datetime) -> list[str]:
    """`wake actions`: the confirmed mutating actions, newest first, with the exact total."""
    if not rows:
        return [f"no confirmed actions since {_utc(since)} UTC"]
    body = [(_utc(r.acted_at), spotlight.neutral(r.surface), spotlight.neutral(r.tool), str(r.wake_id)[:8] if r.wake_id else None, r.fence,
             spotlight.OPERATOR.span(r.summary, 200)) for r in rows]
    return [*table(("ACTED (UTC)", "SURFACE", "TOOL", "WAKE", "FENCE", "SUMMARY"), body, indent=""),
            f"{len(rows)} of {queries.count_text(total)} since {_utc(since)} UTC"]


def transcript_line(said: transcripts.Stored, r: Mapping[str, object]) -> str:
    """`wake verify`: what of the transcript was checked."""
    if said.empty:
        return "transcript: none (this wake sent nothing to a model)" if r.get("transcript_root") is None else "transcript: its records are missing"
    return f"transcript root {r.get('transcript_root')}  ({len(said.messages)} messages, {len(said.calls)} tool calls, each body rehashed)"
