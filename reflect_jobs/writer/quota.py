"""Rate-limit telemetry ingest and the quota gate (SPEC-drain §5.5), as pure functions.

The original kept this in ``quota_store.py`` together with its state file. Here the parsing
(``extract_rate_limits``) and the decision (``quota_gate``) are pure so that the ledger can
persist snapshots transactionally and several workers can share one view; the caller stamps
``observed_at`` and stores one snapshot per bucket (last write wins).

The gate never calls an API: it only reads what earlier model answers reported. With no
telemetry inside the TTL it fails OPEN, exactly like the original (a stale "rejected" must not
block the queue forever).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeGuard

from reflect_jobs.gates import Defer, FreeGate, Go

# Keys under which the CLI / SDK nest rate-limit info.
RATE_LIMIT_KEYS = ("rate_limit_info", "rateLimitInfo", "rate_limit")

# snake/camel aliases -> the one spelling every consumer reads.
ALIASES: dict[str, str] = {
    "status": "status",
    "resetsAt": "resetsAt",
    "resets_at": "resetsAt",
    "rateLimitType": "rateLimitType",
    "rate_limit_type": "rateLimitType",
    "utilization": "utilization",
    "overageStatus": "overageStatus",
    "overage_status": "overageStatus",
    "overageResetsAt": "overageResetsAt",
    "overage_resets_at": "overageResetsAt",
    "isUsingOverage": "isUsingOverage",
    "is_using_overage": "isUsingOverage",
    "surpassedThreshold": "surpassedThreshold",
    "surpassed_threshold": "surpassedThreshold",
}

MAX_DEPTH = 6

# Checked in this order; the first window that matches closes the gate.
WINDOW_ORDER = (
    "five_hour",
    "seven_day_opus",
    "seven_day_sonnet",
    "seven_day",
    "overage",
    "default",
)
WINDOW_LIMITS: dict[str, float] = {
    "five_hour": 0.95,
    "seven_day_opus": 0.93,
    "seven_day_sonnet": 0.92,
    "seven_day": 0.93,
    "overage": 0.95,
    "default": 0.95,
}
DEFAULT_TTL_SEC = 3600
# API rate-limit windows (the anthropic/openai writers): read from response headers or a
# 429/529. They reset within minutes, so a snapshot only counts until its ``resetsAt``, and
# they apply with API-key auth too (where the subscription windows above do not).
API_WINDOWS = (
    "api_rejected",
    "api_requests",
    "api_tokens",
    "api_input_tokens",
    "api_output_tokens",
)
API_UTIL_LIMIT = 0.95

# stderr fallback (only used when the envelope carried no telemetry at all).
STDERR_MARKERS = re.compile(
    r"\b429\b|\b529\b|rate[ _-]?limit|overloaded|quota exceeded", re.IGNORECASE
)


def _looks_like_info(d: dict[str, Any]) -> bool:
    """A dict is telemetry by itself if it names a window, a threshold, or util+status."""
    return (
        "rateLimitType" in d
        or "rate_limit_type" in d
        or "surpassedThreshold" in d
        or "surpassed_threshold" in d
        or ("utilization" in d and "status" in d)
    )


def normalise(info: dict[str, Any]) -> dict[str, Any]:
    """Rename aliases to camelCase; unknown keys pass through so nothing is lost.

    Args:
        info: One telemetry dict as the CLI reported it.

    Returns:
        A new dict with the ``ALIASES`` keys renamed (when both spellings occur, the later
        one wins); non-string keys are dropped.
    """
    out: dict[str, Any] = {}
    for key, value in info.items():
        if not isinstance(key, str):
            continue
        out[ALIASES.get(key, key)] = value
    return out


def _walk(node: Any, depth: int, found: list[dict[str, Any]], seen: set[int]) -> None:
    if depth > MAX_DEPTH:
        return
    if isinstance(node, dict):
        for key in RATE_LIMIT_KEYS:
            sub = node.get(key)
            if (
                isinstance(sub, dict)
                and id(sub) not in seen
                and (_looks_like_info(sub) or "status" in sub)
            ):
                seen.add(id(sub))
                found.append(normalise(sub))
        if id(node) not in seen and _looks_like_info(node):
            seen.add(id(node))
            found.append(normalise(node))
        children = list(node.values())
    elif isinstance(node, list):
        children = node
    else:
        return
    for child in children:
        if isinstance(child, dict | list):
            _walk(child, depth + 1, found, seen)


def _json_docs(stdout: str) -> list[Any]:
    """One JSON document, or (stream-json) one per line; unparseable lines are ignored."""
    text = stdout.strip()
    if not text:
        return []
    try:
        return [json.loads(text)]
    except (ValueError, RecursionError):
        pass
    docs: list[Any] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] not in "{[":
            continue
        try:
            docs.append(json.loads(line))
        except (ValueError, RecursionError):
            continue
    return docs


def extract_rate_limits(stdout: str, stderr: str) -> list[dict[str, Any]]:
    """Every telemetry dict in a model answer, normalised (SPEC-drain §5.5 ``ingest``).

    The stderr scan is a fallback only: a provider 429/529 with no envelope is the one case
    where stderr is the sole evidence. It is deliberately NOT consulted when the envelope
    already reported telemetry, because stderr chatter that merely mentions "rate limit" would
    otherwise close the gate for a whole TTL (SPEC-drain §10 B20).

    Args:
        stdout: The CLI's stdout: one JSON document or JSON lines (stream-json); lines that
            are not JSON are ignored, a non-string counts as empty.
        stderr: The CLI's stderr, scanned only when stdout held no telemetry.

    Returns:
        The normalised telemetry dicts in document order (searched ``MAX_DEPTH`` levels
        deep), without ``observed_at`` (the caller stamps it); or, for a 429/529/rate-limit
        stderr, one ``{"status": "rejected", "rateLimitType": None, "_source": "stderr",
        "_marker": ...}``; else ``[]``.
    """
    found: list[dict[str, Any]] = []
    seen: set[int] = set()
    for doc in _json_docs(stdout if isinstance(stdout, str) else ""):
        _walk(doc, 0, found, seen)
    if found:
        return found
    if isinstance(stderr, str) and stderr:
        match = STDERR_MARKERS.search(stderr)
        if match:
            return [
                {
                    "status": "rejected",
                    "rateLimitType": None,
                    "_source": "stderr",
                    "_marker": match.group(0),
                }
            ]
    return []


def bucket_of(snapshot: Any) -> str:
    """Storage bucket of a snapshot: its window name, else ``default``.

    Args:
        snapshot: A telemetry dict (any other value has no window).

    Returns:
        Its stripped ``rateLimitType`` (e.g. ``five_hour``), or ``"default"``.
    """
    if isinstance(snapshot, dict):
        kind = snapshot.get("rateLimitType", snapshot.get("rate_limit_type"))
        if isinstance(kind, str) and kind.strip():
            return kind.strip()
    return "default"


@dataclass
class QuotaDecision:
    """``open`` False means: do not call the model; defer (free) until telemetry allows."""

    open: bool
    reason: str
    window: str
    until: float | None = None  # unix time the window resets, when the provider said so


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _fresh(snapshot: Any, now: float, ttl: int) -> TypeGuard[dict[str, Any]]:
    if not isinstance(snapshot, dict):
        return False
    observed = _number(snapshot.get("observed_at"))
    return observed is not None and now - observed <= ttl


def quota_gate(
    snapshots: dict[str, dict[str, Any]],
    *,
    now: float,
    ttl_sec: int = DEFAULT_TTL_SEC,
    util_threshold: float | None = None,
    api_key_auth: bool = False,
) -> QuotaDecision:
    """SPEC-drain §5.5 ``check``: same window order, same three rules, same thresholds.

    Snapshots without ``observed_at`` or older than the TTL are ignored (fail open). API-key
    auth has no subscription windows, so only the ``API_WINDOWS`` apply to it; those are
    checked first and only until their ``resetsAt``.

    Args:
        snapshots: Bucket name -> latest snapshot, with ``observed_at`` in Unix seconds; a
            non-dict counts as no snapshots.
        now: Unix time in seconds.
        ttl_sec: Age in seconds after which a snapshot is ignored; non-positive or
            non-numeric means ``DEFAULT_TTL_SEC`` (3600).
        util_threshold: One utilization limit for every window instead of
            ``WINDOW_LIMITS``; ignored unless a number in (0, 1].
        api_key_auth: Whether the CLI authenticates with an API key.

    Returns:
        Closed at the first of the ``API_WINDOWS`` that is fresh, not yet reset and rejected
        (or at/above ``API_UTIL_LIMIT``), with ``until`` its ``resetsAt``; else closed
        (``open=False``, with the reason and the window) at the first window in
        ``WINDOW_ORDER`` whose fresh snapshot is ``rejected`` (for ``overage`` also its
        ``overageStatus``), has ``surpassedThreshold`` without overage in use, or has a
        utilization at or above the limit; otherwise open.
    """
    ttl_num = _number(ttl_sec)
    ttl = int(ttl_num) if ttl_num is not None and ttl_num > 0 else DEFAULT_TTL_SEC
    override = _number(util_threshold)
    if override is not None and not 0 < override <= 1:
        override = None
    if not isinstance(snapshots, dict):
        snapshots = {}
    api = _api_gate(snapshots, now, ttl, override)
    if api is not None:
        return api
    if api_key_auth:
        return QuotaDecision(True, "api key auth: quota windows do not apply", "")
    for window in WINDOW_ORDER:
        snap = snapshots.get(window)
        if not _fresh(snap, now, ttl):
            continue
        status = snap.get("status")
        if status == "rejected" or (
            window == "overage" and snap.get("overageStatus") == "rejected"
        ):
            return QuotaDecision(False, f"quota:{window} rejected by provider", window)
        if snap.get("surpassedThreshold") and not snap.get("isUsingOverage"):
            return QuotaDecision(
                False, f"quota:{window} surpassedThreshold without overage", window
            )
        util = _number(snap.get("utilization"))
        limit = override if override is not None else WINDOW_LIMITS[window]
        if util is not None and util >= limit:
            return QuotaDecision(
                False, f"quota:{window} utilization {util * 100:.1f}% >= {limit * 100:g}%", window
            )
    return QuotaDecision(True, "", "")


def _resets_at(snap: dict[str, Any]) -> float | None:
    value = snap.get("resetsAt")
    num = _number(value)
    if num is not None:
        return num / 1000 if num > 1e12 else num  # milliseconds from some providers
    return None


def _api_gate(
    snapshots: dict[str, Any], now: float, ttl: int, override: float | None
) -> QuotaDecision | None:
    """The API windows: closed until ``resetsAt`` when rejected or nearly used up."""
    for window in API_WINDOWS:
        snap = snapshots.get(window)
        if not _fresh(snap, now, ttl):
            continue
        until = _resets_at(snap)
        if until is None or until <= now:
            continue  # an API window without a reset time, or already reset: not binding
        limit = override if override is not None else API_UTIL_LIMIT
        util = _number(snap.get("utilization"))
        if snap.get("status") == "rejected":
            return QuotaDecision(False, f"quota:{window} rejected by provider", window, until)
        if util is not None and util >= limit:
            return QuotaDecision(
                False,
                f"quota:{window} utilization {util * 100:.1f}% >= {limit * 100:g}%",
                window,
                until,
            )
    return None


#: The longest a closed quota gate defers work when the provider gave no reset time.
MAX_DEFER_SEC = 900


class QuotaGate(FreeGate):
    """The quota gate (:func:`quota_gate`) as a gate (:mod:`reflect_jobs.gates`); takes nothing.

    Args:
        snapshots: Reads the latest telemetry (bucket → snapshot) when the gate is asked —
            after the write slot is held, so every answer recorded before is in it.
        enabled: ``REFLECT_QUOTA_GATE``; off, the gate always passes (and reads nothing).
        ttl_sec: ``REFLECT_QUOTA_TTL_SEC``.
        util_threshold: ``REFLECT_QUOTA_UTIL_THRESHOLD``.
        api_key_auth: Whether the writer authenticates with an API key.
    """

    name = "quota"

    def __init__(
        self,
        snapshots: Callable[[], dict[str, dict[str, Any]]],
        *,
        enabled: bool = True,
        ttl_sec: int = DEFAULT_TTL_SEC,
        util_threshold: float | None = None,
        api_key_auth: bool = False,
    ) -> None:
        """Remember how to read the telemetry and the gate's settings."""
        self.snapshots = snapshots
        self.enabled = enabled
        self.ttl_sec = ttl_sec
        self.util_threshold = util_threshold
        self.api_key_auth = api_key_auth

    @classmethod
    def from_settings(
        cls, settings: Any, snapshots: Callable[[], dict[str, dict[str, Any]]]
    ) -> QuotaGate:
        """The gate as a ``config.Settings`` configures it.

        Args:
            settings: Supplies ``quota_gate``, ``quota_ttl_sec``, ``quota_util_threshold``
                and ``api_key_auth``.
            snapshots: Reads the latest telemetry.

        Returns:
            The gate.
        """
        return cls(
            snapshots,
            enabled=settings.quota_gate,
            ttl_sec=settings.quota_ttl_sec,
            util_threshold=settings.quota_util_threshold,
            api_key_auth=settings.api_key_auth,
        )

    def acquire(self) -> Go | Defer:
        """Decide on the latest telemetry.

        Returns:
            ``Go``, or ``Defer`` until the window's reset when the provider said when, else
            for ``min(ttl_sec, 900)`` seconds; reported as ``drain_quota_deferred``.
        """
        if not self.enabled:
            return Go(self.name)
        now = time.time()
        decision = quota_gate(
            self.snapshots(),
            now=now,
            ttl_sec=self.ttl_sec,
            util_threshold=self.util_threshold,
            api_key_auth=self.api_key_auth,
        )
        if decision.open:
            return Go(self.name)
        until = datetime.now(UTC) + timedelta(seconds=min(self.ttl_sec, MAX_DEFER_SEC))
        if decision.until is not None:  # the provider said when the window resets
            until = min(until, datetime.fromtimestamp(decision.until, UTC))
        return Defer(
            self.name,
            f"quota gate closed: {decision.reason}",
            until,
            error_kind="drain_quota_deferred",
        )
