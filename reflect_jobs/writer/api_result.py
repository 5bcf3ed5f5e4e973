"""HTTP/SDK answers as ``ModelResult``: one shape for the openai, anthropic and codex writers.

The Claude CLI prints a result envelope; an HTTP API answers with a status, headers and a
body. So that the classifier, the outcome table, the ledger's record-before-parse path and
the quota ingest all work unchanged, every API answer is turned into the same CLI-shaped
envelope (``type: result``, ``is_error``, ``num_turns``, ``result``, ``usage``,
``total_cost_usd``) stored as ``raw_stdout``, with the provider's own body kept under
``response`` and the quota telemetry under ``rate_limit_info`` (where ``extract_rate_limits``
finds it again when the answer is recorded).

What went wrong is decided HERE, from the status and the error body, as one of
:data:`ERROR_KINDS`; ``outcomes.classify_attempt`` maps the kind onto the existing outcomes
(SPEC "more writers" item 4). Nothing in this module raises.
"""

from __future__ import annotations

import json
import math
import time
from email.utils import parsedate_to_datetime
from typing import Any

from reflect_jobs.writer.classifier import SIZE_MARKERS, find_marker
from reflect_jobs.writer.result import TIMEOUT_EXIT_CODE, ModelResult, coerce_usage

#: error kind -> what it means (the outcome table keys on the name).
ERROR_KINDS: dict[str, str] = {
    "rate_limited": "HTTP 429/529 or overloaded: defer at $0 until retry-after",
    "too_long": "the prompt is larger than the model accepts: free quarantine",
    "auth": "the key or the account was refused (401/403, no credit): halt, an install fault",
    "unknown_model": "the model does not exist on that endpoint (404): halt",
    "server": "5xx: a paid failure, retried with backoff",
    "timeout": "our HTTP timeout fired: a paid failure, retried with backoff",
    "connection": "no HTTP answer at all (refused, DNS, reset): retry with backoff",
    "bad_request": "any other 4xx: a paid failure, retried",
}

#: Markers beyond the classifier's SIZE_MARKERS that servers use for an oversized prompt.
EXTRA_SIZE_MARKERS: tuple[str, ...] = (
    "too many tokens",
    "prompt too long",
    "input is too long",
    "request too large",
    "request_too_large",
    "exceeds the available context size",
    "context_length_exceeded",
    "exceed context window",
    "exceeds the context window",
)
_OVERLOAD = ("overloaded", "overloaded_error", "server is busy", "at capacity")
_AUTH_TYPES = ("authentication_error", "permission_error", "invalid_api_key")
#: The account cannot pay: waiting does not help, a person must act (halt like a bad key).
_BILLING = ("insufficient_quota", "credit balance", "billing_error", "billing details")
_MODEL_WORDS = ("model", "not_found_error", "model_not_found")
#: A 429 / 529 without a retry-after waits this long (seconds).
DEFAULT_RETRY_AFTER_SEC = 60.0


def error_message(body: Any) -> tuple[str, str]:
    """The error type and message of an OpenAI- or Anthropic-style error body.

    Args:
        body: The decoded body (``{"error": {"type", "message", "code"}}`` for OpenAI,
            ``{"type": "error", "error": {"type", "message"}}`` for Anthropic) or raw text.

    Returns:
        ``(type, message)``; both ``""`` when the body says nothing usable, the text itself
        as message when it is not JSON.
    """
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except (ValueError, RecursionError):
            return "", body.strip()[:2000]
    if not isinstance(body, dict):
        return "", ""
    err = body.get("error", body)
    if isinstance(err, str):
        return "", err[:2000]
    if not isinstance(err, dict):
        return "", ""
    kind = err.get("type") or err.get("code") or ""
    message = err.get("message") or err.get("detail") or ""
    return str(kind)[:200], str(message)[:2000]


def classify_http_error(status: int | None, error_type: str, message: str) -> str:
    """Map one failed HTTP call onto an :data:`ERROR_KINDS` name.

    Args:
        status: The HTTP status (``None`` when no response arrived at all).
        error_type: The body's error type/code (e.g. ``overloaded_error``).
        message: The body's error message.

    Returns:
        The kind: ``connection`` without a status; ``auth`` for a 4xx saying the account
        cannot pay (OpenAI's ``insufficient_quota`` 429, Anthropic's "credit balance is too
        low"): waiting cannot fix that; ``rate_limited`` for 429, 529 or an overload; ``too_long`` for a 4xx naming an oversized prompt; ``auth`` for 401/403;
        ``unknown_model`` for 404; ``server`` for 408 and 5xx; else ``bad_request``.
    """
    text = f"{error_type} {message}".lower()
    if status is None:
        return "connection"
    if 400 <= status < 500 and any(word in text for word in _BILLING):
        return "auth"
    if status in (429, 529) or any(word in text for word in _OVERLOAD):
        return "rate_limited"
    if 400 <= status < 500 and (
        status == 413 or find_marker(text, SIZE_MARKERS) or find_marker(text, EXTRA_SIZE_MARKERS)
    ):
        return "too_long"
    if status in (401, 403) or any(t in text for t in _AUTH_TYPES):
        return "auth"
    if status == 404 or (status == 400 and "model" in text and "not" in text and "found" in text):
        return "unknown_model"
    if status == 408 or status >= 500:
        return "server"
    return "bad_request"


def retry_after_sec(headers: Any, now: float | None = None) -> float:
    """Seconds the provider asked us to wait (``retry-after-ms``, ``retry-after``).

    Args:
        headers: A mapping of response headers (any case; a non-mapping counts as none).
        now: Unix time for an HTTP-date value; ``None`` means ``time.time()``.

    Returns:
        The delay in seconds (non-negative, finite), or 0.0 when there is none.
    """
    if headers is None or not hasattr(headers, "get"):
        return 0.0
    lower = {str(k).lower(): v for k, v in dict(headers).items()}
    raw_ms = lower.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000
            if math.isfinite(value) and value >= 0:
                return value
        except (TypeError, ValueError):
            pass
    raw = lower.get("retry-after")
    if raw is None:
        return 0.0
    try:
        value = float(raw)
        return value if math.isfinite(value) and value >= 0 else 0.0
    except (TypeError, ValueError):
        pass
    try:
        when = parsedate_to_datetime(str(raw)).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return 0.0
    return max(0.0, when - (time.time() if now is None else now))


def rejected_snapshot(retry_after: float, source: str, now: float | None = None) -> dict[str, Any]:
    """The quota snapshot a 429/529 leaves: the gate stays closed until ``retry-after``.

    Args:
        retry_after: Seconds the provider asked for (0 means :data:`DEFAULT_RETRY_AFTER_SEC`).
        source: Who said so (``openai``, ``anthropic``, ``codex``), for the status view.
        now: Unix time; ``None`` means ``time.time()``.

    Returns:
        ``{"rateLimitType": "api_rejected", "status": "rejected", "resetsAt": <unix s>,
        "_source": source}``.
    """
    wait = retry_after if retry_after > 0 else DEFAULT_RETRY_AFTER_SEC
    return {
        "rateLimitType": "api_rejected",
        "status": "rejected",
        "resetsAt": (time.time() if now is None else now) + wait,
        "_source": source,
    }


def _envelope(**fields: Any) -> str:
    return json.dumps({"type": "result", **fields}, ensure_ascii=False, default=str)


def success_result(
    *,
    backend: str,
    model: str,
    text: str,
    usage: dict[str, Any],
    cost_usd: float,
    response: Any,
    duration_ms: int,
    rate_limits: list[dict[str, Any]] | None = None,
    subtype: str = "success",
) -> ModelResult:
    """A 200 answer: the model's text as ``result``, one turn.

    Args:
        backend: The backend's name.
        model: The model that was asked for.
        text: The assistant message (the actions JSON, if the model behaved).
        usage: Token counts in the four ``USAGE_KEYS`` buckets.
        cost_usd: The call's cost from the price table (0 for a local model).
        response: The provider's decoded body (or event list), kept in the envelope.
        duration_ms: Wall time of the call.
        rate_limits: Quota snapshots read from the response headers.
        subtype: ``success``, or e.g. ``error_max_tokens`` when the answer was cut off.

    Returns:
        A ``ModelResult`` with ``envelope_ok`` True, ``is_error`` False, exit code 0.
    """
    usage4 = coerce_usage(usage)
    limits = list(rate_limits or [])
    raw = _envelope(
        subtype=subtype,
        is_error=False,
        num_turns=1,
        result=text,
        usage=usage4,
        total_cost_usd=cost_usd,
        backend=backend,
        response=response,
        rate_limit_info=limits,
    )
    return ModelResult(
        backend=backend,
        model=model,
        text=text,
        raw_stdout=raw,
        stderr="",
        exit_code=0,
        timed_out=False,
        num_turns=1,
        is_error=False,
        subtype=subtype,
        usage=usage4,
        cost_usd=cost_usd,
        rate_limit_info=limits,
        envelope_ok=True,
        duration_ms=max(0, int(duration_ms)),
    )


def error_result(
    *,
    backend: str,
    model: str,
    kind: str,
    message: str,
    status: int | None,
    response: Any,
    duration_ms: int,
    retry_after: float = 0.0,
    rate_limits: list[dict[str, Any]] | None = None,
    usage: dict[str, Any] | None = None,
    cost_usd: float = 0.0,
) -> ModelResult:
    """A failed call (HTTP error, no connection, a failed Codex turn) as an error envelope.

    Args:
        backend: The backend's name.
        model: The model that was asked for.
        kind: One of :data:`ERROR_KINDS`.
        message: The provider's error message (becomes ``text``, so size markers in it
            are seen by the classifier too).
        status: The HTTP status, or ``None`` (no answer, or a CLI).
        response: The provider's decoded error body, kept in the envelope.
        duration_ms: Wall time of the call.
        retry_after: Seconds from ``retry-after`` (rate limits).
        rate_limits: Quota snapshots (headers, plus the rejection itself for a 429/529).
        usage: Tokens a failed turn still reported (Codex), else none.
        cost_usd: What a failed turn still cost, else 0.

    Returns:
        A ``ModelResult`` with ``is_error`` True, ``error_kind`` set, one turn, and exit
        code 0 for an HTTP answer, 1 without one.
    """
    limits = list(rate_limits or [])
    usage4 = coerce_usage(usage)
    text = message.strip() or f"{backend} {kind} (HTTP {status})"
    raw = _envelope(
        subtype=f"api_error_{kind}",
        is_error=True,
        num_turns=1,
        result=text,
        usage=usage4,
        total_cost_usd=cost_usd,
        backend=backend,
        http_status=status,
        error_kind=kind,
        retry_after_sec=retry_after,
        response=response,
        rate_limit_info=limits,
    )
    return ModelResult(
        backend=backend,
        model=model,
        text=text,
        raw_stdout=raw,
        stderr="",
        exit_code=0 if status is not None else 1,
        timed_out=False,
        num_turns=1,
        is_error=True,
        subtype=f"api_error_{kind}",
        usage=usage4,
        cost_usd=cost_usd,
        rate_limit_info=limits,
        envelope_ok=True,
        duration_ms=max(0, int(duration_ms)),
        error_kind=kind,
        retry_after_sec=max(0.0, float(retry_after or 0.0)),
    )


def timeout_result(*, backend: str, model: str, duration_ms: int, detail: str) -> ModelResult:
    """Our HTTP timeout fired before any answer: shaped like a killed CLI (exit 124).

    Args:
        backend: The backend's name.
        model: The model that was asked for.
        duration_ms: Wall time until the timeout.
        detail: What the SDK said, kept as stderr.

    Returns:
        A ``ModelResult`` with no stdout, ``timed_out`` True, exit code 124 and error kind
        ``timeout``: the outcome table retries it with backoff (a server that is slow now is
        usually not slow forever), up to ``max_retries``; ``job.timeouts`` counts it.
    """
    return ModelResult(
        backend=backend,
        model=model,
        text="",
        raw_stdout="",
        stderr=detail[:2000],
        exit_code=TIMEOUT_EXIT_CODE,
        timed_out=True,
        is_error=True,
        duration_ms=max(0, int(duration_ms)),
        error_kind="timeout",
    )
