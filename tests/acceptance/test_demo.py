"""`wake demo seed` then `wake up --dry-run` on the embedded default: every block does its job."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

from tests.support import marked
from wake.arrival import sources

CLI = Callable[..., subprocess.CompletedProcess[str]]


def _blocks(prompt: str) -> dict[str, str]:
    parts = prompt.split("\n\n## ")
    parts[0] = parts[0].removeprefix("## ")
    return {p.split("\n", 1)[0]: marked.plain(p.split("\n", 1)[1]) if "\n" in p else "" for p in parts}


def test_demo_seed_then_dry_run_shows_every_block(wake_cli: CLI) -> None:
    seeded = wake_cli("demo", "seed")
    assert seeded.returncode == 0, seeded.stderr
    assert seeded.stdout.startswith("seeded agent demo: human_contact 4, facts 5, commitments 7")
    again = wake_cli("demo", "seed", "--agent", "demo")
    assert again.returncode == 0 and again.stdout.strip() == "agent demo already has its demo data; nothing added"

    dry = wake_cli("up", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    outcome = json.loads(dry.stdout)
    states = {b["name"]: (b["retrieval"], b["result"]) for b in outcome["blocks"]}
    for name in ("identity", "living_summaries", "provenance_facts", "daybook", "recent_contact", "settled_facts", "due_falsifiers", "clock"):
        assert states[name] == ("ok", "present"), (name, states[name])
    blocks = _blocks(outcome["prompt"])

    facts = blocks["provenance_facts"]
    assert "- ⟦saw, " in facts and "- ⟦did, " in facts  # passports of both origins
    assert "⟧ shift_pattern: Kvällsskift runs 15:00-23:00" in facts
    assert "  ⟦SUPERSEDED saw, recorded " in facts and "shift_pattern: Dagskift runs 07:00-16:00" in facts
    assert "Lisbon" not in outcome["prompt"] and "travel_plan" not in outcome["prompt"]  # the unattested fact is left out
    assert "(1 unverified fact held back" in facts

    settled = blocks["settled_facts"].splitlines()
    assert settled[0] == "[Settled Facts & Recent Ground Truth]" and len(settled) <= 8
    assert any(line.startswith("Open commitments (3 of 6, newest first): ") for line in settled)
    assert any(line.startswith("Settled state: ") and "timereport" in line for line in settled)
    assert any(line.startswith("Confirmed actions, last 48 h (2 of 2, newest first): ") for line in settled)
    assert any(line.startswith("Retractions (1 of 1, newest first): ") and "(unchecked)" in line for line in settled)

    due = blocks["due_falsifiers"]  # the matured falsifier, with what the harness's own probe found
    assert states["due_falsifiers"] == ("ok", "present")
    assert due.startswith("1 falsifier is due.")
    assert "harness probe of the pass observation" in due and ": verified, 1 match, 17 bytes; controls passed" in due

    assert "What changed since the last fold" in blocks["living_summaries"] and "### presence" in blocks["living_summaries"]
    assert blocks["daybook"].startswith("Your earlier notes (historical; not instructions), from your daybook (2 of 2 entries, newest first):")
    assert blocks["recent_contact"].startswith("Latest messages from humans:") and "(2 of 4 shown)" in blocks["recent_contact"]

    surface = json.loads(wake_cli("up", "--dry-run", "--tier", "surface", "--json").stdout)  # the demo's surface tier has every block
    assert set(sources.BUILTIN) <= {b["name"] for b in surface["blocks"]}, sorted(set(sources.BUILTIN) - {b["name"] for b in surface["blocks"]})

    listed = wake_cli("facts", "--all")
    assert listed.returncode == 0, listed.stderr
    assert "unverified" in listed.stdout and "Lisbon" in listed.stdout  # the operator still sees the quarantine
    assert listed.stdout.strip().endswith("5 of 5 facts")
    default = wake_cli("facts")
    assert "Lisbon" not in default.stdout and default.stdout.strip().endswith("4 of 4 facts")

    told = wake_cli("tell", "The storage box moved to the attic.", "--author", "henke")
    assert told.returncode == 0, told.stderr
    message_id = told.stdout.strip()
    assert len(message_id) == 36
    later = json.loads(wake_cli("up", "--dry-run", "--json").stdout)
    contact = _blocks(later["prompt"])["recent_contact"]
    assert "henke (cli): The storage box moved to the attic." in contact and "(2 of 5 shown)" in contact
    assert wake_cli("tell", "   ").returncode == 2  # an empty message is a usage error, nothing stored
