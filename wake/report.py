"""Human-readable renderings of wakes and ledgers for the CLI."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from wake.cycle import WakeOutcome


def _default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, Decimal):  # money (numeric columns): a JSON number, as `wake up --json` prints it
        return float(value)
    return str(value)


def _plain(value: Any) -> Any:
    """A value for a text line: a Decimal in fixed notation (`0.00000000`, never `0E-8`)."""
    return format(value, "f") if isinstance(value, Decimal) else value


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, default=_default, sort_keys=False)


def diff_lines(d: Mapping[str, Any] | None) -> list[str]:
    if not d:
        return ["diff: (none)"]
    lines = []
    for scope in ("agent", "tier"):
        part = d.get(scope)
        if part is None:
            continue
        if part["first"]:
            lines.append(f"diff vs previous {scope} wake: first wake")
            continue
        t, b = part["tools"], part["blocks"]
        lines.append(
            f"diff vs previous {scope} wake {part['against']['wake_id'][:8]}: tools +{len(t['added'])} -{len(t['removed'])} ~{len(t['changed'])}"
            + "".join(f" {k}={','.join(t[k])}" for k in ("added", "removed", "changed") if t[k])
            + "; blocks " + ", ".join(f"{k}={','.join(v)}" for k, v in b.items() if v and k != "unchanged")
        )
    return lines


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
    """Steps 8-9 of a wake: the gate's verdict, the model's usage, the daybook text."""
    lines = [f"gate: {o.gate}"] if o.gate else []
    t = o.thinking
    if t is not None and t.model is not None:
        lines.append(
            f"model {t.model}: {t.turns} turns, {t.tool_calls} tool calls ({t.refusals} refused), tokens {t.prompt_tokens} in"
            f" ({t.cached_tokens} cached) + {t.completion_tokens} out, ${t.cost_usd:.6f}, stopped: {t.stop_reason}"
        )
    if o.final_text:
        lines.append("daybook entry:")
        lines += [f"  {line}" for line in o.final_text.splitlines()]
    return lines


def thinking_json(o: WakeOutcome) -> dict[str, Any]:
    t = o.thinking
    return {
        "gate": o.gate, "thinking": dataclasses.asdict(t) if t is not None else None, "final_text": o.final_text,
        "trigger": o.trigger, "escalation_cause": o.escalation_cause,
        "escalated": {"wake_id": o.escalated.wake_id, "tier": o.escalated.tier, "status": o.escalated.status, **thinking_json(o.escalated)} if o.escalated else None,
    }


def row(r: Mapping[str, Any]) -> str:
    lines = [f"{k}: {_plain(v)}" for k, v in r.items() if k not in ("blocks", "tool_hashes", "diff", "active_tool_names")]
    lines.append(f"active_tool_names: {', '.join(r['active_tool_names']) or '(none)'}")
    lines.append("tool_hashes:")
    lines += [f"  {name:<24} {h}" for name, h in sorted(r["tool_hashes"].items())]
    lines.append("blocks:")
    for name, b in r["blocks"].items():
        reason = f"  ({b['reason']})" if b.get("reason") else ""
        lines.append(f"  {name:<16} {b['cache_tier']:<9} {b['retrieval']:<8} {b['result']:<8} {b['latency_ms']:8.2f} ms  rows {b['rows']}  {b['hash'][:16]}{reason}")
    lines += diff_lines(r.get("diff"))
    return "\n".join(lines)


def ledger(rows: Sequence[Mapping[str, Any]]) -> str:
    header = ("STARTED (UTC)", "AGENT", "TIER", "TRIGGER", "STATUS", "TOOLS", "DURATION", "COST", "ROOT", "WAKE")
    table = [header]
    for r in rows:
        duration = f"{(r['finished_at'] - r['started_at']).total_seconds() * 1000:.0f} ms" if r["finished_at"] else "running"
        table.append((
            f"{r['started_at'].astimezone(dt.UTC):%Y-%m-%d %H:%M:%S}", r["agent_id"], r["tier"], r["trigger"], r["status"],
            f"{r['active_tools_count']}/{r['registry_tool_count']}", duration,
            f"${r['cost_usd']:.4f}" if r.get("model") else "-", (r["manifest_root"] or "-")[:12], str(r["wake_id"])[:8],
        ))
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    return "\n".join("  ".join(f"{c!s:<{w}}" for c, w in zip(row, widths, strict=True)).rstrip() for row in table)
