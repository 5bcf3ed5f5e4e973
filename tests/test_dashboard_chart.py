"""The dashboard's spend chart as a pure function: 30 days, bars to scale, the cap line."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import date

from reflect_jobs.dashboard.chart import daily_series, spend_chart_svg

NS = {"s": "http://www.w3.org/2000/svg"}


def _svg(series, cap):
    return ET.fromstring(spend_chart_svg(series, cap=cap))


def test_daily_series_fills_the_last_30_days_oldest_first_and_drops_older_rows():
    rows = {
        "2026-12-01": {"entries": 3, "cost_usd": 0.25},
        "2026-11-20": {"entries": 1, "cost_usd": 0.5},
        "2026-10-01": {"entries": 9, "cost_usd": 9.0},  # outside the window
    }
    series = daily_series(rows, today=date(2026, 12, 1))
    assert len(series) == 30
    assert series[0]["day"] == "2026-11-02" and series[-1]["day"] == "2026-12-01"
    assert series[-1] == {"day": "2026-12-01", "calls": 3, "spend": 0.25}
    assert {s["day"]: s["calls"] for s in series}["2026-11-20"] == 1
    assert sum(s["calls"] for s in series) == 4


def test_bars_are_to_scale_and_the_cap_line_sits_at_the_cap():
    series = daily_series(
        {"2026-12-01": {"entries": 10, "cost_usd": 1.0}, "2026-11-30": {"entries": 5}},
        today=date(2026, 12, 1),
    )
    svg = _svg(series, cap=20)
    bars = svg.findall("s:rect[@class='bar']", NS)
    assert len(bars) == 30
    by_day = {b.get("data-day"): b for b in bars}
    ten, five = by_day["2026-12-01"], by_day["2026-11-30"]
    assert (ten.get("data-calls"), five.get("data-calls")) == ("10", "5")
    h10, h5 = float(ten.get("height")), float(five.get("height"))
    assert h10 > 0 and abs(h10 - 2 * h5) < 0.2, "bar height is proportional to calls"
    assert float(by_day["2026-11-02"].get("height")) == 0
    (cap,) = svg.findall("s:line[@class='cap']", NS)
    assert cap.get("data-cap") == "20"
    base = float(ten.get("y")) + h10  # the x axis
    cap_h = base - float(cap.get("y1"))
    assert abs(cap_h - 2 * h10) < 0.2, "the cap is drawn on the calls axis"
    spend = svg.find("s:polyline[@class='spend']", NS)
    assert len(spend.get("points").split()) == 30


def test_cap_line_stays_inside_the_chart_when_a_day_exceeds_the_cap():
    series = daily_series({"2026-12-01": {"entries": 40}}, today=date(2026, 12, 1))
    svg = _svg(series, cap=20)
    (cap,) = svg.findall("s:line[@class='cap']", NS)
    top_bar = svg.find("s:rect[@data-day='2026-12-01']", NS)
    assert 0 < float(top_bar.get("y")) < float(cap.get("y1")), "the bar rises past the cap"


def test_text_in_the_chart_is_escaped():
    series = [{"day": "<script>x</script>", "calls": 1, "spend": 0.0}]
    text = spend_chart_svg(series, cap=2)
    assert "<script>" not in text and "&lt;script&gt;" in text
    ET.fromstring(text)  # still well-formed
