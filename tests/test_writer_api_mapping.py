"""The openai and anthropic writers' outcome table: real SDK clients, a real HTTP server.

Each row sends one call through the backend (the official SDK, ``max_retries=0``) to
``tests/stubs/api_server.py`` answering in the provider's wire format, then scores the
``ModelResult`` with ``classify_attempt`` — the same two steps the write stage runs.
"""

from __future__ import annotations

import json

import pytest
from api_support import (
    ONE_CREATE,
    anthropic_error,
    anthropic_message,
    api_server,
    openai_completion,
    openai_error,
)
from support import free_port

from reflect_jobs.writer.anthropic_backend import AnthropicBackend
from reflect_jobs.writer.openai_backend import OpenAIBackend
from reflect_jobs.writer.outcomes import AttemptContext, classify_attempt
from reflect_jobs.writer.prompt import STATIC_PREFIX, build_prompt

PROMPT = build_prompt("user: No, never mutate the shared config at import time.", allowed_ids=[])
CTX = AttemptContext(prior_failures=0, prior_timeouts=0, invalid_streak=0)

OPENAI_ROWS = [
    (
        openai_error(429, "Rate limit reached", "requests", "rate_limit_exceeded", retry_after="7"),
        ("defer_rate_limited", 0, "defer"),
    ),
    (
        openai_error(503, "The server is overloaded", "server_error", None),
        ("defer_rate_limited", 0, "defer"),
    ),
    (
        openai_error(
            400,
            "This model's maximum context length is 8192 tokens. However, you requested 9000.",
            "invalid_request_error",
            "context_length_exceeded",
        ),
        ("quarantine_oversized", 0, "quarantine"),
    ),
    (
        openai_error(401, "Incorrect API key provided", "invalid_request_error", "invalid_api_key"),
        ("fail_backend_auth", 0, "halt"),
    ),
    (
        openai_error(
            404, "The model `nope` does not exist", "invalid_request_error", "model_not_found"
        ),
        ("fail_unknown_model", 0, "halt"),
    ),
    (openai_error(500, "internal error", "server_error"), ("fail_server_error", 1, "retry")),
    (
        openai_error(422, "messages: field required", "invalid_request_error"),
        ("fail_is_error", 1, "retry"),
    ),
    (openai_completion("Sure! Here are my thoughts."), ("fail_unparseable", 1, "retry")),
    (openai_completion(json.dumps(ONE_CREATE)), ("ok", 1, "ok")),
]


@pytest.fixture(scope="module")
def table_server(tmp_path_factory):
    """One server for every row: row i of a table answers under the prefix /<table><i>."""
    routes = {f"POST /o{i}/v1/chat/completions": [a] for i, (a, _) in enumerate(OPENAI_ROWS)}
    routes.update({f"POST /a{i}/v1/messages": [a] for i, (a, _) in enumerate(ANTHROPIC_ROWS)})
    with api_server(tmp_path_factory.mktemp("table"), routes) as srv:
        yield srv


@pytest.mark.parametrize("row", range(len(OPENAI_ROWS)))
def test_openai_outcome_table(table_server, row):
    answer, expected = OPENAI_ROWS[row]
    srv = table_server
    backend = OpenAIBackend("served-model", base_url=f"{srv.url}/o{row}/v1", timeout_sec=10)
    result = backend.call(PROMPT)
    (request,) = srv.requests(f"/o{row}/v1/chat/completions")
    outcome = classify_attempt(result, CTX)
    assert (outcome.outcome, outcome.entries, outcome.disposition) == expected
    assert request["body"]["response_format"] == {"type": "json_object"}
    assert request["headers"]["x-stainless-retry-count"] == "0", "the SDK never retries"
    if expected[0] == "defer_rate_limited":
        assert result.rate_limit_info[-1]["rateLimitType"] == "api_rejected"
    if answer["headers"].get("retry-after"):
        assert result.retry_after_sec == 7.0


def test_openai_server_without_json_mode_is_asked_again_without_it(tmp_path):
    routes = {
        "POST /v1/chat/completions": [
            openai_error(400, "response_format is not supported", "invalid_request_error"),
            openai_completion(json.dumps(ONE_CREATE)),
        ]
    }
    with api_server(tmp_path, routes) as srv:
        result = OpenAIBackend("m", base_url=srv.url + "/v1", timeout_sec=10).call(PROMPT)
        first, second = srv.requests()
    assert "response_format" in first["body"] and "response_format" not in second["body"]
    assert classify_attempt(result, CTX).outcome == "ok"


def test_openai_timeout_is_a_paid_retry(tmp_path):
    slow = {**openai_completion(json.dumps(ONE_CREATE)), "sleep": 5}
    with api_server(tmp_path, {"POST /v1/chat/completions": [slow]}) as srv:
        result = OpenAIBackend("m", base_url=srv.url + "/v1", timeout_sec=0.5).call(PROMPT)
    assert result.timed_out and result.exit_code == 124
    outcome = classify_attempt(result, CTX)
    assert (outcome.outcome, outcome.entries, outcome.disposition) == ("fail_timeout", 1, "retry")


def test_openai_refused_connection_is_a_free_retry():
    result = OpenAIBackend("m", base_url=f"http://127.0.0.1:{free_port()}/v1", timeout_sec=5).call(
        PROMPT
    )
    outcome = classify_attempt(result, CTX)
    assert (outcome.outcome, outcome.entries, outcome.disposition) == (
        "fail_connection",
        0,
        "retry",
    )
    exhausted = AttemptContext(prior_failures=2, prior_timeouts=0, invalid_streak=0)
    assert classify_attempt(result, exhausted).disposition == "poison"


ANTHROPIC_ROWS = [
    (anthropic_error(529, "overloaded_error", "Overloaded"), ("defer_rate_limited", 0, "defer")),
    (
        anthropic_error(
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your rate limit",
            retry_after="3",
        ),
        ("defer_rate_limited", 0, "defer"),
    ),
    (
        anthropic_error(
            400, "invalid_request_error", "prompt is too long: 215000 tokens > 200000 maximum"
        ),
        ("quarantine_oversized", 0, "quarantine"),
    ),
    (
        anthropic_error(
            413, "request_too_large", "Request exceeds the maximum allowed number of bytes"
        ),
        ("quarantine_oversized", 0, "quarantine"),
    ),
    (
        anthropic_error(401, "authentication_error", "invalid x-api-key"),
        ("fail_backend_auth", 0, "halt"),
    ),
    (
        anthropic_error(404, "not_found_error", "model: claude-nope"),
        ("fail_unknown_model", 0, "halt"),
    ),
    (anthropic_error(500, "api_error", "Internal server error"), ("fail_server_error", 1, "retry")),
    (anthropic_message(json.dumps(ONE_CREATE)), ("ok", 1, "ok")),
]


@pytest.mark.parametrize("row", range(len(ANTHROPIC_ROWS)))
def test_anthropic_outcome_table(table_server, monkeypatch, row):
    answer, expected = ANTHROPIC_ROWS[row]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"{table_server.url}/a{row}")
    result = AnthropicBackend("sonnet", timeout_sec=10).call(PROMPT)
    (request,) = table_server.requests(f"/a{row}/v1/messages")
    outcome = classify_attempt(result, CTX)
    assert (outcome.outcome, outcome.entries, outcome.disposition) == expected
    sent = request["headers"]  # SDK versions send the key as x-api-key or a bearer token
    assert "sk-ant-test-key" in (sent.get("x-api-key", ""), sent.get("authorization", "")[7:])
    assert request["body"]["model"] == "claude-sonnet-4-5", "the CLI alias is resolved"
    first, rest = request["body"]["messages"][0]["content"]
    assert first["text"] == STATIC_PREFIX and first["cache_control"] == {"type": "ephemeral"}
    assert first["text"] + rest["text"] == PROMPT, "the prompt is sent whole, prefix first"
    if answer["headers"].get("retry-after"):
        assert result.retry_after_sec == 3.0


def test_anthropic_headers_and_cache_usage_reach_the_result(tmp_path, monkeypatch):
    answer = anthropic_message(json.dumps(ONE_CREATE), cache_write=1500, cache_read=0)
    with api_server(tmp_path, {"POST /v1/messages": [answer]}) as srv:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
        result = AnthropicBackend("claude-sonnet-4-5", timeout_sec=10).call(PROMPT)
    assert result.usage["cache_creation_input_tokens"] == 1500
    assert result.cost_usd == pytest.approx((40 * 3 + 90 * 15 + 1500 * 3.75) / 1e6)
    windows = {s["rateLimitType"]: s for s in result.rate_limit_info}
    assert windows["api_requests"]["remaining"] == 49 and windows["api_tokens"]["limit"] == 100000
