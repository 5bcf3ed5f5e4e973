"""``ModelResult``: one model call, every backend, one shape.

The ledger stores ``to_json()`` of this object BEFORE anything parses the actions (ARCHITECTURE §5):
a crash after a paid call must never pay twice nor lose telemetry (the original lost both on
any exception, SPEC-drain §10 B11). So construction from CLI output is total: whatever the
process printed, we get a ``ModelResult`` with coerced numbers and the raw text kept.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from reflect_jobs.redaction import redact_secrets, redact_structured, redact_value
from reflect_jobs.writer.classifier import is_envelope
from reflect_jobs.writer.quota import extract_rate_limits

#: The exit code of a call our timeout killed (what GNU ``timeout`` reports); the outcome
#: table keys on it. Here, not in ``backends``, so the API writers and the outcome table
#: need not import the subprocess backends.
TIMEOUT_EXIT_CODE = 124

USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


class BackendMissing(Exception):
    """The backend binary (or its working directory) is missing or not executable.

    This is an install fault, not a model failure: the job is HALTED, nothing is charged and it
    keeps its place until ``doctor`` passes.
    """


def coerce_int(value: Any) -> int:
    """``null``/``"0"``/``0.0``/garbage -> 0; numbers and numeric strings truncate to int.

    SPEC-drain §9.2 #9: the zero-turn guard must fire for every spelling of zero.

    Args:
        value: A JSON value from the envelope.

    Returns:
        An int: a bool as 0/1, an int as is, a finite float or numeric string truncated
        toward zero, anything else (NaN, infinity, garbage) 0.
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else 0
    if isinstance(value, str):
        try:
            num = float(value.strip())
        except ValueError:
            return 0
        return int(num) if math.isfinite(num) else 0
    return 0


def coerce_float(value: Any) -> float:
    """Like ``coerce_int`` for money: garbage, NaN and infinities become 0.0.

    Args:
        value: A JSON value from the envelope (a bool counts as garbage).

    Returns:
        The number as a float, or 0.0.
    """
    if isinstance(value, bool):
        return 0.0
    if isinstance(value, int | float):
        num = float(value)
    elif isinstance(value, str):
        try:
            num = float(value.strip())
        except ValueError:
            return 0.0
    else:
        return 0.0
    return num if math.isfinite(num) else 0.0


def coerce_usage(usage: Any) -> dict[str, int]:
    """Always the four token buckets, each a non-negative int.

    Args:
        usage: The envelope's ``usage`` (a non-dict counts as empty).

    Returns:
        Exactly the ``USAGE_KEYS``, each coerced with :func:`coerce_int` and floored at 0;
        other keys are dropped.
    """
    src = usage if isinstance(usage, dict) else {}
    return {key: max(0, coerce_int(src.get(key))) for key in USAGE_KEYS}


@dataclass
class ModelResult:
    """What one model call produced, plus the telemetry the gates and budgets need."""

    backend: str
    model: str
    text: str
    raw_stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    num_turns: int = 0
    is_error: bool = False
    subtype: str = ""
    terminal_reason: str = ""
    usage: dict[str, int] = field(default_factory=lambda: coerce_usage(None))
    cost_usd: float = 0.0
    rate_limit_info: list[dict[str, Any]] = field(default_factory=list)
    envelope_ok: bool = False
    duration_ms: int = 0
    # Set by the API backends (openai, anthropic, codex) from the HTTP status / error event,
    # one of ``writer.api_result.ERROR_KINDS`` ("" = none); the outcome table maps it.
    error_kind: str = ""
    retry_after_sec: float = 0.0  # the provider's ``retry-after`` for a rate-limited call

    @property
    def tokens(self) -> int:
        """Sum of the four usage buckets (what the token budget is measured in)."""
        return sum(coerce_int(self.usage.get(key)) for key in USAGE_KEYS)

    def redacted(self) -> ModelResult:
        """This result with every string the model or the CLI produced secret-redacted.

        The model has read a transcript and may echo a credential from it (or invent one
        that is real somewhere); its answer goes into the ledger, the notes, their file
        names and later prompts. So the write stage redacts the answer the moment it
        returns, before it is recorded or parsed. JSON (the answer, the CLI envelope, JSON
        lines) stays valid JSON (:func:`reflect_jobs.redaction.redact_structured`), so a
        recorded answer still parses when it is reused after a crash.

        Returns:
            A new result (``self`` when nothing needed redacting); numbers, flags and usage
            are unchanged.
        """
        text, n_text = redact_structured(self.text)
        stdout, n_out = redact_structured(self.raw_stdout)
        stderr, n_err = redact_structured(self.stderr)
        subtype, n_sub = redact_secrets(self.subtype)
        reason, n_reason = redact_secrets(self.terminal_reason)
        limits, n_limits = redact_value(self.rate_limit_info)
        if not (n_text or n_out or n_err or n_sub or n_reason or n_limits):
            return self
        return dataclasses.replace(
            self,
            text=text,
            raw_stdout=stdout,
            stderr=stderr,
            subtype=subtype,
            terminal_reason=reason,
            rate_limit_info=limits,
        )

    def to_json(self) -> str:
        """Lossless JSON; ``from_json(to_json())`` equals the original.

        Returns:
            One JSON object, keys sorted, non-ASCII kept as is.
        """
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, data: str | bytes) -> ModelResult:
        """Inverse of ``to_json``; unknown keys (a newer writer) are ignored.

        Args:
            data: JSON from :meth:`to_json`.

        Returns:
            The result; fields missing from ``data`` take their defaults.

        Raises:
            ValueError: ``data`` is not JSON, or not a JSON object.
            TypeError: A field without a default (``backend``, ``text``, ...) is missing.
        """
        obj = json.loads(data)
        if not isinstance(obj, dict):
            raise ValueError("ModelResult JSON must be an object")
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in obj.items() if k in names})


def find_envelope(stdout: str) -> dict[str, Any] | None:
    """The result envelope in ``stdout``: one JSON object, or the last ``type=result`` line.

    Args:
        stdout: The CLI's stdout (a non-string counts as empty).

    Returns:
        The decoded stdout when it is one JSON envelope; when it is not a single JSON
        document, the last line that is a ``type: "result"`` object (stream-json); else
        ``None``, also for a single JSON document that is not an envelope.
    """
    text = stdout.strip() if isinstance(stdout, str) else ""
    if not text:
        return None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        obj = None
    if is_envelope(obj):
        return obj
    if obj is not None:
        return None
    last: dict[str, Any] | None = None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            item = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(item, dict) and item.get("type") == "result":
            last = item
    return last


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def result_from_cli(
    stdout: str,
    stderr: str,
    *,
    backend: str,
    model: str,
    exit_code: int | None,
    timed_out: bool = False,
    duration_ms: int = 0,
) -> ModelResult:
    """Build a ``ModelResult`` from what a CLI printed. Never raises.

    Without an envelope ``is_error`` defaults to True (SPEC-drain §5.6 e) and ``text`` is the
    raw stdout, so the classifier and the outcome table still see what came back.

    Args:
        stdout: The CLI's stdout (a non-string counts as empty).
        stderr: The CLI's stderr (a non-string counts as empty).
        backend: The backend's name, stored with the result.
        model: The model that was asked for.
        exit_code: The process's exit code; ``TIMEOUT_EXIT_CODE`` after our timeout kill,
            ``None`` when unknown.
        timed_out: Whether our timeout killed the call.
        duration_ms: Wall time of the call in milliseconds (negative or garbage -> 0).

    Returns:
        The ``ModelResult``: the envelope's ``result`` as ``text``, its ``num_turns``,
        ``is_error``, ``subtype``, ``terminal_reason``, ``usage`` and ``total_cost_usd``
        (as ``cost_usd``) coerced, the rate-limit telemetry extracted, and the raw stdout
        and stderr kept.
    """
    stdout = stdout if isinstance(stdout, str) else ""
    stderr = stderr if isinstance(stderr, str) else ""
    env = find_envelope(stdout)
    common: dict[str, Any] = {
        "backend": backend,
        "model": model,
        "raw_stdout": stdout,
        "stderr": stderr,
        "exit_code": exit_code,
        "timed_out": bool(timed_out),
        "rate_limit_info": extract_rate_limits(stdout, stderr),
        "duration_ms": max(0, coerce_int(duration_ms)),
    }
    if env is None:
        return ModelResult(text=stdout, is_error=True, envelope_ok=False, **common)
    return ModelResult(
        text=_as_text(env.get("result")),
        num_turns=coerce_int(env.get("num_turns")),
        is_error=bool(env.get("is_error", False)),
        subtype=_as_text(env.get("subtype")),
        terminal_reason=_as_text(env.get("terminal_reason")),
        usage=coerce_usage(env.get("usage")),
        cost_usd=coerce_float(env.get("total_cost_usd")),
        envelope_ok=True,
        **common,
    )
