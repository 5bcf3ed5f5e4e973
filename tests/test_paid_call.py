"""The one paid-call sequence (``pipeline/paid_call.py``): order, defer, refund, reuse.

In process, against real things: a SQLite ledger, Huey's SQLite storage for the caps, the
``flock`` write lease, the quota gate on the ledger's telemetry, and the stub ``claude``
executable as the model (its call log counts what was paid).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from huey.storage import SqliteStorage
from sqlalchemy import select
from support import Env

from reflect_jobs.gates import Defer, Gate, Go
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import CostRow
from reflect_jobs.limits import Caps, CapsGate, daily_key
from reflect_jobs.pipeline import paid_call
from reflect_jobs.write_lease import LeaseGate, WriteLease
from reflect_jobs.writer.outcomes import AttemptContext, classify_attempt
from reflect_jobs.writer.quota import QuotaGate

PREFIX = "caps:test:"


class Journaled:
    """A real gate, with each ask and give-back written down (to see the order)."""

    def __init__(self, gate: Gate, journal: list[str]) -> None:
        self.gate, self.journal, self.name = gate, journal, gate.name

    def acquire(self) -> Go | Defer:
        self.journal.append(f"acquire {self.name}")
        return self.gate.acquire()

    def release(self, go: Go) -> None:
        self.journal.append(f"release {self.name}")
        self.gate.release(go)

    def refund(self, go: Go) -> None:
        self.journal.append(f"refund {self.name}")
        self.gate.refund(go)


class World:
    def __init__(self, env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        for k, v in env.items():
            if k.startswith("STUB_"):
                monkeypatch.setenv(k, v)
        self.env, self.monkeypatch = env, monkeypatch
        self.settings = env.settings()
        self.storage = SqliteStorage("reflect", filename=str(tmp_path / "q.db"))
        self.lease = WriteLease.for_flock(tmp_path / "lease", slots=1)
        self.journal: list[str] = []

    def gates(self, daily_max: int = 5) -> list[Gate]:
        caps = Caps(self.storage, daily_max=daily_max, run_max=0, window_sec=0, daily_prefix=PREFIX)
        real: list[Gate] = [
            CapsGate(caps),
            QuotaGate.from_settings(self.settings, paid_call.snapshots(self.settings.db_url)),
            LeaseGate(self.lease, wait_sec=0),
        ]
        return [Journaled(g, self.journal) for g in real]

    def spec(self, label: str = "test:one") -> paid_call.PaidPass:
        return paid_call.PaidPass(kind="test", backend="claude", model="sonnet", label=label)

    def units(self) -> int:
        return self.storage.incr(daily_key(time.time(), PREFIX), 0)

    def calls(self) -> int:
        log = Path(self.env["STUB_CLAUDE_LOG"])
        return len(log.read_text().splitlines()) if log.exists() else 0

    def rows(self) -> list[CostRow]:
        with session_scope(self.settings.db_url) as s:
            rows = s.scalars(select(CostRow).order_by(CostRow.id)).all()
            for r in rows:
                s.expunge(r)
            return list(rows)


@pytest.fixture
def world(env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    return World(env, tmp_path, monkeypatch)


def test_gates_in_order_then_the_call_then_the_record_then_the_slot(world: World) -> None:
    seen: dict[str, object] = {}

    def prompt() -> str:
        # Every gate passed and the slot is held while the call is made; nothing recorded yet.
        seen["slot_free"] = world.lease.try_acquire() is not None
        seen["rows"] = len(world.rows())
        world.journal.append("call")
        return "the prompt"

    answer = paid_call.call(world.settings, world.spec(), world.gates(), prompt)
    assert isinstance(answer, paid_call.Answer) and answer.result is not None
    assert world.journal == [
        "acquire write_lease",
        "acquire quota",
        "acquire caps",
        "call",
        "release caps",
        "release quota",
        "release write_lease",
    ]
    assert seen == {"slot_free": False, "rows": 0}
    # Recorded before anything parsed it: the row is there, pending, with the answer.
    (row,) = world.rows()
    assert (row.outcome, row.consumed, row.entries, row.job_id) == ("pending", False, 0, None)
    assert row.transcript == "test:one" and row.id == answer.row_id
    assert json.loads(row.raw_answer)["text"] == answer.result.text
    assert world.lease.try_acquire() is not None, "the slot went back after the record"
    assert world.calls() == 1 and world.units() == 1
    answer.settle(1)
    assert world.units() == 1, "a paid outcome keeps its unit"


def test_a_deferral_charges_nothing_calls_nothing_and_holds_nothing(world: World) -> None:
    built: list[str] = []
    answer = paid_call.call(
        world.settings, world.spec(), world.gates(daily_max=0), lambda: built.append("x") or "p"
    )
    assert isinstance(answer, Defer) and answer.gate == "caps"
    assert "daily cap 0" in answer.reason and answer.until is not None
    assert world.journal[:3] == ["acquire write_lease", "acquire quota", "acquire caps"]
    assert "release write_lease" in world.journal, "the slot taken before the caps went back"
    assert built == [] and world.calls() == 0 and world.rows() == [] and world.units() == 0
    assert world.lease.try_acquire() is not None


def test_a_free_outcome_refunds_its_unit(world: World) -> None:
    world.monkeypatch.setenv("STUB_CLAUDE_MODE", "zero_turns")
    answer = paid_call.call(world.settings, world.spec(), world.gates(), lambda: "p")
    assert isinstance(answer, paid_call.Answer) and answer.result is not None
    assert world.units() == 1
    outcome = classify_attempt(answer.result, AttemptContext(0, 0, 0))
    assert (outcome.outcome, outcome.entries) == ("fail_unknown_command", 0)
    answer.settle(outcome.entries)
    answer.settle(outcome.entries)  # at most once
    assert world.units() == 0 and world.calls() == 1


def test_a_recorded_answer_is_reused_and_never_paid_twice(world: World) -> None:
    first = paid_call.call(world.settings, world.spec(), world.gates(daily_max=1), lambda: "p")
    assert isinstance(first, paid_call.Answer) and not first.reused
    # The pass dies here (nothing settled). The next attempt finds the recorded answer and
    # asks no gate: with the day's one unit spent, the caps would have deferred it.
    world.journal.clear()
    again = paid_call.call(world.settings, world.spec(), world.gates(daily_max=1), lambda: "p")
    assert isinstance(again, paid_call.Answer) and again.reused
    assert again.row_id == first.row_id and again.result is not None
    assert first.result is not None and again.result.text == first.result.text
    assert world.journal == [] and world.calls() == 1 and world.units() == 1
    again.settle(0)
    assert world.units() == 1, "a reused answer refunds nothing: its unit was the first's"
    paid_call.settle_row(world.settings.db_url, again.row_id or 0, "test_ok")
    # Settled: no longer reused, and the gates apply again (the day's unit is spent).
    later = paid_call.call(world.settings, world.spec(), world.gates(daily_max=1), lambda: "p")
    assert isinstance(later, Defer) and later.gate == "caps"
    assert [(r.outcome, r.consumed) for r in world.rows()] == [("test_ok", True)]


def test_an_error_before_the_call_refunds_the_unit_and_frees_the_slot(world: World) -> None:
    def unreadable() -> str:
        raise OSError("slice gone")

    with pytest.raises(OSError):
        paid_call.call(world.settings, world.spec(), world.gates(), unreadable)
    assert world.units() == 0 and world.calls() == 0 and world.rows() == []
    assert world.lease.try_acquire() is not None


def test_a_missing_backend_is_free(world: World, tmp_path: Path) -> None:
    world.env["REFLECT_DRAIN_CLAUDE_BIN"] = str(tmp_path / "no-claude")
    settings = world.env.settings()
    answer = paid_call.call(settings, world.spec(), world.gates(), lambda: "p")
    assert isinstance(answer, paid_call.Answer) and answer.result is None and answer.missing
    assert answer.row_id is None and world.rows() == []
    answer.settle(0)
    assert world.units() == 0
