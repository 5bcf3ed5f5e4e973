"""Cost rows and the cost report (SPEC-drain §9.9 ported onto the ledger)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from reflect_jobs.ledger import costs, spend
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import CostRow, utcnow


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path}/c.db"


def _row(s, **kw):
    now = kw.pop("at", utcnow())
    base = dict(
        at=now,
        day=now.strftime("%Y-%m-%d"),
        transcript="/x/a.jsonl",
        outcome="ok",
        entries=1,
        model="claude-sonnet-4-5",
        writer_class="valid",
    )
    base.update(kw)
    s.add(CostRow(**base))


def test_two_rows_same_day_sum_and_prefer_recorded_cost(db):
    with session_scope(db) as s:
        _row(
            s, tokens=1000, input=100, output=100, cache_read=700, cache_creation=100, cost_usd=0.1
        )
        _row(
            s, tokens=2000, input=200, output=100, cache_read=1400, cache_creation=600, cost_usd=0.2
        )
    with session_scope(db) as s:
        rep = spend.cost_report(s, by="day")
    (row,) = rep["rows"].values()
    assert (row["runs"], row["tokens"], row["cache_read"], row["cache_creation"]) == (
        2,
        3000,
        2100,
        700,
    )
    assert row["cost_usd"] == pytest.approx(0.3)
    assert rep["total"]["cache_reuse"] == pytest.approx(0.7)


def test_estimate_when_no_cost_recorded_opus_cache_write(db):
    with session_scope(db) as s:
        _row(s, model="claude-opus-4", tokens=1_000_000, cache_creation=1_000_000, cost_usd=0.0)
    with session_scope(db) as s:
        assert spend.cost_report(s)["total"]["cost_usd"] == pytest.approx(18.75)


def test_unknown_model_is_priced_as_sonnet():
    assert costs.estimate_cost("mystery", 1_000_000, 0, 0, 0) == pytest.approx(3.0)


def test_group_keys_and_free_rows_count_as_runs(db):
    with session_scope(db) as s:
        _row(s, tokens=10, writer_class="valid")
        _row(
            s,
            outcome="skip_no_signal",
            entries=0,
            model="",
            writer_class="",
            transcript="/y/b.jsonl",
        )
    with session_scope(db) as s:
        assert set(spend.cost_report(s, by="writer")["rows"]) == {"valid", "?"}
        assert set(spend.cost_report(s, by="transcript")["rows"]) == {"a.jsonl", "b.jsonl"}
        assert spend.cost_report(s, by="outcome")["total"]["runs"] == 2


def test_since_filters_old_rows(db):
    with session_scope(db) as s:
        _row(s, tokens=5, at=utcnow() - timedelta(days=40))
        _row(s, tokens=7)
    with session_scope(db) as s:
        assert spend.cost_report(s, since=spend.parse_since("30d"))["total"]["tokens"] == 7
        assert spend.cost_report(s, since=None)["total"]["tokens"] == 12


@pytest.mark.parametrize(
    ("text", "seconds"), [("7d", 7 * 86400), ("24h", 86400), ("2w", 14 * 86400), ("3", 3 * 86400)]
)
def test_parse_since(text, seconds):
    assert spend.parse_since(text).total_seconds() == seconds


def test_parse_since_bogus_means_all_time():
    assert spend.parse_since("bogus") is None and spend.parse_since("all") is None


def test_cli_cost_table_flags_outliers(env):
    from reflect_jobs.ledger.db import session_scope as scope

    with scope(env.settings().db_url) as s:
        _row(s, tokens=6_000_000, cost_usd=1.0, transcript="/x/huge.jsonl")
        _row(s, tokens=100, cost_usd=0.01, transcript="/x/small.jsonl")
    out = env.invoke("cost", "--by", "transcript").stdout
    assert "huge.jsonl" in out and "⚠" in out and "TOTAL" in out
    assert out.index("huge.jsonl") < out.index("small.jsonl"), "sorted by tokens"


def test_a_runaway_answer_is_stored_bounded_and_a_normal_one_whole():
    import json

    from reflect_jobs.writer.result import ModelResult

    def result(text: str) -> ModelResult:
        return ModelResult(
            backend="claude",
            model="sonnet",
            text=text,
            raw_stdout=json.dumps({"type": "result", "result": text}),
            stderr="",
            exit_code=0,
            timed_out=False,
            cost_usd=0.25,
            rate_limit_info=[{"rateLimitType": "five_hour", "utilization": 0.5}],
        )

    small = result('{"actions": []}')
    assert costs.bounded_answer(small) == small.to_json()
    big = result("A" * 5_000_000)
    stored = costs.bounded_answer(big)
    assert len(stored) <= costs.RAW_ANSWER_MAX_CHARS
    assert json.loads(stored)["truncated_from_chars"] == len(big.to_json())
    back = ModelResult.from_json(stored)  # still a usable record: telemetry and cost whole
    assert back.cost_usd == 0.25 and back.rate_limit_info == big.rate_limit_info
    assert back.text == big.text[: len(back.text)] and len(back.text) > 100_000
