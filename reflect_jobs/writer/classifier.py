"""Writer output classifier (SPEC-drain §6.1): raw output -> one of five categories.

It feeds the writer-drift streak: a writer that keeps answering prose, nothing, or broken JSON
is "drifting" and gets poisoned instead of being paid for forever. It is total: whatever a
model or a crashed process printed, it returns a category and never raises.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeGuard

CATEGORIES = ("valid", "prose", "idle", "malformed", "poisoned")
DEFAULT_THRESHOLD = 3

# The input was larger than the model accepts. Retrying cannot help, and since 5.2.4 it is a
# free quarantine rather than a paid poison (SPEC-drain §5.7, §10 B10).
SIZE_MARKERS: tuple[str, ...] = (
    "prompt is too long",
    "context window",
    "maximum context length",
    "context length exceeded",
    "conversation is too long",
)

# Every marker the classifier treats as a dead writer session (size markers included).
POISON_MARKERS: tuple[str, ...] = SIZE_MARKERS + (
    "session exhausted",
    "session limit reached",
    "no longer able to continue",
    "credit balance is too low",
)


def find_marker(text: Any, markers: tuple[str, ...] = POISON_MARKERS) -> str:
    """The first marker (lowercase) contained in ``text``, or ``""``.

    Args:
        text: Any value; a non-string or empty one contains no marker.
        markers: Lowercase markers, checked in order against the lowercased text.

    Returns:
        The first marker found, or ``""``.
    """
    if not isinstance(text, str) or not text:
        return ""
    low = text.lower()
    for marker in markers:
        if marker in low:
            return marker
    return ""


def is_envelope(obj: Any) -> TypeGuard[dict[str, Any]]:
    """A CLI result envelope: ``type == "result"`` or an ``is_error`` / ``result`` key.

    Args:
        obj: A decoded JSON value.

    Returns:
        Whether it is a dict shaped like an envelope.
    """
    return isinstance(obj, dict) and (
        obj.get("type") == "result" or "is_error" in obj or "result" in obj
    )


def classify_output(raw: Any) -> str:
    """Classify one raw writer output exactly as SPEC-drain §6.1 does.

    Note the asymmetry kept from the original: a healthy envelope that merely *mentions* a
    marker (e.g. a learning about context windows) is ``valid``; only an ``is_error`` envelope
    with a marker is ``poisoned``.

    Args:
        raw: The writer's whole raw stdout (any value; a non-string counts as nothing).

    Returns:
        One of ``CATEGORIES``: ``idle`` (nothing printed); for an envelope ``valid``, or
        ``poisoned`` when it is an error envelope with a marker; otherwise ``poisoned`` on
        any marker, ``malformed`` for JSON that is no envelope or text starting with ``{``
        or ``[``, else ``prose``.
    """
    try:
        if not isinstance(raw, str) or not raw.strip():
            return "idle"
        parsed: Any = None
        ok = False
        try:
            parsed = json.loads(raw)
            ok = True
        except (ValueError, RecursionError):
            ok = False
        poisoned_text = bool(find_marker(raw))
        if ok and is_envelope(parsed):
            return "poisoned" if poisoned_text and parsed.get("is_error") else "valid"
        if poisoned_text:
            return "poisoned"
        if ok:
            return "malformed"
        if raw.lstrip()[:1] in ("{", "["):
            return "malformed"
        return "prose"
    except Exception:  # pragma: no cover - totality guard; nothing above should raise
        return "malformed"


@dataclass(frozen=True)
class Streak:
    """Consecutive non-valid writer outputs of one job (SPEC-drain §5.7 ``track``)."""

    consecutive: int = 0
    categories: tuple[str, ...] = ()


def threshold_from(value: Any) -> int:
    """A positive int threshold; anything else (``banana``, ``-1``, ``None``) means 3.

    Args:
        value: A raw setting of any type (``"5"`` and ``5`` both count).

    Returns:
        The threshold, or ``DEFAULT_THRESHOLD`` (3).
    """
    try:
        num = int(str(value).strip())
    except (TypeError, ValueError):
        return DEFAULT_THRESHOLD
    return num if num > 0 else DEFAULT_THRESHOLD


def track(streak: Streak, category: str, threshold: int = DEFAULT_THRESHOLD) -> tuple[Streak, bool]:
    """Advance a drift streak; returns ``(streak, respawn)``.

    ``valid`` resets it; anything else adds one (unknown categories count as ``malformed``).
    Respawn (poison the writer) on ``poisoned`` or when the streak reaches the threshold. On
    respawn the returned streak still shows the run that caused it (for the log line); the
    caller then stores ``Streak()``, like the original's ``_reset`` record. The caller keeps
    one streak per job/transcript.

    Args:
        streak: The job's streak before this output.
        category: This output's category (``classify_output``).
        threshold: Streak length that respawns; read through :func:`threshold_from`.

    Returns:
        ``(streak, respawn)``: the new streak (``Streak()`` after ``valid``) and whether the
        writer must be poisoned.
    """
    if category == "valid":
        return Streak(), False
    if category not in CATEGORIES:
        category = "malformed"
    grown = Streak(streak.consecutive + 1, (*streak.categories, category))
    respawn = category == "poisoned" or grown.consecutive >= threshold_from(threshold)
    return grown, respawn
