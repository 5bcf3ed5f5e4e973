"""Caps as counters in Huey storage: exact under concurrency, windows by key, refunds."""

from __future__ import annotations

import threading

import pytest
from huey.storage import SqliteStorage

from reflect_jobs.limits import (
    Caps,
    Deferral,
    Reservation,
    daily_key,
    next_day,
    run_key,
    window_end,
)

T0 = 1_764_500_000.0  # a fixed instant


def _caps(tmp_path, daily=20, run=3):
    return Caps(
        SqliteStorage("reflect", filename=str(tmp_path / "q.db")),
        daily_max=daily,
        run_max=run,
        window_sec=600,
    )


def test_run_cap_defers_until_window_end(tmp_path):
    caps = _caps(tmp_path)
    got = [caps.reserve(T0) for _ in range(4)]
    assert all(isinstance(g, Reservation) for g in got[:3])
    assert isinstance(got[3], Deferral) and got[3].until == window_end(T0, 600)
    assert isinstance(caps.reserve(T0 + 600), Reservation)  # next window: new key, no reset race


def test_daily_cap_defers_until_next_utc_day(tmp_path):
    caps = _caps(tmp_path, daily=2, run=100)
    assert isinstance(caps.reserve(T0), Reservation) and isinstance(caps.reserve(T0), Reservation)
    d = caps.reserve(T0)
    assert isinstance(d, Deferral) and d.until == next_day(T0) and "daily" in d.reason
    assert caps.usage(T0)["daily_used"] == 2


def test_refund_returns_the_unit(tmp_path):
    caps = _caps(tmp_path, daily=1, run=1)
    r = caps.reserve(T0)
    caps.refund(r)
    assert isinstance(caps.reserve(T0), Reservation)


def test_keys_carry_the_window():
    assert daily_key(T0) == "caps:daily:2025-11-30"
    assert run_key(T0, 600) == f"caps:run:{int(T0 // 600)}"


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("redis", marks=pytest.mark.services)])
def test_exact_under_16_threads(tmp_path, backend):
    if backend == "sqlite":
        storage = SqliteStorage("reflect", filename=str(tmp_path / "q.db"))
    else:
        from huey.storage import RedisStorage

        storage = RedisStorage(f"capstest{tmp_path.name[-8:]}", url="redis://127.0.0.1:6379/0")
        storage.flush_counters()
    caps = Caps(storage, daily_max=10, run_max=1000, window_sec=600)
    wins = []
    barrier = threading.Barrier(16)

    def worker():
        barrier.wait()
        for _ in range(5):
            if isinstance(caps.reserve(T0), Reservation):
                wins.append(1)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 10
    assert caps.usage(T0)["daily_used"] == 10


def test_prune_deletes_past_windows_and_keeps_the_current_ones(tmp_path):
    caps = _caps(tmp_path, daily=100, run=100)
    for back in range(0, 7):
        caps.reserve(T0 - back * 600)
    caps.reserve(T0 - 3 * 86400)
    caps.prune(T0)
    store = caps.storage
    assert store.incr(run_key(T0, 600), 0) == 1 and store.incr(run_key(T0 - 600, 600), 0) == 1
    assert all(store.incr(run_key(T0 - b * 600, 600), 0) == 0 for b in range(2, 7))
    assert store.incr(daily_key(T0), 0) == 7 and store.incr(daily_key(T0 - 3 * 86400), 0) == 0


def test_debounce_zero_means_no_run_window_but_the_daily_cap_holds(tmp_path):
    # The original's launchd job ran with REFLECT_DRAIN_DEBOUNCE_SEC=0 (SPEC-drain §2).
    caps = Caps(
        SqliteStorage("reflect", filename=str(tmp_path / "q.db")),
        daily_max=5,
        run_max=1,
        window_sec=0,
    )
    got = [caps.reserve(T0 + i) for i in range(6)]
    assert all(isinstance(g, Reservation) for g in got[:5]), "no per-window cap"
    assert isinstance(got[5], Deferral) and "daily" in got[5].reason
    assert got[5].until == next_day(T0)
    caps.refund(got[0])
    usage = caps.usage(T0)
    assert usage["daily_used"] == 4 and usage["run_limit"] is None
    assert usage["run_resets_at"] is None
    caps.prune(T0)  # nothing to prune, and no division by zero


def test_drain_max_zero_means_no_run_cap_as_documented(tmp_path):
    """``REFLECT_DRAIN_MAX=0`` is "no per-window cap" (README); it used to refuse every
    reservation, so every write was deferred for ever."""
    caps = _caps(tmp_path, daily=4, run=0)
    got = [caps.reserve(T0 + i) for i in range(5)]
    assert all(isinstance(g, Reservation) for g in got[:4])
    assert isinstance(got[4], Deferral) and "daily" in got[4].reason
    assert caps.usage(T0)["run_limit"] is None


def test_seed_raises_the_counters_to_what_the_ledger_spent_and_never_lowers_them(tmp_path):
    """A rebuilt queue file lost the counters; the ledger's cost rows put them back."""
    caps = _caps(tmp_path, daily=3, run=2)
    caps.seed(3, 1, now=T0)
    assert isinstance(caps.reserve(T0), Deferral), "today's budget is already spent"
    caps.seed(0, 0, now=T0)
    usage = caps.usage(T0)
    assert (usage["daily_used"], usage["run_used"]) == (3, 1)
