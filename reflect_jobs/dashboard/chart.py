"""The dashboard's spend chart: paid calls and spend per day as one inline SVG, pure Python.

Drawn on the server as text so the page needs no chart library (nothing to fetch from a
CDN, no build step) and so a test can read the numbers back from the markup: every bar
carries ``data-day``/``data-calls``/``data-spend``, the cap line ``data-cap``. The daily cap
is a count of paid calls (``REFLECT_DRAIN_DAILY_MAX``), so bars are calls on the left axis
and the cap is a line on that axis; spend in dollars is a polyline on its own right axis.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, timedelta
from typing import Any
from xml.sax.saxutils import escape, quoteattr

DAYS = 30


def daily_series(
    rows: Mapping[str, Mapping[str, Any]], *, today: date, days: int = DAYS
) -> list[dict[str, Any]]:
    """The last ``days`` UTC days, oldest first, with zeros for days without a paid call.

    Args:
        rows: ``cost_report(by="day")["rows"]``: ``YYYY-MM-DD`` → a bucket with
            ``entries`` (paid calls) and ``cost_usd``; other days are ignored.
        today: The last day of the window (UTC).
        days: How many days the window holds.

    Returns:
        One ``{"day", "calls", "spend"}`` per day (``calls`` an int, ``spend`` dollars).
    """
    out = []
    for i in range(days - 1, -1, -1):
        day = (today - timedelta(days=i)).isoformat()
        row = rows.get(day) or {}
        out.append(
            {
                "day": day,
                "calls": int(row.get("entries", 0) or 0),
                "spend": float(row.get("cost_usd", 0.0) or 0.0),
            }
        )
    return out


def _fmt(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def spend_chart_svg(
    series: list[dict[str, Any]], *, cap: int, width: int = 720, height: int = 220
) -> str:
    """Paid calls per day as bars, the daily cap as a dashed line, spend as a polyline.

    The left axis reaches past the cap, so the cap line is always inside the chart, even on
    days far below it; the spend axis is scaled to its own maximum.

    Args:
        series: :func:`daily_series` output (any length; labels come from its days).
        cap: The daily cap on paid calls.
        width: The SVG's width in user units (it scales with the page).
        height: The SVG's height in user units.

    Returns:
        A standalone ``<svg>`` element; all text in it is escaped.
    """
    left, right, top, bottom = 44, 60, 14, 24
    plot_w, plot_h = width - left - right, height - top - bottom
    n = max(len(series), 1)
    max_calls = max([s["calls"] for s in series] + [cap, 1])
    y_max = max_calls * 1.15
    max_spend = max([s["spend"] for s in series] + [0.0])
    slot = plot_w / n
    bar_w = max(slot * 0.7, 1.0)

    def y_calls(v: float) -> float:
        return top + plot_h - (v / y_max) * plot_h

    def y_spend(v: float) -> float:
        return top + plot_h - (v / max_spend) * plot_h * 0.95 if max_spend > 0 else top + plot_h

    total_calls = sum(s["calls"] for s in series)
    total_spend = sum(s["spend"] for s in series)
    label = (
        f"Paid calls and spend per day, last {len(series)} days: {total_calls} calls, "
        f"${total_spend:.2f}; daily cap {cap} calls"
    )
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="spend-chart" role="img" '
        f'viewBox="0 0 {width} {height}" preserveAspectRatio="xMidYMid meet" '
        f"aria-label={quoteattr(label)}>",
        f"<title>{escape(label)}</title>",
        f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" '
        f'y2="{top + plot_h}" stroke="#888" stroke-width="1"/>',
    ]
    for i, s in enumerate(series):
        x = left + i * slot + (slot - bar_w) / 2
        y = y_calls(s["calls"])
        tip = f"{s['day']}: {s['calls']} paid call(s), ${s['spend']:.4f}"
        parts.append(
            f'<rect class="bar" data-day={quoteattr(s["day"])} data-calls="{s["calls"]}" '
            f'data-spend="{s["spend"]:.6f}" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" '
            f'height="{top + plot_h - y:.1f}" fill="#4a7fb5"><title>{escape(tip)}</title></rect>'
        )
    cy = y_calls(cap)
    parts.append(
        f'<line class="cap" data-cap="{cap}" x1="{left}" y1="{cy:.1f}" x2="{left + plot_w}" '
        f'y2="{cy:.1f}" stroke="#c0392b" stroke-width="1.5" stroke-dasharray="6 4"/>'
    )
    parts.append(
        f'<text class="cap-label" x="{left + 4}" y="{cy - 4:.1f}" '
        f'font-size="11" fill="#c0392b">daily cap {cap}</text>'
    )
    if series:
        points = " ".join(
            f"{left + i * slot + slot / 2:.1f},{y_spend(s['spend']):.1f}"
            for i, s in enumerate(series)
        )
        parts.append(
            f'<polyline class="spend" points="{points}" fill="none" stroke="#e69f00" '
            f'stroke-width="2"/>'
        )
        first, last = escape(series[0]["day"]), escape(series[-1]["day"])
        parts.append(
            f'<text x="{left}" y="{height - 6}" font-size="11" fill="#666">{first}</text>'
            f'<text x="{left + plot_w}" y="{height - 6}" font-size="11" fill="#666" '
            f'text-anchor="end">{last}</text>'
        )
    parts.append(
        f'<text x="{left - 4}" y="{y_calls(max_calls) + 4:.1f}" font-size="11" fill="#4a7fb5" '
        f'text-anchor="end">{max_calls}</text>'
        f'<text x="{left - 4}" y="{top + plot_h}" font-size="11" fill="#4a7fb5" '
        f'text-anchor="end">0</text>'
        f'<text x="{left + plot_w + 4}" y="{top + 10}" font-size="11" fill="#b07800">'
        f"${_fmt(max_spend) if max_spend >= 0.1 else f'{max_spend:.3f}'}</text>"
        f'<text x="{left + plot_w + 4}" y="{top + plot_h}" font-size="11" fill="#b07800">$0</text>'
    )
    # Axis titles: the cap is a count of calls, so it reads on the left (calls) axis; the
    # right axis is dollars. Without them the two scales looked like one.
    mid = top + plot_h / 2
    parts.append(
        f'<text class="axis-title calls" x="10" y="{mid:.1f}" font-size="11" fill="#4a7fb5" '
        f'text-anchor="middle" transform="rotate(-90 10 {mid:.1f})">paid calls / day</text>'
        f'<text class="axis-title spend" x="{width - 8}" y="{mid:.1f}" font-size="11" '
        f'fill="#b07800" text-anchor="middle" transform="rotate(90 {width - 8} {mid:.1f})">'
        "spend ($) / day</text>"
    )
    parts.append("</svg>")
    return "".join(parts)
