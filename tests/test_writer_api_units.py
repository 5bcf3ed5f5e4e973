"""Pure parts of the API writers: prices, retry-after, rate-limit headers, the API quota
windows, Codex event streams, settings validation, and that no SDK loads on the hook/status
path."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from reflect_jobs.config import SettingsError, load_settings
from reflect_jobs.writer.api_result import classify_http_error, retry_after_sec
from reflect_jobs.writer.codex_backend import result_from_codex
from reflect_jobs.writer.outcomes import AttemptContext, classify_attempt
from reflect_jobs.writer.prices import PricesError, cost_usd, parse_prices, price_for
from reflect_jobs.writer.quota import quota_gate
from reflect_jobs.writer.ratelimit_headers import (
    anthropic_snapshots,
    openai_snapshots,
    parse_duration,
)

CTX = AttemptContext(prior_failures=0, prior_timeouts=0, invalid_streak=0)
NOW = 1_800_000_000.0


# --- prices ------------------------------------------------------------------------------


def test_prices_longest_match_and_unknown_models():
    assert price_for("gpt-4o-mini-2024-07-18", "openai", {}) == (0.15, 0.6, 0.075, 0.0)
    assert price_for("claude-opus-4-1", "anthropic", {}) == (15.0, 75.0, 1.5, 18.75)
    assert price_for("llama3.1:8b", "openai", {}) == (0.0, 0.0, 0.0, 0.0), "local = free"
    assert price_for("mystery", "anthropic", {})[0] == 3.0, "unknown Claude model = sonnet"


def test_user_price_file_extends_and_overrides(tmp_path):
    f = tmp_path / "prices.json"
    f.write_text(json.dumps({"llama3.1": [0.1, 0.2, 0, 0], "gpt-4o": {"input": 1, "output": 2}}))
    env = {"REFLECT_PRICES": str(f)}
    assert price_for("llama3.1:8b", "openai", env) == (0.1, 0.2, 0.0, 0.0)
    assert price_for("gpt-4o", "openai", env) == (1.0, 2.0, 0.0, 0.0)
    usage = {"input_tokens": 1_000_000, "output_tokens": 500_000}
    assert cost_usd("llama3.1:8b", "openai", usage, env) == pytest.approx(0.2)


@pytest.mark.parametrize(
    "text",
    ["[1, 2]", "{bad", '{"m": [1, 2, 3]}', '{"m": {"input": -1, "output": 1}}', '{"m": "x"}'],
)
def test_malformed_price_file_is_one_clear_settings_error(tmp_path, text):
    with pytest.raises(PricesError):
        parse_prices(text)
    f = tmp_path / "p.json"
    f.write_text(text)
    with pytest.raises(SettingsError, match="REFLECT_PRICES") as err:
        load_settings({"REFLECT_HOME": str(tmp_path), "REFLECT_PRICES": str(f)})
    assert "\n" not in str(err.value)


def test_settings_for_the_api_writers(tmp_path):
    base = {"REFLECT_HOME": str(tmp_path)}
    s = load_settings({**base, "REFLECT_WRITER_BACKEND": "openai", "OPENAI_API_KEY": "sk-x"})
    assert s.resolved_writer_backend() == "openai" and s.openai_api_key == "sk-x"
    assert "sk-x" not in repr(s), "the key is never printed"
    s = load_settings({**base, "REFLECT_OPENAI_API_KEY": "a", "OPENAI_API_KEY": "b"})
    assert s.openai_api_key == "a"
    with pytest.raises(SettingsError, match="REFLECT_OPENAI_BASE_URL"):
        load_settings({**base, "REFLECT_OPENAI_BASE_URL": "127.0.0.1:8000/v1"})
    with pytest.raises(SettingsError, match="REFLECT_WRITER_BACKEND"):
        load_settings({**base, "REFLECT_WRITER_BACKEND": "gemini"})


# --- HTTP errors, retry-after, headers ---------------------------------------------------


@pytest.mark.parametrize(
    ("status", "etype", "message", "kind"),
    [
        (429, "rate_limit_error", "slow down", "rate_limited"),
        (529, "overloaded_error", "Overloaded", "rate_limited"),
        (400, "invalid_request_error", "prompt is too long: 3 > 2", "too_long"),
        (400, "", "the request exceeds the available context size", "too_long"),
        (401, "authentication_error", "invalid x-api-key", "auth"),
        (429, "insufficient_quota", "You exceeded your current quota", "auth"),
        (400, "invalid_request_error", "Your credit balance is too low", "auth"),
        (404, "not_found_error", "model: x", "unknown_model"),
        (502, "", "bad gateway", "server"),
        (None, "", "Connection refused", "connection"),
        (422, "", "messages: field required", "bad_request"),
    ],
)
def test_classify_http_error(status, etype, message, kind):
    assert classify_http_error(status, etype, message) == kind


def test_retry_after_forms():
    assert retry_after_sec({"Retry-After": "7"}) == 7.0
    assert retry_after_sec({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    http_date = "Tue, 15 Jan 2027 08:00:10 GMT"
    from email.utils import parsedate_to_datetime

    now = parsedate_to_datetime(http_date).timestamp() - 10
    assert retry_after_sec({"retry-after": http_date}, now=now) == pytest.approx(10)
    assert retry_after_sec({"retry-after": "soon"}) == 0.0 and retry_after_sec(None) == 0.0


def test_rate_limit_headers():
    snaps = anthropic_snapshots(
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": "2027-01-01T00:00:30Z",
            "anthropic-ratelimit-tokens-limit": "garbage",
        }
    )
    assert [s["rateLimitType"] for s in snaps] == ["api_requests"]
    assert snaps[0]["status"] == "rejected" and snaps[0]["utilization"] == 1.0
    assert parse_duration("6m0s") == 360 and parse_duration("1h2m3.5s") == 3723.5
    assert parse_duration("20ms") == pytest.approx(0.02) and parse_duration("x") is None
    (snap, _) = openai_snapshots(
        {
            "x-ratelimit-limit-requests": "100",
            "x-ratelimit-remaining-requests": "3",
            "x-ratelimit-reset-requests": "30s",
            "x-ratelimit-limit-tokens": "1000",
            "x-ratelimit-remaining-tokens": "900",
        },
        now=NOW,
    )
    assert snap["utilization"] == 0.97 and snap["resetsAt"] == NOW + 30


# --- the quota gate's API windows --------------------------------------------------------


def _snap(**kw):
    return {"observed_at": NOW - 5, **kw}


def test_api_window_closes_until_reset_even_with_api_key_auth():
    snaps = {"api_rejected": _snap(status="rejected", resetsAt=NOW + 20)}
    closed = quota_gate(snaps, now=NOW, api_key_auth=True)
    assert not closed.open and closed.window == "api_rejected" and closed.until == NOW + 20
    assert quota_gate(snaps, now=NOW + 21, api_key_auth=True).open, "reset passed: open"
    busy = {"api_tokens": _snap(status="allowed", utilization=0.97, resetsAt=NOW + 60)}
    assert not quota_gate(busy, now=NOW).open
    assert quota_gate({"api_tokens": _snap(utilization=0.5, resetsAt=NOW + 60)}, now=NOW).open


# --- Codex event streams -----------------------------------------------------------------

OK_STREAM = "\n".join(
    json.dumps(e)
    for e in [
        {"type": "thread.started", "thread_id": "t1"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "i0", "type": "reasoning", "text": "hm"}},
        {
            "type": "item.completed",
            "item": {"id": "i1", "type": "agent_message", "text": '{"actions": []}'},
        },
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 100, "cached_input_tokens": 60, "output_tokens": 7},
        },
    ]
)


def test_codex_stream_success_usage_and_price():
    r = result_from_codex(OK_STREAM, "", model="gpt-5", exit_code=0, timed_out=False, duration_ms=3)
    assert r.text == '{"actions": []}' and not r.is_error
    assert r.usage == {
        "input_tokens": 40,
        "output_tokens": 7,
        "cache_read_input_tokens": 60,
        "cache_creation_input_tokens": 0,
    }
    assert r.cost_usd == pytest.approx((40 * 1.25 + 7 * 10 + 60 * 0.125) / 1e6)
    assert classify_attempt(r, CTX).outcome == "ok"


@pytest.mark.parametrize(
    ("message", "outcome"),
    [
        ("exceeded retry limit, last status: 429 Too Many Requests", "defer_rate_limited"),
        ("unexpected status 401 Unauthorized", "fail_backend_auth"),
        ("The model `x` does not exist or you do not have access to it.", "fail_unknown_model"),
        ("Your input exceeds the context window of this model.", "quarantine_oversized"),
        ("stream disconnected before completion", "fail_is_error"),
    ],
)
def test_codex_failed_turns_map_onto_outcomes(message, outcome):
    stream = "\n".join(
        [
            json.dumps({"type": "thread.started", "thread_id": "t"}),
            json.dumps({"type": "error", "message": message}),
            json.dumps({"type": "turn.failed", "error": {"message": message}}),
        ]
    )
    r = result_from_codex(stream, "", model="gpt-5", exit_code=1, timed_out=False, duration_ms=1)
    assert classify_attempt(r, CTX).outcome == outcome


def test_codex_timeout_and_garbage():
    r = result_from_codex("{partial", "", model="m", exit_code=124, timed_out=True, duration_ms=1)
    assert classify_attempt(r, CTX).outcome == "poison_timeout_exit_124"
    r = result_from_codex("not json", "", model="m", exit_code=0, timed_out=False, duration_ms=1)
    assert classify_attempt(r, CTX).disposition == "retry"


# --- no SDK on the hook / status path ----------------------------------------------------


def test_hook_status_and_backend_selection_never_import_an_sdk(tmp_path):
    code = (
        "import sys, reflect_jobs.hook, reflect_jobs.status, reflect_jobs.cli, reflect_jobs.doctor\n"
        "from reflect_jobs.writer.selection import make_backend\n"
        "for name in ('openai', 'anthropic', 'codex'):\n"
        "    make_backend(name, claude_bin='claude', model='m', cwd='.', drain_timeout=300)\n"
        "bad = [m for m in ('openai', 'anthropic', 'httpx') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr


# --- the codex process and backend selection ---------------------------------------------


def test_codex_timeout_kills_the_run_and_takes_the_cli_timeout_row(tmp_path, monkeypatch):
    from api_support import STUB_CODEX

    from reflect_jobs.writer.codex_backend import CodexCliBackend

    monkeypatch.setenv("STUB_CODEX_MODE", "sleep")
    monkeypatch.setenv("STUB_CODEX_SLEEP", "30")
    result = CodexCliBackend(str(STUB_CODEX), "gpt-5", str(tmp_path), timeout_sec=1).call("hi")
    assert result.timed_out and result.exit_code == 124
    assert classify_attempt(result, CTX).outcome == "poison_timeout_exit_124"


def test_missing_codex_is_an_install_fault(tmp_path):
    from reflect_jobs.writer.result import BackendMissing
    from reflect_jobs.writer.selection import make_backend

    backend = make_backend(
        "codex",
        claude_bin="claude",
        model="m",
        cwd=str(tmp_path),
        drain_timeout=300,
        options={"codex_bin": str(tmp_path / "no-codex")},
    )
    with pytest.raises(BackendMissing):
        backend.call("hi")


def test_anthropic_without_a_key_is_an_install_fault_not_a_crash(monkeypatch):
    from reflect_jobs.writer.anthropic_backend import AnthropicBackend
    from reflect_jobs.writer.result import BackendMissing

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(BackendMissing, match="ANTHROPIC_API_KEY"):
        AnthropicBackend("sonnet", timeout_sec=1).call("hi")
