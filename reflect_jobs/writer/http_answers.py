"""Turning one HTTP exchange of an API writer into a :class:`ModelResult` (openai, anthropic).

Both SDK backends get the same three things back — a body that should be an answer, an error
status with headers, or no response at all — and only differ in how an answer is parsed,
which rate-limit headers they read and which stop reasons mean "finished". This module is
that shared part, so the outcome mapping (``classify_http_error``, ``retry-after``, the
rejected-window snapshot) is written once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, ClassVar

from reflect_jobs.writer.api_result import (
    classify_http_error,
    error_message,
    error_result,
    rejected_snapshot,
    retry_after_sec,
    success_result,
)
from reflect_jobs.writer.prices import cost_usd
from reflect_jobs.writer.result import ModelResult

#: Reads a response body into ``(answer text, stop reason, usage)``, or None when it is not one.
Parser = Callable[[Any], "tuple[str, str, dict[str, Any]] | None"]
#: Reads rate-limit response headers into quota snapshots.
Snapshots = Callable[[Any], list[Any]]


def decode_body(text: str) -> Any:
    """The response body as JSON, or the text itself when it is not JSON.

    Args:
        text: The raw response body.

    Returns:
        The decoded JSON value, else ``text``.
    """
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def elapsed_ms(started: float) -> int:
    """Milliseconds since ``started`` (a ``time.monotonic()`` reading).

    Args:
        started: When the call began.

    Returns:
        Whole milliseconds.
    """
    return int((time.monotonic() - started) * 1000)


def answer_result(
    *,
    backend: str,
    model: str,
    headers: Any,
    text: str,
    started: float,
    parse: Parser,
    snapshots: Snapshots,
    what: str,
    finished: tuple[str, ...],
    stop_prefix: str,
) -> ModelResult:
    """A 200 response: the answer with its usage and cost, or an error when it is not one.

    Args:
        backend: The backend's name (``openai``, ``anthropic``).
        model: The model asked.
        headers: The response headers (rate limits).
        text: The response body.
        started: When the call began (``time.monotonic()``).
        parse: The backend's body parser.
        snapshots: The backend's rate-limit header reader.
        what: What the body should have been, for the error ("a chat completion").
        finished: Stop reasons that mean the answer is complete (subtype ``success``).
        stop_prefix: The subtype prefix for any other stop reason (``finish_``, ``stop_``).

    Returns:
        ``success_result`` for an answer, ``error_result`` (``bad_request``) otherwise.
    """
    body = decode_body(text)
    limits = snapshots(headers)
    parsed = parse(body)
    if parsed is None:
        return error_result(
            backend=backend,
            model=model,
            kind="bad_request",
            message=f"not {what}: {text[:300]}",
            status=200,
            response=body,
            duration_ms=elapsed_ms(started),
            rate_limits=limits,
        )
    answer, stop, usage = parsed
    return success_result(
        backend=backend,
        model=model,
        text=answer,
        usage=usage,
        cost_usd=cost_usd(model, backend, usage),
        response=body,
        duration_ms=elapsed_ms(started),
        rate_limits=limits,
        subtype="success" if stop in finished else f"{stop_prefix}{stop}",
    )


def http_error_result(
    *,
    backend: str,
    model: str,
    status: int | None,
    headers: Any,
    text: str,
    started: float,
    snapshots: Snapshots,
) -> ModelResult:
    """An error status (or no response: ``status`` None) mapped onto the outcome kinds.

    Args:
        backend: The backend's name.
        model: The model asked.
        status: The HTTP status, or None when the connection failed.
        headers: The response headers (``retry-after``, rate limits).
        text: The response body, or the connection error's text.
        started: When the call began (``time.monotonic()``).
        snapshots: The backend's rate-limit header reader.

    Returns:
        ``error_result`` with the kind ``classify_http_error`` gives; a rate limit also
        records a rejected-window snapshot so the quota gate holds until ``retry-after``.
    """
    body = decode_body(text)
    etype, message = error_message(body)
    kind = classify_http_error(status, etype, message or (text if status is None else ""))
    wait = retry_after_sec(headers)
    limits = snapshots(headers)
    if kind == "rate_limited":
        limits.append(rejected_snapshot(wait, backend))
    return error_result(
        backend=backend,
        model=model,
        kind=kind,
        message=message or text[:500],
        status=status,
        response=body,
        duration_ms=elapsed_ms(started),
        retry_after=wait,
        rate_limits=limits,
    )


class HttpAnswers:
    """The two ways an SDK backend's exchange ends, written once for every HTTP backend.

    A backend sets the class attributes (its parser and header reader as ``staticmethod``,
    what its body is, which stop reasons mean finished) and has ``name`` and ``model``;
    :meth:`_success` and :meth:`_error` are then :func:`answer_result` and
    :func:`http_error_result` with those filled in.
    """

    name: ClassVar[str]
    model: str
    _parse: Parser
    _snapshots: Snapshots
    _what: ClassVar[str]
    _finished: ClassVar[tuple[str, ...]]
    _stop_prefix: ClassVar[str]

    def _success(self, headers: Any, text: str, started: float) -> ModelResult:
        """A 200 response as :func:`answer_result` makes it (see there)."""
        return answer_result(
            backend=self.name,
            model=self.model,
            headers=headers,
            text=text,
            started=started,
            parse=self._parse,
            snapshots=self._snapshots,
            what=self._what,
            finished=self._finished,
            stop_prefix=self._stop_prefix,
        )

    def _error(self, status: int | None, headers: Any, text: str, started: float) -> ModelResult:
        """An error status or no response as :func:`http_error_result` makes it."""
        return http_error_result(
            backend=self.name,
            model=self.model,
            status=status,
            headers=headers,
            text=text,
            started=started,
            snapshots=self._snapshots,
        )
