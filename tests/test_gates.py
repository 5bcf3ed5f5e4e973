"""Gates as one protocol (``reflect_jobs/gates.py``): every owner answers Go or Defer, in order.

Each gate here is the real one over real things — Huey's SQLite storage for the caps, the
``flock`` write lease, a SQLite ledger for the halt flag and the dedupe claim, the
graph-writer lock file — so what is asserted is what a worker meets.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from huey.storage import SqliteStorage

from reflect_jobs import gates
from reflect_jobs.gates import PAID_PATH, Check, Defer, FreeGate, Go, acquire, in_order
from reflect_jobs.limits import Caps, CapsGate, daily_key
from reflect_jobs.write_lease import LeaseGate, WriteLease
from reflect_jobs.writer.quota import QuotaGate

ROOT = Path(__file__).resolve().parent.parent


class Taking(FreeGate):
    """A gate that takes a token and says so in a shared journal (the protocol's shape)."""

    def __init__(self, name: str, journal: list[str], *, defer: bool = False) -> None:
        self.name, self.journal, self.defer = name, journal, defer

    def acquire(self) -> Go | Defer:
        self.journal.append(f"acquire {self.name}")
        if self.defer:
            return Defer(self.name, f"{self.name} says no", datetime.now(UTC))
        return Go(self.name, self.name)

    def release(self, go: Go) -> None:
        self.journal.append(f"release {go.taken}")

    def refund(self, go: Go) -> None:
        self.journal.append(f"refund {go.taken}")


def test_gates_are_asked_in_the_paid_path_order_whatever_the_list_order() -> None:
    journal: list[str] = []
    given = [Taking(n, journal) for n in ("caps", "quota", "write_lease", "slice")]
    passage = acquire(in_order(given))
    assert journal == ["acquire slice", "acquire write_lease", "acquire quota", "acquire caps"]
    assert not isinstance(passage, Defer)
    passage.release()
    passage.refund()
    passage.release()  # a second call gives nothing back twice
    assert journal[4:] == [
        "release caps",
        "release quota",
        "release write_lease",
        "release slice",
        "refund caps",
        "refund quota",
        "refund write_lease",
        "refund slice",
    ]
    with pytest.raises(ValueError, match="no place"):
        in_order([Taking("coffee", journal)])


def test_a_defer_stops_the_sequence_and_gives_back_what_was_taken() -> None:
    journal: list[str] = []
    answer = acquire(
        in_order(
            [
                Taking("write_lease", journal),
                Taking("quota", journal, defer=True),
                Taking("caps", journal),
            ]
        )
    )
    assert isinstance(answer, Defer) and answer.gate == "quota"
    assert journal == [
        "acquire write_lease",
        "acquire quota",
        "refund write_lease",
        "release write_lease",
    ], "the caps were never asked and the slot went back"


def test_an_exception_in_a_gate_gives_back_what_was_taken_and_propagates() -> None:
    journal: list[str] = []

    def boom() -> Defer | None:
        raise OSError("disk")

    with pytest.raises(OSError):
        acquire([Taking("write_lease", journal), Check("quota", boom)])
    assert journal == ["acquire write_lease", "refund write_lease", "release write_lease"]


def test_kill_switch_and_dry_run_are_gates() -> None:
    assert isinstance(gates.kill_switch(False).acquire(), Go)
    off = gates.kill_switch(True).acquire()
    assert isinstance(off, Defer) and off.until is None and "REFLECT_DISABLED" in off.reason
    dry = gates.first_defer([gates.kill_switch(False), gates.dry_run(True)])
    assert dry is not None and dry.gate == "dry_run"


def test_caps_gate_reserves_defers_until_the_window_end_and_refunds(tmp_path: Path) -> None:
    storage = SqliteStorage("reflect", filename=str(tmp_path / "q.db"))
    gate = CapsGate(Caps(storage, daily_max=1, run_max=0, window_sec=0, daily_prefix="caps:x:"))
    key = daily_key(time.time(), "caps:x:")
    go = gate.acquire()
    assert isinstance(go, Go) and storage.incr(key, 0) == 1
    no = gate.acquire()
    assert isinstance(no, Defer) and no.gate == "caps" and "daily cap 1" in no.reason
    assert no.until is not None and no.until > datetime.now(UTC)
    assert storage.incr(key, 0) == 1, "a deferral charges nothing"
    gate.release(go)
    assert storage.incr(key, 0) == 1, "a spent unit stays spent when the call is over"
    gate.refund(go)
    assert storage.incr(key, 0) == 0, "a free outcome gives the unit back"


def test_lease_gate_holds_a_slot_defers_when_busy_and_releases(tmp_path: Path) -> None:
    lease = WriteLease.for_flock(tmp_path, slots=1)
    first = LeaseGate(lease, wait_sec=0).acquire()
    assert isinstance(first, Go)
    busy = LeaseGate(lease, wait_sec=0).acquire()
    assert isinstance(busy, Defer) and "write lease busy: 1 paid call(s)" in busy.reason
    assert busy.until is not None and busy.until <= datetime.now(UTC), "due again at once"
    LeaseGate(lease).release(first)
    again = LeaseGate(lease, wait_sec=0).acquire()
    assert isinstance(again, Go)
    LeaseGate(lease).release(again)


def test_quota_gate_defers_until_the_reset_or_at_most_15_minutes() -> None:
    now = time.time()
    closed = {"five_hour": {"status": "rejected", "observed_at": now}}
    answer = QuotaGate(lambda: closed).acquire()
    assert isinstance(answer, Defer) and answer.error_kind == "drain_quota_deferred"
    assert "quota:five_hour rejected" in answer.reason
    assert answer.until is not None
    assert answer.until <= datetime.now(UTC) + timedelta(seconds=900)
    resets = now + 120
    api = {"api_rejected": {"status": "rejected", "observed_at": now, "resetsAt": resets}}
    soon = QuotaGate(lambda: api).acquire()
    assert isinstance(soon, Defer) and soon.until == datetime.fromtimestamp(resets, UTC)
    asked: list[int] = []
    off = QuotaGate(lambda: asked.append(1) or closed, enabled=False).acquire()
    assert isinstance(off, Go) and asked == [], "a disabled gate reads nothing"
    assert isinstance(QuotaGate(dict).acquire(), Go), "no telemetry: open"


def test_halt_flag_is_a_gate(tmp_path: Path) -> None:
    from reflect_jobs.ledger import control
    from reflect_jobs.ledger.db import session_scope

    db = f"sqlite:///{tmp_path / 'reflect.db'}"
    with session_scope(db) as session:
        assert isinstance(control.HaltGate(session).acquire(), Go)
        control.set_flag(session, control.HALT_KEY, "claude not found")
    with session_scope(db) as session:
        held = control.HaltGate(session).acquire()
    assert isinstance(held, Defer) and held.until is None
    assert held.reason == "write stage halted: claude not found"


def test_dedupe_claim_is_a_gate_refunded_when_nothing_was_applied(tmp_path: Path) -> None:
    from reflect_jobs.reflections.dedupe_run import DedupeClaim, last_dedupe

    db = f"sqlite:///{tmp_path / 'reflect.db'}"
    now = datetime.now(UTC)
    first = DedupeClaim(db, "github.com/acme/shop", now, 86_400, False)
    go = first.acquire()
    assert isinstance(go, Go) and last_dedupe(db, "github.com/acme/shop") == now
    rival = DedupeClaim(db, "github.com/acme/shop", now + timedelta(seconds=1), 86_400, False)
    assert isinstance(rival.acquire(), Defer), "one of two racing passes"
    first.refund(go)
    assert last_dedupe(db, "github.com/acme/shop") is None, "put back: the repository is due"
    assert isinstance(rival.acquire(), Go)


def test_graph_writer_lock_is_a_gate(tmp_path: Path) -> None:
    from reflect_jobs.config import load_settings
    from reflect_jobs.kb_jobs import GraphWriterLock

    settings = load_settings({"REFLECT_HOME": str(tmp_path / "home")})
    held = GraphWriterLock(None, settings).acquire()
    assert isinstance(held, Go)
    other = GraphWriterLock(None, settings).acquire()
    assert isinstance(other, Defer) and other.until is None
    GraphWriterLock(None, settings).release(held)
    again = GraphWriterLock(None, settings).acquire()
    assert isinstance(again, Go)
    GraphWriterLock(None, settings).release(again)


def test_architecture_lists_the_paid_path_in_the_one_order() -> None:
    """ARCHITECTURE §2.2's paid-path table names the gates in ``PAID_PATH`` order."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("The paid path", 1)[1].split("\n\n", 2)[1]
    named = re.findall(r"^\| \d+ \| `([a-z_]+)` \|", section, flags=re.MULTILINE)
    assert tuple(named) == PAID_PATH
