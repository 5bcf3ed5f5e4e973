"""``doctor`` for the API writers: is the configured backend really usable, and if not, how to fix it.

Every probe is free — a model listing, never a completion: the endpoint is reachable, the
key is accepted, and the model is one the endpoint serves. Each returns the same check dict
as ``doctor_check.check``. The SDKs are imported here only when the backend is selected.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

from reflect_jobs.config import redact_url
from reflect_jobs.doctor_check import check
from reflect_jobs.markers import CHILD_ENV

PROBE_TIMEOUT_SEC = 10.0
NAME = "writer backend"
SONNET_HINT = (
    "REFLECT_DRAIN_MODEL defaults to 'sonnet', a Claude alias: set it to a model this "
    "endpoint serves"
)


def _check(ok: bool, detail: str, fix: str = "") -> dict[str, Any]:
    return check(NAME, ok, detail, fix)


def _listed(model: str, ids: list[str]) -> bool:
    return model in ids or any(i.startswith(model) for i in ids)


def configured_models(settings: Any) -> list[tuple[str, str]]:
    """Every model a pass may call, with the variable that names it (first name wins).

    Checkpoints (ARCHITECTURE §14.1) call up to three models and the dedupe pass a fourth:
    a cheap model the endpoint does not serve would halt the write stage at a session's
    first checkpoint, so doctor lists them all.

    Args:
        settings: ``config.Settings``.

    Returns:
        ``[(variable, model), …]``: the drain model first, then the cheap checkpoint model
        (when checkpoints are on), the deep model and the dedupe model, each model once.
    """
    pairs = [("REFLECT_DRAIN_MODEL", settings.model)]
    if settings.checkpoints:
        pairs.append(("REFLECT_CHECKPOINT_CHEAP_MODEL", settings.cheap_pass_model))
    pairs += [
        ("REFLECT_DEEP_MODEL", settings.deep_pass_model),
        ("REFLECT_DEDUPE_MODEL", settings.dedupe_pass_model),
    ]
    seen: set[str] = set()
    once: list[tuple[str, str]] = []
    for variable, model in pairs:
        if model not in seen:
            seen.add(model)
            once.append((variable, model))
    return once


def _models_check(
    backend: str, models: list[tuple[str, str]], ids: list[str], where: str
) -> dict[str, Any]:
    for variable, model in models:
        if _listed(model, ids):
            continue
        shown = ", ".join(ids[:8]) + (" …" if len(ids) > 8 else "")
        fix = f"export {variable}=<one of: {shown or 'none listed'}>"
        if model == "sonnet" and backend != "anthropic":
            fix = f"{SONNET_HINT}; {fix}"
        if model == "haiku" and backend != "anthropic":
            fix = f"'haiku' is a Claude alias; {fix}"
        return _check(
            False, f"{backend} at {where}: model {model!r} ({variable}) is not listed", fix
        )
    names = ", ".join(repr(m) for _, m in models)
    return _check(True, f"{backend} at {where}: key accepted, model(s) {names} listed")


#: Claude's model aliases: what the Claude CLI and the anthropic writer take, and what an
#: OpenAI-compatible server or Codex would answer "unknown model" to.
CLAUDE_ALIASES = ("sonnet", "opus", "haiku", "opusplan")
#: Names that are surely not Claude models (the Claude writers would halt on them).
NOT_CLAUDE = (
    "gpt-",
    "gpt4",
    "o1",
    "o3",
    "o4",
    "chatgpt",
    "codex-",
    "gemini",
    "llama",
    "qwen",
    "mistral",
    "mixtral",
    "deepseek",
    "phi-",
    "gemma",
)


def model_problem(backend: str, model: str) -> str | None:
    """Why ``backend`` would refuse ``model`` by its name alone, or None (free, offline).

    The write stage halts on an unknown model (``fail_unknown_model``), so a name the
    backend cannot take is worth catching before the first paid pass: a Claude alias sent
    to an OpenAI-compatible server or Codex, another vendor's model sent to Claude.

    Args:
        backend: The resolved writer backend.
        model: A configured model name.

    Returns:
        One sentence, or None when the name may be fine (the probe checks the listing).
    """
    low = model.strip().lower()
    if backend in ("openai", "codex") and low in CLAUDE_ALIASES:
        return f"{model!r} is a Claude alias: the {backend} writer's server does not serve it"
    if backend in ("claude", "anthropic") and low.startswith(NOT_CLAUDE):
        return f"{model!r} is not a Claude model: the {backend} writer would halt on it"
    return None


def models_check(settings: Any, backend: str) -> dict[str, Any] | None:
    """A failed check for the first configured model the backend cannot take, else None.

    Args:
        settings: ``config.Settings``.
        backend: The resolved writer backend.

    Returns:
        A check naming the model, the variable and its fix; None when all may be fine.
    """
    for variable, model in configured_models(settings):
        why = model_problem(backend, model)
        if why:
            fix = (
                f"set {variable} (or the config file's key) to a model the {backend} writer serves"
            )
            if model == "sonnet" and backend != "anthropic":
                fix = f"{SONNET_HINT}; {fix}"
            return _check(False, f"{backend}: {why} ({variable})", fix)
    return None


def _with_model_note(check: dict[str, Any], settings: Any, backend: str) -> dict[str, Any]:
    """A failed probe that could not list models, with a model name it would refuse added."""
    bad = models_check(settings, backend)
    if bad is not None:
        check["detail"] += f"; and {bad['detail']}"
    return check


def _local(url: str) -> bool:
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").lower()
    return host in ("localhost", "127.0.0.1", "::1", "0.0.0.0") or host.endswith(".local")


def probe_openai(settings: Any) -> dict[str, Any]:
    """GET ``{base_url}/models`` with the configured key.

    Args:
        settings: ``config.Settings`` (``openai_base_url``, ``openai_api_key``, ``model``).

    Returns:
        A check: unreachable, key refused, model not listed (each with its fix), or ok.
    """
    from reflect_jobs.writer.openai_backend import OpenAIBackend

    if not settings.openai_base_url and not settings.openai_api_key:
        return _check(
            False,
            "openai writer with no API key: REFLECT_OPENAI_API_KEY and OPENAI_API_KEY are "
            "unset and no REFLECT_OPENAI_BASE_URL is set, so it would call api.openai.com",
            "export REFLECT_OPENAI_API_KEY=<key> (or openai_api_key in the config file), or "
            "set REFLECT_OPENAI_BASE_URL to your local server (…/v1)",
        )
    backend = OpenAIBackend(
        settings.model,
        base_url=settings.openai_base_url,
        api_key=settings.openai_api_key,
        timeout_sec=PROBE_TIMEOUT_SEC,
    )
    where = (
        redact_url(settings.openai_base_url)
        or "the SDK default (OPENAI_BASE_URL or api.openai.com)"
    )
    try:
        openai, client = backend.client()
    except Exception as exc:  # BackendMissing: the SDK is not installed
        return _check(False, str(exc), "pip install 'reflect-jobs[writers]'")
    try:
        ids = [m.id for m in client.models.list()]
    except openai.APIStatusError as exc:
        if exc.status_code in (401, 403):
            return _check(
                False,
                f"openai at {where}: key refused (HTTP {exc.status_code})",
                "export REFLECT_OPENAI_API_KEY=<a valid key> (or OPENAI_API_KEY)",
            )
        if exc.status_code == 404:  # some servers do not list models: judge the names
            return models_check(settings, "openai") or _check(
                True, f"openai at {where}: reachable; it does not list models"
            )
        return _check(
            False, f"openai at {where}: HTTP {exc.status_code}", "check the server's logs"
        )
    except openai.APIConnectionError as exc:
        if not settings.openai_base_url:
            fix = "check the network, or set REFLECT_OPENAI_BASE_URL to the server you use"
        elif _local(settings.openai_base_url):
            fix = (
                "start the server (llama-server / ollama serve / vllm serve) or fix "
                "REFLECT_OPENAI_BASE_URL (it ends in /v1)"
            )
        else:
            fix = "check REFLECT_OPENAI_BASE_URL (it ends in /v1) and the network"
        return _with_model_note(
            _check(False, f"openai endpoint unreachable at {where}: {type(exc).__name__}", fix),
            settings,
            "openai",
        )
    return _models_check("openai", configured_models(settings), ids, where)


def probe_anthropic(settings: Any) -> dict[str, Any]:
    """GET ``/v1/models`` with ``ANTHROPIC_API_KEY`` (``ANTHROPIC_BASE_URL`` honoured).

    Args:
        settings: ``config.Settings`` (``model``).

    Returns:
        A check: no key, unreachable, key refused, model not listed, or ok.
    """
    from reflect_jobs.writer.anthropic_backend import AnthropicBackend, api_model

    if not os.environ.get("ANTHROPIC_API_KEY"):
        return _check(False, "ANTHROPIC_API_KEY is not set", "export ANTHROPIC_API_KEY=sk-ant-…")
    where = redact_url(os.environ.get("ANTHROPIC_BASE_URL") or "") or "api.anthropic.com"
    try:
        anthropic, client = AnthropicBackend(settings.model, timeout_sec=PROBE_TIMEOUT_SEC).client()
    except Exception as exc:  # BackendMissing
        return _check(False, str(exc), "pip install 'reflect-jobs[writers]'")
    try:
        ids = [m.id for m in client.models.list()]
    except anthropic.APIStatusError as exc:
        if exc.status_code in (401, 403):
            return _check(
                False,
                f"anthropic at {where}: key refused (HTTP {exc.status_code})",
                "export ANTHROPIC_API_KEY=<a valid key>",
            )
        return _check(
            False, f"anthropic at {where}: HTTP {exc.status_code}", "retry later; check status"
        )
    except anthropic.APIConnectionError as exc:
        return _with_model_note(
            _check(
                False,
                f"anthropic endpoint unreachable at {where}: {type(exc).__name__}",
                "check the network or ANTHROPIC_BASE_URL",
            ),
            settings,
            "anthropic",
        )
    models = [(v, api_model(m)) for v, m in configured_models(settings)]
    return _models_check("anthropic", models, ids, where)


def probe_codex(settings: Any) -> dict[str, Any]:
    """``codex --version`` answers and the model is not the Claude default.

    Args:
        settings: ``config.Settings`` (``codex_bin``, ``model``).

    Returns:
        A check: binary missing or broken, model left at ``sonnet``, or ok.
    """
    from reflect_jobs.writer.backends import resolve_binary
    from reflect_jobs.writer.result import BackendMissing

    try:
        path = resolve_binary(settings.codex_bin)
    except BackendMissing as exc:
        return _check(
            False, str(exc), "npm i -g @openai/codex, or export REFLECT_CODEX_BIN=/path/to/codex"
        )
    try:
        out = subprocess.run(
            [path, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=20,
            env={**os.environ, CHILD_ENV: "1"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return _check(False, f"{path} --version failed: {exc}", f"check that {path} runs")
    if out.returncode != 0:
        return _check(False, f"{path} --version exits {out.returncode}", "reinstall codex")
    version = (out.stdout or out.stderr).strip().splitlines()[:1]
    bad = models_check(settings, "codex")  # Codex lists no models: judge the names
    if bad is not None:
        bad["detail"] = f"{path} {version[0] if version else ''}: {bad['detail']}"
        return bad
    return _check(True, f"{path} {version[0] if version else ''}; model {settings.model!r}")


PROBES = {"openai": probe_openai, "anthropic": probe_anthropic, "codex": probe_codex}


def probe_backend(settings: Any) -> dict[str, Any] | None:
    """The probe of the configured API writer.

    Args:
        settings: ``config.Settings``.

    Returns:
        Its check, or None when the backend is not an API writer (claude, heuristic).
    """
    probe = PROBES.get(settings.resolved_writer_backend())
    return probe(settings) if probe else None
