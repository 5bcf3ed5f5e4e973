"""The dashboard's HTML, rendered on the server with every value escaped.

The page arrives with its content (the first paint needs no second request), and the
periodic refresh fetches the same sections again from ``/fragment``, so there is one
renderer, not a Python one and a JavaScript one that could disagree. Note titles and text
are written by a model from transcripts — hostile input — so every value passes through
:func:`html.escape` here; the Content-Security-Policy set by :mod:`.app` (scripts from this
origin only) is the second line if an escape were ever missed.
"""

from __future__ import annotations

from typing import Any

from .chart import spend_chart_svg
from .escaping import esc as _e
from .render_memory import jobs_section

#: Seconds between refreshes of the live sections.
REFRESH_SEC = 5


def _counts(status: dict[str, Any]) -> str:
    items = "".join(
        f'<li data-state="{_e(state)}"><span class="n">{int(n)}</span> {_e(state)}</li>'
        for state, n in status["counts"].items()
    )
    b, r, q = status["budget"], status["run_window"], status["quota"]
    warnings = "".join(f'<li class="warning">{_e(w)}</li>' for w in status["warnings"])
    halted = (
        f'<p class="halted">Write stage halted: {_e(status["halt_reason"])} '
        f'<button type="button" id="resume">Resume</button></p>'
        if status["halted"]
        else ""
    )
    return (
        '<section id="counts"><h2>Jobs</h2>'
        f'<ul class="counts">{items}</ul>{halted}'
        f'<p class="meta">budget {_e(b["day"])}: <span id="budget-used">{int(b["used"])}</span>'
        f"/{int(b['limit'])} paid calls · run window {int(r['used'])}/{int(r['limit'])} · "
        f"quota gate {_e(q['gate'])} · queue {int(status['queue']['pending'])} pending · "
        f"last success {_e(status['last_success_at'] or 'never')} · "
        f"worker heartbeat {_e(status['heartbeat_at'] or 'never')}</p>"
        + (f'<ul id="warnings">{warnings}</ul>' if warnings else '<p class="ok">No warnings.</p>')
        + "</section>"
    )


def _spend(series: list[dict[str, Any]], cap: int) -> str:
    calls = sum(s["calls"] for s in series)
    spend = sum(s["spend"] for s in series)
    return (
        f'<section id="spend"><h2>Spend, last {len(series)} days</h2>'
        f'<p class="meta"><span class="legend bars">■</span> paid calls per day '
        f'<span class="legend spend">━</span> spend ($) '
        f'<span class="legend cap">┅</span> daily cap ({int(cap)} calls) · '
        f"total {calls} calls, ${spend:.2f}</p>"
        f"{spend_chart_svg(series, cap=cap)}</section>"
    )


def _stuck(jobs: list[dict[str, Any]]) -> str:
    if not jobs:
        return (
            '<section id="stuck"><h2>Poisoned, quarantined, halted</h2>'
            '<p class="empty">None: nothing waits for a person.</p></section>'
        )
    rows = []
    for j in jobs:
        ev = j.get("last_event") or {}
        last = (
            f"{_e(ev.get('at'))} → {_e(ev.get('to'))} {_e(ev.get('outcome') or '')}"
            f"<br><span class='detail'>{_e(ev.get('detail') or '')}</span>"
            if ev
            else "—"
        )
        rows.append(
            f'<tr data-job="{_e(j["id"])}" data-state="{_e(j["state"])}">'
            f"<td><code>{_e(j['id'])}</code></td><td>{_e(j['state'])}</td>"
            f"<td>{_e(j['stage'])}</td><td>{_e(j['outcome'] or '')}</td><td>{last}</td>"
            f'<td><button type="button" class="retry" data-retry="{_e(j["id"])}">Retry</button>'
            "</td></tr>"
        )
    return (
        '<section id="stuck"><h2>Poisoned, quarantined, halted</h2>'
        "<table><thead><tr><th>job</th><th>state</th><th>stage</th><th>outcome</th>"
        "<th>last event</th><th></th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></section>"
    )


def _notes(notes: list[dict[str, Any]]) -> str:
    if not notes:
        return (
            '<section id="notes"><h2>Recent notes</h2><p class="empty">No notes yet.</p></section>'
        )
    items = "".join(
        f'<article class="note" data-note="{_e(n["id"])}">'
        f'<h3>{_e(n["title"])}</h3><p class="meta">{_e(n["category"])} · {_e(n["status"])} · '
        f"{_e(n['modified_at'])} · <code>{_e(n['id'])}</code></p>"
        f'<p class="insight">{_e(n["key_insight"])}</p>'
        f'<pre class="note-text">{_e(n["text"])}{"…" if n["truncated"] else ""}</pre></article>'
        for n in notes
    )
    return f'<section id="notes"><h2>Recent notes</h2>{items}</section>'


def _errors(errors: list[dict[str, Any]]) -> str:
    if not errors:
        return ""
    items = "".join(
        f"<li><code>{_e(e['id'])}</code> {_e(e['severity'])} {_e(e['kind'])} ×{int(e['count'])} "
        f"({_e(e['last_at'])}): {_e(e['message'])}</li>"
        for e in errors
    )
    return f'<section id="errors"><h2>Errors</h2><ul>{items}</ul></section>'


def _open_items(open_items: dict[str, Any]) -> str:
    if not open_items.get("available"):
        body = '<p class="empty">The Reflection Store is not available yet: nothing to show.</p>'
    elif not open_items["repositories"]:
        body = '<p class="empty">No open items.</p>'
    else:
        body = (
            "<table><thead><tr><th>repository</th><th>open</th><th>newest (handoffs first)</th>"
            "</tr></thead><tbody>"
            + "".join(
                f"<tr><td>{_e(r['repository'])}</td><td>{int(r['open'])}</td><td><ul>"
                + "".join(
                    f"<li><code>{_e(i['id'])}</code> {_e(i['kind'])}: {_e(i['title'])}</li>"
                    for i in r.get("items", [])
                )
                + "</ul></td></tr>"
                for r in open_items["repositories"]
            )
            + "</tbody></table>"
        )
    return f'<section id="open-items"><h2>Open items per repository</h2>{body}</section>'


def render_sections(data: dict[str, Any]) -> str:
    """The live part of the page (what ``/fragment`` returns and the refresh swaps in).

    Args:
        data: :func:`reflect_jobs.dashboard.data.overview` output.

    Returns:
        HTML for the counts and warnings, the spend chart, the stuck jobs with their retry
        buttons, recent notes, errors and the open-items section; every value escaped.
    """
    return (
        _counts(data["status"])
        + _spend(data["series"], data["cap"])
        + _stuck(data["stuck"])
        + _notes(data["notes"])
        + _errors(data["errors"])
        + _open_items(data["open_items"])
        + (jobs_section(data["jobs"], **data.get("jobs_filter", {})) if "jobs" in data else "")
    )


def render_page(data: dict[str, Any], *, token: str) -> str:
    """The whole page: the token in a meta tag, the search box, the two views.

    The queue view (``#live``) arrives rendered and refreshes itself. The memory view
    (``#memory``) is loaded from ``/fragment/memory`` when its tab is opened — at 241 notes
    it is five times the rest of the page, which most visits do not look at — and reloads
    only after an action or on its Refresh button, so a note being typed into a Done form
    is never wiped by a refresh.

    Args:
        data: :func:`reflect_jobs.dashboard.data.overview` output.
        token: This run's token, which the page's script sends on every POST.

    Returns:
        A complete HTML document; its CSS and JavaScript are ``/static`` files of this server.
    """
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="reflect-token" content="{_e(token)}">'
        '<title>reflect-jobs</title><link rel="icon" href="data:,">'
        '<link rel="stylesheet" href="/static/page.css">'
        '<script src="/static/page.js" defer></script></head>'
        f'<body data-refresh-sec="{REFRESH_SEC}"><header><h1>reflect-jobs</h1>'
        '<form id="search" role="search"><input id="q" name="q" type="search" '
        'placeholder="Search notes" aria-label="Search notes">'
        '<button type="submit">Search</button></form>'
        '<nav id="views"><button type="button" data-view="live" aria-pressed="true">Queue'
        '</button><button type="button" data-view="memory" aria-pressed="false">Memory</button>'
        '<button type="button" id="memory-refresh" hidden>Refresh</button></nav>'
        '<span id="refreshed" class="meta"></span></header>'
        '<p id="flash" role="status"></p>'
        '<section id="search-results" hidden></section>'
        f'<main id="live">{render_sections(data)}</main>'
        '<main id="memory" aria-busy="false" hidden></main></body></html>'
    )
