"""Rate-limit response headers as quota-gate snapshots (the API windows of ``quota.py``).

Anthropic sends ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
remaining,reset}`` (reset as RFC 3339); OpenAI and most compatible servers send
``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (reset as a duration like ``6m0s``).
Each bucket becomes one snapshot ``{"rateLimitType": "api_<bucket>", "status",
"utilization", "resetsAt", "limit", "remaining"}`` that the gate honours until ``resetsAt``.
Pure and total: malformed headers are skipped.
"""

from __future__ import annotations

import math
import re
import time
from datetime import datetime
from typing import Any

ANTHROPIC_BUCKETS = ("requests", "tokens", "input-tokens", "output-tokens")
OPENAI_BUCKETS = ("requests", "tokens")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def _lower(headers: Any) -> dict[str, str]:
    if headers is None or not hasattr(headers, "items"):
        return {}
    return {str(k).lower(): str(v) for k, v in headers.items()}


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        num = float(value.strip())
    except ValueError:
        return None
    return int(num) if math.isfinite(num) and num >= 0 else None


def _rfc3339(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def parse_duration(value: str | None) -> float | None:
    """``1s``, ``6m0s``, ``1h2m3.5s``, ``20ms`` or a bare number of seconds.

    Args:
        value: The header value.

    Returns:
        Seconds, or None when it does not parse.
    """
    if not value:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def _snapshot(
    bucket: str, limit: int | None, remaining: int | None, resets: float | None, source: str
) -> dict[str, Any] | None:
    if limit is None or remaining is None or limit <= 0:
        return None
    util = min(1.0, max(0.0, 1 - remaining / limit))
    return {
        "rateLimitType": "api_" + bucket.replace("-", "_"),
        "status": "rejected" if remaining == 0 else "allowed",
        "utilization": round(util, 4),
        "resetsAt": resets,
        "limit": limit,
        "remaining": remaining,
        "_source": source,
    }


def anthropic_snapshots(headers: Any) -> list[dict[str, Any]]:
    """Snapshots from Anthropic's ``anthropic-ratelimit-*`` headers.

    Args:
        headers: The response headers (any mapping; case ignored).

    Returns:
        One snapshot per bucket whose limit and remaining parse, in
        :data:`ANTHROPIC_BUCKETS` order.
    """
    h = _lower(headers)
    out = []
    for bucket in ANTHROPIC_BUCKETS:
        prefix = f"anthropic-ratelimit-{bucket}-"
        snap = _snapshot(
            bucket,
            _int(h.get(prefix + "limit")),
            _int(h.get(prefix + "remaining")),
            _rfc3339(h.get(prefix + "reset")),
            "anthropic-headers",
        )
        if snap:
            out.append(snap)
    return out


def openai_snapshots(headers: Any, now: float | None = None) -> list[dict[str, Any]]:
    """Snapshots from OpenAI-style ``x-ratelimit-*`` headers.

    Args:
        headers: The response headers (any mapping; case ignored).
        now: Unix time the reset durations count from; ``None`` means ``time.time()``.

    Returns:
        One snapshot per bucket whose limit and remaining parse.
    """
    h = _lower(headers)
    base = time.time() if now is None else now
    out = []
    for bucket in OPENAI_BUCKETS:
        wait = parse_duration(h.get(f"x-ratelimit-reset-{bucket}"))
        snap = _snapshot(
            bucket,
            _int(h.get(f"x-ratelimit-limit-{bucket}")),
            _int(h.get(f"x-ratelimit-remaining-{bucket}")),
            base + wait if wait is not None else None,
            "openai-headers",
        )
        if snap:
            out.append(snap)
    return out
