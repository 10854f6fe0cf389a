"""The chaos run's checker (bench/chaos.py) knows an incident's notice from a wake's delivery.

An incident (wake.run.incident_policy) queues its notices in the outbox under a wake id of its own,
derived from the incident; the checker used to read every outbox row as a completed wake's
delivery, so each failure the faults caused read as a stale write (CI: 176 "violations").
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from wake.run import incident_policy

_CHAOS = Path(__file__).resolve().parents[2] / "bench" / "chaos.py"


@pytest.fixture(scope="module")
def chaos() -> ModuleType:
    spec = importlib.util.spec_from_file_location("wake_bench_chaos", _CHAOS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


T0 = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)


def _row(status: str, fence: int, minute: int) -> dict[str, Any]:
    return {"wake_id": uuid.uuid4(), "agent_id": "a1", "status": status, "fence": fence, "scheduled_for": None,
            "started_at": T0 + dt.timedelta(minutes=minute), "finished_at": T0 + dt.timedelta(minutes=minute, seconds=1)}


def _notice(incident_id: int, kind: str, about: Any, route: str = "hook") -> dict[str, Any]:
    key = incident_policy.notice_id(incident_id, kind)
    return {"wake_id": key, "route": route, "state": "sent",
            "payload": {"kind": f"incident.{kind}", "incident": incident_id, "wake_id": str(key), "about_wake": str(about)}}


def _delivery(row: dict[str, Any]) -> dict[str, Any]:
    return {"wake_id": row["wake_id"], "route": "hook", "state": "sent", "payload": {"wake_id": str(row["wake_id"]), "status": "completed"}}


def test_notices_of_a_failure_and_its_recovery_are_no_violation(chaos: ModuleType) -> None:
    failed, done = _row("failed", 1, 0), _row("completed", 2, 1)
    outbox = [_notice(7, "opened", failed["wake_id"]), _notice(7, "recovered", done["wake_id"]), _delivery(done)]
    assert chaos.check_fences([failed, done], outbox, []) == []


def test_a_delivery_of_a_wake_that_failed_is_still_a_violation(chaos: ModuleType) -> None:
    failed = _row("failed", 1, 0)
    found = chaos.check_fences([failed], [_delivery(failed)], [])
    assert found == [f"outbox entry of wake {failed['wake_id']} that did not complete"]


def test_a_notice_about_a_row_of_the_wrong_kind_is_a_violation(chaos: ModuleType) -> None:
    done, failed = _row("completed", 1, 0), _row("failed", 2, 1)
    found = chaos.check_notices([done, failed], [_notice(3, "opened", done["wake_id"]), _notice(3, "recovered", failed["wake_id"])])
    assert len(found) == 2 and "incident.opened" in found[0] and "incident.recovered" in found[1]


def test_a_notice_about_no_row_is_a_violation(chaos: ModuleType) -> None:
    found = chaos.check_notices([], [_notice(4, "opened", uuid.uuid4())])
    assert len(found) == 1 and "None" in found[0]


def test_a_dead_man_opening_is_about_no_row_and_says_so(chaos: ModuleType) -> None:
    deadman = _notice(7, "opened", None)
    deadman["payload"] |= {"about_wake": None, "deadman": True}
    assert chaos.check_notices([], [deadman]) == []
    naming = _notice(8, "opened", uuid.uuid4())
    naming["payload"]["deadman"] = True
    assert chaos.check_notices([], [naming]) == [f"dead-man notice {naming['wake_id']} names a wake {naming['payload']['about_wake']}"]
    assert len(chaos.check_notices([], [_notice(9, "opened", None)])) == 1  # no row and no dead-man flag: still a violation


def test_two_notices_of_one_kind_for_an_incident_on_a_route_are_a_violation(chaos: ModuleType) -> None:
    failed = _row("failed", 1, 0)
    notice = _notice(5, "opened", failed["wake_id"])
    assert chaos.check_notices([failed], [notice, dict(notice)]) == ["incident 5: 2 incident.opened notices on route hook"]
    assert chaos.check_notices([failed], [notice, _notice(5, "opened", failed["wake_id"], route="mail")]) == []


def test_the_receiver_may_act_on_a_notice_but_not_on_a_stranger(chaos: ModuleType) -> None:
    failed = _row("failed", 1, 0)
    notice = _notice(6, "opened", failed["wake_id"])
    receiver = chaos.Receiver()
    receiver.acted[str(notice["wake_id"])] = {}
    assert chaos.check_deliveries([failed], [notice], receiver, T0) == []
    receiver.acted["someone-else"] = {}
    assert chaos.check_deliveries([failed], [notice], receiver, T0) == [
        "receiver acted on 'someone-else', no completed wake or incident notice"]
