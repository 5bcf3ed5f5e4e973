"""Rate-limit ingest and the quota gate as pure functions: SPEC-drain §9.8 #81-88."""

from __future__ import annotations

import json

import pytest

from reflect_jobs.writer import bucket_of, extract_rate_limits, quota_gate

NOW = 1_900_000_000.0


def store(found: list[dict], state: dict | None = None, now: float = NOW) -> dict:
    """What the caller does with ingested telemetry: last write wins per bucket."""
    state = dict(state or {})
    for snap in found:
        state[bucket_of(snap)] = {**snap, "observed_at": now}
    return state


def test_sdk_stream_event_is_ingested() -> None:  # #81
    event = {
        "type": "system",
        "subtype": "rate_limit",
        "rate_limit_info": {
            "status": "allowed_warning",
            "rateLimitType": "five_hour",
            "utilization": 0.91,
            "surpassedThreshold": 0.8,
            "isUsingOverage": True,
        },
    }
    found = extract_rate_limits(json.dumps(event), "")
    assert len(found) == 1
    state = store(found)
    assert set(state) == {"five_hour"}
    snap = state["five_hour"]
    assert snap["utilization"] == 0.91 and snap["isUsingOverage"] is True
    assert snap["observed_at"] > 0


def test_envelope_and_stream_json_lines() -> None:  # #82
    env = {"type": "result", "result": "x", "rate_limit_info": {"status": "allowed"}}
    assert extract_rate_limits(json.dumps(env), "") == [{"status": "allowed"}]
    lines = "\n".join(
        [
            json.dumps({"type": "system", "subtype": "init"}),
            "not json",
            json.dumps({"type": "system", "rateLimitInfo": {"rate_limit_type": "seven_day"}}),
            json.dumps({"type": "result", "result": "{}"}),
        ]
    )
    assert extract_rate_limits(lines, "") == [{"rateLimitType": "seven_day"}]


def test_alias_normalisation_and_bare_info_dicts() -> None:
    nested = {
        "a": [
            {
                "rate_limit_type": "seven_day_opus",
                "surpassed_threshold": 0.9,
                "is_using_overage": False,
                "resets_at": 1,
                "overage_status": "allowed",
                "overage_resets_at": 2,
                "extra": "kept",
            }
        ]
    }
    [snap] = extract_rate_limits(json.dumps(nested), "")
    assert snap == {
        "rateLimitType": "seven_day_opus",
        "surpassedThreshold": 0.9,
        "isUsingOverage": False,
        "resetsAt": 1,
        "overageStatus": "allowed",
        "overageResetsAt": 2,
        "extra": "kept",
    }
    assert extract_rate_limits(json.dumps({"utilization": 0.5, "status": "allowed"}), "")
    assert not extract_rate_limits(json.dumps({"utilization": 0.5}), "")
    assert not extract_rate_limits(json.dumps({"rate_limit_info": {"remaining": 5}}), "")


def test_depth_limit_six() -> None:
    info = {"rateLimitType": "five_hour"}
    deep = info
    for _ in range(6):
        deep = {"x": deep}
    assert extract_rate_limits(json.dumps(deep), "")
    assert not extract_rate_limits(json.dumps({"x": deep}), "")


def test_ttl_drops_stale_snapshots() -> None:  # #83
    stale = {"five_hour": {"status": "rejected", "observed_at": NOW - 7200}}
    assert quota_gate(stale, now=NOW).open
    fresh = {"five_hour": {"status": "rejected", "observed_at": NOW - 60}}
    assert not quota_gate(fresh, now=NOW).open
    missing = {"five_hour": {"status": "rejected"}}
    assert quota_gate(missing, now=NOW).open
    for bad_ttl in (0, -5, "banana", None):
        assert not quota_gate(fresh, now=NOW, ttl_sec=bad_ttl).open  # falls back to 3600


def test_last_write_wins() -> None:  # #84
    a = extract_rate_limits(json.dumps({"rateLimitType": "five_hour", "utilization": 0.1}), "")
    b = extract_rate_limits(json.dumps({"rateLimitType": "five_hour", "utilization": 0.2}), "")
    state = store(b, store(a))
    assert list(state) == ["five_hour"] and state["five_hour"]["utilization"] == 0.2


def test_stderr_429_fallback_closes_gate() -> None:  # #85
    found = extract_rate_limits("", "API Error: 429 rate_limit_error")
    assert found == [
        {"status": "rejected", "rateLimitType": None, "_source": "stderr", "_marker": "429"}
    ]
    decision = quota_gate(store(found), now=NOW)
    assert not decision.open and decision.window == "default"
    assert "rejected" in decision.reason


@pytest.mark.parametrize("text", ["HTTP 529", "Overloaded", "quota exceeded", "rate-limit hit"])
def test_stderr_markers(text: str) -> None:
    assert extract_rate_limits("", text)[0]["_source"] == "stderr"


def test_stderr_ignored_when_envelope_has_telemetry() -> None:
    env = json.dumps({"type": "result", "rate_limit_info": {"status": "allowed"}})
    assert extract_rate_limits(env, "API Error: 429") == [{"status": "allowed"}]
    assert extract_rate_limits("", "all fine, 4290 tokens") == []


def test_surpassed_threshold_without_overage() -> None:  # #86
    snap = {"rateLimitType": "five_hour", "surpassedThreshold": 0.8, "isUsingOverage": False}
    decision = quota_gate(store([snap]), now=NOW)
    assert not decision.open and decision.window == "five_hour"
    assert "surpassedThreshold" in decision.reason
    assert quota_gate(store([{**snap, "isUsingOverage": True}]), now=NOW).open


def test_rejected_and_utilization_limits() -> None:  # #87
    rejected = store([{"rateLimitType": "seven_day", "status": "rejected"}])
    assert quota_gate(rejected, now=NOW).reason == "quota:seven_day rejected by provider"
    high = store([{"rateLimitType": "seven_day_sonnet", "utilization": 0.99}])
    decision = quota_gate(high, now=NOW)
    assert not decision.open
    assert decision.reason == "quota:seven_day_sonnet utilization 99.0% >= 92%"
    low = store([{"rateLimitType": "seven_day_sonnet", "utilization": 0.5}])
    assert quota_gate(low, now=NOW).open
    assert not quota_gate(low, now=NOW, util_threshold=0.4).open
    assert quota_gate(low, now=NOW, util_threshold=1.5).open  # out of range: ignored
    assert quota_gate(store([{"rateLimitType": "seven_day", "utilization": True}]), now=NOW).open


def test_window_priority_and_overage_status() -> None:
    state = store(
        [
            {"rateLimitType": "seven_day", "status": "rejected"},
            {"rateLimitType": "five_hour", "utilization": 0.96},
        ]
    )
    assert quota_gate(state, now=NOW).window == "five_hour"
    overage = store([{"rateLimitType": "overage", "overageStatus": "rejected"}])
    assert quota_gate(overage, now=NOW).window == "overage"
    unknown = store([{"rateLimitType": "mystery", "status": "rejected"}])
    assert quota_gate(unknown, now=NOW).open


def test_api_key_auth_always_open() -> None:  # #88
    rejected = store([{"rateLimitType": "five_hour", "status": "rejected"}])
    assert quota_gate(rejected, now=NOW, api_key_auth=True).open


def test_bucket_of() -> None:
    assert bucket_of({"rateLimitType": "five_hour"}) == "five_hour"
    assert bucket_of({"rate_limit_type": "seven_day"}) == "seven_day"
    assert bucket_of({"rateLimitType": None}) == "default"
    assert bucket_of("junk") == "default"


def test_garbage_never_raises() -> None:
    for out in ("{", "[" * 50_000, "null", "\x00", '{"rate_limit_info": [1, 2]}'):
        assert isinstance(extract_rate_limits(out, ""), list)
    assert quota_gate({"five_hour": "junk"}, now=NOW).open  # type: ignore[dict-item]
