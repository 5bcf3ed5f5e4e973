"""Each API writer writes a note end to end: ``reflect-jobs drain`` → backend → KB note.

The openai and anthropic writers talk to ``tests/stubs/api_server.py`` (a real HTTP server on
127.0.0.1 answering in their wire formats) through the real SDKs; the codex writer runs the
``tests/stubs/codex`` executable, which prints the real ``codex exec --json`` event stream.
The first answer is a rate limit (429 / 529 / a 429 turn failure): the job is deferred at
$0 until ``retry-after``, then the second call succeeds and the note is written.
"""

from __future__ import annotations

import json
from pathlib import Path

from api_support import (
    ONE_CREATE,
    STUB_CODEX,
    anthropic_error,
    anthropic_message,
    api_server,
    openai_completion,
    openai_error,
)
from support import job_due, wait_for, write_claude_transcript

TITLE = ONE_CREATE["actions"][0]["learning"]["title"]


def _enqueue(
    env, tmp_path, name="t", text="No, that's wrong: never mutate the shared config at import time."
) -> str:
    t = write_claude_transcript(tmp_path / f"{name}.jsonl", [text])
    return env.invoke("enqueue", str(t), "--session-id", name).stdout.strip()


def _drain(env):
    env.invoke("drain", "--until-idle", "--max-seconds", "90")


def _job(env) -> dict:
    (job,) = json.loads(env.invoke("jobs", "--json").stdout)
    return job


def _cost(env, by="outcome") -> dict:
    return json.loads(env.invoke("cost", "--by", by, "--json").stdout)


def _notes(env) -> list[str]:
    return [p.read_text() for p in sorted((env.kb / "documents").glob("*.md"))]


def _defer_then_write(env, job_id: str, backend: str) -> dict:
    """First drain: deferred at $0; once due again, the second drain writes the note."""
    _drain(env)
    job = _job(env)
    assert (job["state"], job["outcome"]) == ("deferred", "defer_rate_limited")
    assert _cost(env)["total"]["entries"] == 0, "a rate limit costs no budget unit"
    status = json.loads(env.invoke("status", "--json").stdout)
    assert status["budget"]["used"] == 0
    wait_for(lambda: job_due(env.settings().db_url, job_id), 30, what="retry-after passed")
    _drain(env)
    job = _job(env)
    assert (job["state"], job["outcome"]) == ("done", "ok")
    notes = _notes(env)
    assert len(notes) == 1 and TITLE in notes[0]
    rows = _cost(env, "backend")["rows"]
    assert set(rows) == {backend} and rows[backend]["entries"] == 1 and rows[backend]["runs"] == 2
    return rows[backend]


def test_openai_writer_local_server_429_then_200_writes_a_note(env, tmp_path):
    routes = {
        "POST /v1/chat/completions": [
            openai_error(
                429, "Rate limit reached", "requests", "rate_limit_exceeded", retry_after="1"
            ),
            openai_completion(json.dumps(ONE_CREATE), prompt_tokens=1500, cached=1024),
        ]
    }
    with api_server(tmp_path / "srv", routes) as srv:
        env.update(
            REFLECT_WRITER_BACKEND="openai",
            REFLECT_OPENAI_BASE_URL=srv.url + "/v1",
            REFLECT_OPENAI_API_KEY="sk-local-test",
            REFLECT_DRAIN_MODEL="qwen2.5-coder:7b",
        )
        job_id = _enqueue(env, tmp_path)
        row = _defer_then_write(env, job_id, "openai")
        calls = srv.requests("/v1/chat/completions")
    assert len(calls) == 2
    assert calls[1]["body"]["model"] == "qwen2.5-coder:7b"
    assert calls[1]["body"]["response_format"] == {"type": "json_object"}
    assert calls[1]["headers"]["authorization"] == "Bearer sk-local-test"
    assert "never mutate the shared config" in calls[1]["body"]["messages"][0]["content"]
    assert row["cost_usd"] == 0.0 and row["cache_read"] == 1024, "a local model is free"


def test_anthropic_writer_529_then_200_caches_the_prefix_and_prices_it(env, tmp_path):
    routes = {
        "POST /v1/messages": [
            anthropic_error(529, "overloaded_error", "Overloaded", retry_after="1"),
            anthropic_message(json.dumps(ONE_CREATE), cache_write=1500),
        ]
    }
    with api_server(tmp_path / "srv", routes) as srv:
        env.update(
            REFLECT_WRITER_BACKEND="anthropic",
            ANTHROPIC_API_KEY="sk-ant-test",
            ANTHROPIC_BASE_URL=srv.url,
        )
        job_id = _enqueue(env, tmp_path)
        row = _defer_then_write(env, job_id, "anthropic")
        calls = srv.requests("/v1/messages")
    assert len(calls) == 2
    blocks = calls[1]["body"]["messages"][0]["content"]
    assert blocks[0]["cache_control"] == {"type": "ephemeral"}
    assert row["cache_creation"] == 1500 and row["cost_usd"] > 0
    snaps = json.loads(env.invoke("status", "--json").stdout)["quota"]
    assert snaps["gate"] == "open"


def test_openai_refused_key_halts_without_charge(env, tmp_path):
    routes = {
        "POST /v1/chat/completions": [
            openai_error(401, "Incorrect API key", "invalid_request_error", "invalid_api_key")
        ]
    }
    with api_server(tmp_path / "srv", routes) as srv:
        env.update(
            REFLECT_WRITER_BACKEND="openai",
            REFLECT_OPENAI_BASE_URL=srv.url + "/v1",
            REFLECT_DRAIN_MODEL="m",
        )
        _enqueue(env, tmp_path)
        _drain(env)
    job = _job(env)
    assert (job["state"], job["outcome"]) == ("halted", "fail_backend_auth")
    status = json.loads(env.invoke("status", "--json").stdout)
    assert status["halted"] and status["budget"]["used"] == 0
    assert _notes(env) == []


def test_codex_writer_rate_limited_then_writes_a_note(env, tmp_path):
    cwd = tmp_path / "writer-cwd"
    cwd.mkdir()
    log = tmp_path / "codex-calls.jsonl"
    env.update(
        REFLECT_WRITER_BACKEND="codex",
        REFLECT_CODEX_BIN=str(STUB_CODEX),
        REFLECT_DRAIN_MODEL="gpt-5-codex",
        REFLECT_DRAIN_CWD=str(cwd),
        STUB_CODEX_MODE="sequence",
        STUB_CODEX_SEQUENCE="rate_limit,ok",
        STUB_CODEX_STATE=str(tmp_path / "codex-seq"),
        STUB_CODEX_LOG=str(log),
        STUB_CODEX_MESSAGE="You've hit your usage limit (429). Please try again in 1s.",
    )
    job_id = _enqueue(env, tmp_path)
    rows = _defer_then_write(env, job_id, "codex")
    calls = [json.loads(line) for line in Path(log).read_text().splitlines()]
    assert len(calls) == 2
    argv = calls[1]["argv"]
    assert argv[:2] == ["exec", "--json"] and argv[-1] == "-"
    assert argv[argv.index("--sandbox") + 1] == "read-only"
    assert (
        argv[argv.index("-C") + 1] == str(cwd) and argv[argv.index("--model") + 1] == "gpt-5-codex"
    )
    assert "--skip-git-repo-check" in argv
    assert calls[1]["cwd"] == str(cwd) and calls[1]["child_env"] == "1"
    assert "never mutate the shared config" not in calls[1]["prompt_head"]  # prompt on stdin
    assert calls[1]["prompt_chars"] > 1000
    assert rows["cache_read"] == 24448 and rows["cost_usd"] > 0, "gpt-5 is in the price table"


def test_anthropic_rate_limit_headers_close_the_gate_for_the_next_job(env, tmp_path):
    answer = anthropic_message(json.dumps(ONE_CREATE))
    answer["headers"]["anthropic-ratelimit-requests-remaining"] = "0"
    answer["headers"]["anthropic-ratelimit-requests-reset"] = "2099-01-01T00:00:00Z"
    with api_server(tmp_path / "srv", {"POST /v1/messages": [answer]}) as srv:
        env.update(
            REFLECT_WRITER_BACKEND="anthropic",
            ANTHROPIC_API_KEY="sk-ant-test",  # API-key auth: only the API windows apply
            ANTHROPIC_BASE_URL=srv.url,
        )
        _enqueue(env, tmp_path, "h1")
        _drain(env)
        _enqueue(env, tmp_path, "h2", "Stop: always pin the node version in .nvmrc.")
        _drain(env)
        assert len(srv.requests("/v1/messages")) == 1, "the second job never called"
    states = sorted(
        (j["session_id"], j["state"]) for j in json.loads(env.invoke("jobs", "--json").stdout)
    )
    assert states == [("h1", "done"), ("h2", "deferred")]
    quota = json.loads(env.invoke("status", "--json").stdout)["quota"]
    assert quota["gate"] == "closed" and "api_requests" in quota["reason"]


def test_openai_5xx_is_retried_with_backoff_then_writes(env, tmp_path):
    routes = {
        "POST /v1/chat/completions": [
            openai_error(502, "upstream connect error", "server_error"),
            openai_completion(json.dumps(ONE_CREATE)),
        ]
    }
    with api_server(tmp_path / "srv", routes) as srv:
        env.update(
            REFLECT_WRITER_BACKEND="openai",
            REFLECT_OPENAI_BASE_URL=srv.url + "/v1",
            REFLECT_DRAIN_MODEL="m",
            REFLECT_RETRY_BASE_SEC="0",
        )
        job_id = _enqueue(env, tmp_path)
        _drain(env)
        assert len(srv.requests("/v1/chat/completions")) == 2
    job = _job(env)
    assert (job["state"], job["outcome"]) == ("done", "ok") and TITLE in _notes(env)[0]
    events = json.loads(env.invoke("show", job_id, "--json").stdout)["events"]
    assert [e["to"] for e in events].count("retrying") == 1
    by_outcome = _cost(env)["rows"]
    assert by_outcome["fail_server_error"]["entries"] == 1, "a 5xx is an attempted call"


def test_openai_prompt_too_long_is_a_free_quarantine_and_unknown_model_halts(env, tmp_path):
    too_long = openai_error(
        400,
        "This model's maximum context length is 8192 tokens. However, you requested 9100.",
        "invalid_request_error",
        "context_length_exceeded",
    )
    unknown = openai_error(404, "model 'nope' not found", "not_found_error")
    routes = {"POST /a/v1/chat/completions": [too_long], "POST /b/v1/chat/completions": [unknown]}
    with api_server(tmp_path / "srv", routes) as srv:
        env.update(REFLECT_WRITER_BACKEND="openai", REFLECT_DRAIN_MODEL="nope")
        env["REFLECT_OPENAI_BASE_URL"] = srv.url + "/a/v1"
        _enqueue(env, tmp_path, "a")
        _drain(env)
        job = _job(env)
        assert (job["state"], job["outcome"]) == ("quarantined", "quarantine_oversized")
        env["REFLECT_OPENAI_BASE_URL"] = srv.url + "/b/v1"
        _enqueue(env, tmp_path, "b", "Never commit .env files; the rule is a template only.")
        _drain(env)
    states = {
        j["session_id"]: (j["state"], j["outcome"])
        for j in json.loads(env.invoke("jobs", "--json").stdout)
    }
    assert states["b"] == ("halted", "fail_unknown_model")
    assert _cost(env)["total"]["entries"] == 0, "neither cost a budget unit"
