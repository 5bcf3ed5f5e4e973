"""``reflect-jobs doctor`` probes the configured API writer for real and prints the fix.

The probe is a model listing against ``tests/stubs/api_server.py`` (free: never a completion):
endpoint reachable, key accepted, model listed.
"""

from __future__ import annotations

import json

import pytest
from api_support import STUB_CODEX, anthropic_models, api_server, openai_error, openai_models
from support import free_port

from reflect_jobs.doctor import check_backend


def _doctor_cli(env) -> dict:
    proc = env.invoke("doctor", "--json", check=False)
    checks = json.loads(proc.stdout)
    checks = checks["checks"] if isinstance(checks, dict) else checks
    (check,) = [c for c in checks if c["name"] == "writer backend"]
    return check


def _writer_check(env) -> dict:
    """The doctor's backend check in-process (the CLI wiring is tested once, below)."""
    return check_backend(env.settings())


@pytest.mark.parametrize(
    ("answer", "model", "ok", "fix_word"),
    [
        (openai_models("qwen2.5-coder:7b", "llama3.1:8b"), "llama3.1:8b", True, ""),
        (openai_models("qwen2.5-coder:7b"), "sonnet", False, "REFLECT_DRAIN_MODEL"),
        (
            openai_error(401, "Incorrect API key", "invalid_request_error"),
            "m",
            False,
            "REFLECT_OPENAI_API_KEY",
        ),
    ],
)
def test_doctor_openai(env, tmp_path, answer, model, ok, fix_word):
    with api_server(tmp_path / "srv", {"GET /v1/models": [answer]}) as srv:
        env.update(
            REFLECT_WRITER_BACKEND="openai",
            REFLECT_OPENAI_BASE_URL=srv.url + "/v1",
            REFLECT_DRAIN_MODEL=model,
        )
        check = _doctor_cli(env) if ok else _writer_check(env)
        assert len(srv.requests("/v1/models")) == 1
    assert check["ok"] is ok, check
    assert fix_word in check["fix"]
    if model == "sonnet":
        assert "Claude alias" in check["fix"]


def test_doctor_openai_unreachable(env):
    env.update(
        REFLECT_WRITER_BACKEND="openai",
        REFLECT_OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1",
        REFLECT_DRAIN_MODEL="m",
    )
    check = _writer_check(env)
    assert not check["ok"] and "unreachable" in check["detail"]
    assert "REFLECT_OPENAI_BASE_URL" in check["fix"]


def test_doctor_anthropic_lists_the_resolved_alias(env, tmp_path, monkeypatch):
    # sonnet writes; haiku (the cheap checkpoint and dedupe model) must be served too
    listing = anthropic_models("claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001")
    routes = {"GET /v1/models": [listing]}
    with api_server(tmp_path / "srv", routes) as srv:
        env.update(REFLECT_WRITER_BACKEND="anthropic")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")  # the SDK reads its env
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
        assert _writer_check(env)["ok"]
        env["REFLECT_DRAIN_MODEL"] = "claude-nope-9"
        check = _writer_check(env)
    assert not check["ok"] and "REFLECT_DRAIN_MODEL" in check["fix"]
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    check = _writer_check(env)
    assert not check["ok"] and "ANTHROPIC_API_KEY" in check["fix"]


def test_doctor_names_the_pass_model_the_endpoint_does_not_serve(env, tmp_path):
    """Checkpoints call a cheap and a deep model beside the drain model (ARCHITECTURE §14.1):
    one the endpoint does not serve would halt the write stage at a session's first
    checkpoint, so doctor checks each and names the variable to fix."""
    env.pop("REFLECT_CHECKPOINTS")  # on: the cheap model is used
    listing = openai_models("qwen2.5-coder:7b", "llama3.1:8b")
    with api_server(tmp_path / "srv", {"GET /v1/models": [listing, listing, listing]}) as srv:
        env.update(
            REFLECT_WRITER_BACKEND="openai",
            REFLECT_OPENAI_BASE_URL=srv.url + "/v1",
            REFLECT_DRAIN_MODEL="qwen2.5-coder:7b",
        )
        check = _writer_check(env)  # the cheap model defaults to the drain model here
        assert check["ok"] and "qwen2.5-coder:7b" in check["detail"], check
        env.update(REFLECT_CHECKPOINT_CHEAP_MODEL="llama3.1:8b", REFLECT_DEEP_MODEL="opus")
        check = _writer_check(env)
    assert not check["ok"] and "REFLECT_DEEP_MODEL" in check["fix"], check
    assert "'opus' (REFLECT_DEEP_MODEL) is not listed" in check["detail"]


def test_doctor_codex(env, tmp_path):
    env.update(REFLECT_WRITER_BACKEND="codex", REFLECT_CODEX_BIN=str(STUB_CODEX))
    check = _writer_check(env)
    assert not check["ok"] and "Claude alias" in check["fix"], "sonnet is not a Codex model"
    env["REFLECT_DRAIN_MODEL"] = "gpt-5-codex"
    assert _writer_check(env)["ok"]
    env["REFLECT_CODEX_BIN"] = str(tmp_path / "no-codex")
    check = _writer_check(env)
    assert not check["ok"] and "REFLECT_CODEX_BIN" in check["fix"]
