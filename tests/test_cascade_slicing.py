"""Slicing (SPEC-drain §3.2, §3.3, §3.6; §9.4 tests 33, 34, 36; §10 B9)."""

from __future__ import annotations

from reflect_jobs.cascade import Signal, bounded_view, build_slice, chunk_hash


def sig(line: int, level: str = "HIGH") -> Signal:
    return Signal(line, level, "correction", "Unknown", f"line{line}", "user")


def test_windows_and_gap_marker() -> None:  # 33
    lines = [f"line{i}" for i in range(1, 101)]
    s = build_slice(lines, [sig(21), sig(81)], context=2)
    out = s.text.split("\n")
    assert "line20" in out and "line80" in out and "line50" not in out
    assert "…" in out
    assert out[:5] == ["line19", "line20", "line21", "line22", "line23"]
    assert len(s.chunks) == 2 and not s.truncated and not s.bounded


def test_overlapping_windows_merge_into_one_chunk() -> None:
    lines = [f"l{i}" for i in range(1, 21)]
    s = build_slice(lines, [sig(5), sig(9)], context=2)
    assert len(s.chunks) == 1
    assert s.text == "\n".join(f"l{i}" for i in range(3, 12))


def test_cap_is_a_hard_bound() -> None:  # 34
    lines = [f"filler text line number {i}" for i in range(1000)]
    signals = [sig(i) for i in range(1, 1001, 2)]
    s = build_slice(lines, signals, context=1, max_chars=200)
    assert len(s.text) <= 200 and s.truncated
    # Latest windows are kept first when everything is equally strong.
    assert "filler text line number 999" in s.text or "filler text line number 998" in s.text


def test_strongest_then_latest_windows_win_and_come_out_in_order() -> None:
    lines = [f"{'x' * 40} {i}" for i in range(300)]
    signals = [sig(10, "MEDIUM"), sig(100, "HIGH"), sig(200, "MEDIUM"), sig(290, "MEDIUM")]
    s = build_slice(lines, signals, context=1, max_chars=300)
    assert f"{'x' * 40} 99" in s.text  # HIGH survives although it is not the latest
    assert f"{'x' * 40} 289" in s.text  # then the latest MEDIUM
    assert f"{'x' * 40} 9\n" not in s.text  # the oldest MEDIUM is dropped
    positions = [s.text.index(f"{'x' * 40} {n}") for n in (99, 289)]
    assert positions == sorted(positions)
    assert len(s.text) <= 300


def test_single_giant_line_cannot_blow_the_cap() -> None:
    lines = ["before", "never use var " + "z" * 500_000, "after"]
    s = build_slice(lines, [sig(2)], max_chars=60_000)
    assert len(s.text) <= 60_000
    assert "never use var" in s.text and "line truncated" in s.text and s.truncated
    giant_context = ["y" * 300_000, "Never use var.", "w" * 300_000]
    s = build_slice(giant_context, [sig(2)], max_chars=5_000)
    assert "Never use var." in s.text and len(s.text) <= 5_000


def test_late_signal_after_a_giant_window_survives_the_cap() -> None:  # the bug we fix
    # The original's front-anchored slice overshoots here and loses the tail (checked on
    # the baseline in test_bench_original_signals.py).
    lines = ["never use var " + "z" * 100_000] + [f"l{i}" for i in range(10)] + ["late: never!"]
    ours = build_slice(lines, [sig(1), sig(12)], max_chars=60_000)
    assert len(ours.text) <= 60_000 and "late: never!" in ours.text


def test_chunk_hash_is_whitespace_stable_and_matches_chunks() -> None:  # 40
    assert chunk_hash("alpha line") == chunk_hash("  alpha line \n") != chunk_hash("beta")
    s = build_slice(["a", "b", "c"], [sig(2)], context=0)
    assert s.chunks[0].text == "b" and s.chunks[0].hash == chunk_hash("b")


def test_out_of_range_signals_ignored() -> None:
    s = build_slice(["a", "b"], [sig(0), sig(7)])
    assert s.text == "" and s.chunks == []


def test_bounded_view_head_quarter_tail_three_quarters() -> None:
    lines = [f"line {i:05d}" for i in range(10_000)]  # 11 chars + newline each
    v = bounded_view(lines, max_chars=1_200)
    assert v.bounded and v.truncated and len(v.text) <= 1_200
    head, tail = v.chunks
    assert head.text.startswith("line 00000") and tail.text.endswith("line 09999")
    assert 200 <= len(head.text) <= 300 and 800 <= len(tail.text) <= 900
    small = bounded_view(["a", "b"], max_chars=1_000)
    assert small.text == "a\nb" and not small.truncated and len(small.chunks) == 1


def test_signal_line_as_long_as_the_cap_still_fits() -> None:
    s = build_slice(["never " + "v" * 1_000], [sig(1)], max_chars=300)
    assert s.text.startswith("never ") and len(s.text) <= 300 and s.truncated
