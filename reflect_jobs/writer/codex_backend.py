"""The ``codex`` writer: the Codex CLI, ``codex exec --json`` with the prompt on stdin.

The call is tool-free and sandboxed: ``--sandbox read-only`` and the shell tool switched off
(``-c features.shell_tool=false``), run in ``REFLECT_DRAIN_CWD`` (``-C`` and the child's cwd)
with our child marker (``REFLECT_DRAIN_CHILD=1``) in its environment so our own hooks stay
no-ops inside it. Like the Claude CLI it runs under :func:`reflect_jobs.children.run`: its
own process group (a timeout kills the whole group), tied to its worker (a killed worker
takes it along instead of leaving it running and billing) and in the live registry a
stopping consumer kills.

``--json`` prints one JSON event per line: ``thread.started``, ``turn.started``,
``item.started``/``item.updated``/``item.completed`` (the answer is the last completed item
of type ``agent_message``, its ``text``), then ``turn.completed`` with ``usage``
``{input_tokens, cached_input_tokens, output_tokens}`` — or ``turn.failed`` /
``error`` with a message. :func:`result_from_codex` turns that stream into a ``ModelResult``
whose ``raw_stdout`` is a CLI-shaped envelope holding the events.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from reflect_jobs.markers import CHILD_ENV
from reflect_jobs.writer.api_result import (
    classify_http_error,
    error_result,
    rejected_snapshot,
    success_result,
)
from reflect_jobs.writer.backends import run_writer_cli
from reflect_jobs.writer.prices import cost_usd
from reflect_jobs.writer.result import TIMEOUT_EXIT_CODE, ModelResult

_TRY_AGAIN = re.compile(r"try again in\s+((?:\d+(?:\.\d+)?\s*[a-z]+[\s,]*(?:and\s+)?)+)", re.I)
_UNIT = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|sec|second|m|min|minute|h|hr|hour|d|day)s?\b", re.I)
_UNIT_SEC = {"ms": 0.001, "s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60}
_UNIT_SEC.update({"h": 3600, "hr": 3600, "hour": 3600, "d": 86400, "day": 86400})
_RATE_WORDS = ("rate limit", "rate_limit", "429", "usage limit", "too many requests")
_AUTH_WORDS = ("401", "unauthorized", "not logged in", "login", "invalid api key", "403")
_MODEL_WORDS = ("model_not_found", "unknown model", "unsupported model", "does not exist")


def parse_events(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects of a ``--json`` stream; other lines are skipped.

    Args:
        stdout: The CLI's stdout.

    Returns:
        Every line that decodes to a JSON object with a ``type``, in order.
    """
    events = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("type"), str):
            events.append(obj)
    return events


def _usage(event: dict[str, Any] | None) -> dict[str, int]:
    usage = event.get("usage") if isinstance(event, dict) else None
    if not isinstance(usage, dict):
        return {}

    def num(key: str) -> int:
        value = usage.get(key, 0)
        return value if isinstance(value, int) and value > 0 else 0

    cached = num("cached_input_tokens")
    return {
        "input_tokens": max(0, num("input_tokens") - cached),  # input includes the cached part
        "output_tokens": num("output_tokens"),
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
    }


def _error_text(event: dict[str, Any]) -> str:
    err = event.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or "")
    return str(event.get("message") or err or "")


def try_again_sec(message: str) -> float:
    """The wait a Codex rate-limit message names ("... try again in 4 days 5 hours", "in 20s").

    Args:
        message: The ``turn.failed`` / ``error`` message.

    Returns:
        Seconds, or 0.0 when the message names no wait.
    """
    match = _TRY_AGAIN.search(message or "")
    if not match:
        return 0.0
    return float(sum(float(n) * _UNIT_SEC[u.lower()] for n, u in _UNIT.findall(match.group(1))))


def _kind_of(message: str) -> str:
    low = message.lower()
    if any(w in low for w in _RATE_WORDS):
        return "rate_limited"
    if any(w in low for w in _MODEL_WORDS):
        return "unknown_model"
    if any(w in low for w in _AUTH_WORDS):
        return "auth"
    kind = classify_http_error(400, "", message)  # size markers -> too_long
    return kind if kind == "too_long" else "bad_request"


def result_from_codex(
    stdout: str,
    stderr: str,
    *,
    model: str,
    exit_code: int | None,
    timed_out: bool,
    duration_ms: int,
) -> ModelResult:
    """A ``ModelResult`` from a ``codex exec --json`` run. Never raises.

    Args:
        stdout: The JSONL event stream.
        stderr: The CLI's stderr (kept; searched for a reason when no event says one).
        model: The model that was asked for.
        exit_code: The exit code (``TIMEOUT_EXIT_CODE`` after our kill).
        timed_out: Whether our timeout killed it.
        duration_ms: Wall time.

    Returns:
        Success (the last ``agent_message`` text, the ``turn.completed`` usage priced from
        the table) when the turn completed with a message and exit 0; after a timeout, no
        output and exit 124 (the timeout row); otherwise an error result whose kind comes
        from the ``turn.failed``/``error`` message (rate limit, auth, model, size, other).
    """
    events = parse_events(stdout)
    if timed_out:
        return ModelResult(
            backend="codex",
            model=model,
            text="",
            raw_stdout="",
            stderr=(stderr or "")[-2000:],
            exit_code=TIMEOUT_EXIT_CODE,
            timed_out=True,
            is_error=True,
            duration_ms=duration_ms,
        )
    message = ""
    completed = None
    errors: list[str] = []
    for event in events:
        kind = event["type"]
        item = event.get("item")
        if kind == "item.completed" and isinstance(item, dict):
            if item.get("type") in ("agent_message", "assistant_message"):
                message = str(item.get("text") or "")
        elif kind == "turn.completed":
            completed = event
        elif kind in ("turn.failed", "error"):
            errors.append(_error_text(event))
    usage = _usage(completed)
    cost = cost_usd(model, "codex", usage) if usage else 0.0
    if completed is not None and not errors and exit_code == 0:
        return success_result(
            backend="codex",
            model=model,
            text=message,
            usage=usage,
            cost_usd=cost,
            response=events,
            duration_ms=duration_ms,
        )
    reason = "; ".join(e for e in errors if e) or (stderr or "").strip()[-500:]
    reason = reason or f"codex exited {exit_code} without a completed turn"
    kind = _kind_of(reason)
    wait = try_again_sec(reason) if kind == "rate_limited" else 0.0
    result = error_result(
        backend="codex",
        model=model,
        kind=kind,
        message=reason,
        status=None,
        response=events,
        duration_ms=duration_ms,
        retry_after=wait,
        rate_limits=[rejected_snapshot(wait, "codex")] if kind == "rate_limited" else [],
        usage=usage,
        cost_usd=cost,
    )
    result.exit_code = exit_code
    result.stderr = (stderr or "")[-2000:]
    return result


class CodexCliBackend:
    """``codex exec --json`` (``REFLECT_WRITER_BACKEND=codex``).

    Args:
        binary: The ``codex`` executable (``REFLECT_CODEX_BIN``), a name or a path.
        model: ``REFLECT_DRAIN_MODEL``, passed as ``--model``.
        cwd: ``REFLECT_DRAIN_CWD``; must exist at call time.
        timeout_sec: Seconds before the process group is killed.
        guard: How the child is tied to this process (``"pdeathsig"`` or ``"watchdog"``);
            ``None`` picks :func:`reflect_jobs.children.orphan_guard`.
    """

    name = "codex"

    def __init__(
        self, binary: str, model: str, cwd: str, *, timeout_sec: float, guard: str | None = None
    ) -> None:
        """Store the settings; nothing is checked until :meth:`call`."""
        self.guard = guard
        self.binary = binary
        self.model = model
        self.cwd = cwd
        self.timeout_sec = timeout_sec

    def argv(self, binary: str | None = None) -> list[str]:
        """The command line; the prompt goes on stdin (the trailing ``-``).

        Args:
            binary: The resolved executable; ``None`` means ``self.binary``.

        Returns:
            ``codex exec --json --sandbox read-only --skip-git-repo-check -C CWD
            -c features.shell_tool=false --model MODEL -``.
        """
        return [
            binary or self.binary,
            "exec",
            "--json",
            "--sandbox",
            "read-only",
            "--skip-git-repo-check",
            "-C",
            self.cwd,
            "-c",
            "features.shell_tool=false",
            "--model",
            self.model,
            "-",
        ]

    def env(self) -> dict[str, str]:
        """The inherited environment plus ``REFLECT_DRAIN_CHILD=1``.

        Returns:
            A new dict.
        """
        return {**os.environ, CHILD_ENV: "1"}

    def call(self, prompt: str) -> ModelResult:
        """Run ``codex exec`` once with ``prompt`` on stdin.

        Args:
            prompt: The full prompt (lone surrogates are sent as ``?``).

        Returns:
            :func:`result_from_codex` of what the run printed.

        Raises:
            BackendMissing: The binary or the cwd is missing, or it cannot be started.
            ChildCancelled: :func:`reflect_jobs.children.kill_live_children` killed it
                (this process is stopping).
        """
        out = run_writer_cli(self, prompt)
        return result_from_codex(
            out.stdout,
            out.stderr,
            model=self.model,
            exit_code=out.exit_code,
            timed_out=out.timed_out,
            duration_ms=out.duration_ms,
        )
