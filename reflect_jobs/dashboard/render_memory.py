"""The memory view's HTML and the jobs list: what the product remembers, escaped on the server.

Same rules as :mod:`.render`: one renderer (the page's first paint and ``/fragment/memory``
use the same functions), every value through :func:`html.escape`. Learnings, items and
evidence are written by models from transcripts — hostile input; a title like
``<img onerror=…>`` must arrive as text. The buttons carry ids in ``data-`` attributes
(escaped too) and the page's script posts them with the run's token.
"""

from __future__ import annotations

from typing import Any

from .escaping import esc as _e


def _anchors(anchors: list[dict[str, str]]) -> str:
    if not anchors:
        return ""
    shown = ", ".join(
        f"<code>{_e(a['path'])}</code>" + (f" ({_e(a['symbol'])})" if a.get("symbol") else "")
        for a in anchors
    )
    return f'<p class="anchors">anchors: {shown}</p>'


def _age(days: int | None) -> str:
    if days is None:
        return "age unknown"
    return "today" if days == 0 else f"{days} d old"


def _learning(item: dict[str, Any], *, actions: str) -> str:
    verdict = item.get("verdict")
    evidence = (
        f'<p class="evidence">evidence ({_e(item.get("evidence_origin") or "unknown")}): '
        f"{_e(item['evidence'])}</p>"
        if item.get("evidence")
        else '<p class="evidence none">no evidence recorded</p>'
    )
    return (
        f'<article class="learning" data-learning="{_e(item["id"])}" '
        f'data-status="{_e(item["status"])}">'
        f"<h4>{_e(item['title'])}</h4>"
        f'<p class="rule">{_e(item.get("rule") or "(no rule)")}</p>'
        f'<p class="meta">{_e(item.get("scope"))} · {_e(item["status"])} · confidence '
        f"{float(item.get('confidence') or 0):.2f} · proof {int(item.get('proof') or 0)} · "
        f"{_e(_age(item.get('age_days')))} · verification "
        f'<span class="verdict">{_e(verdict or "not checked yet")}</span> · '
        f"<code>{_e(item['id'])}</code></p>"
        f"{evidence}{_anchors(item.get('anchors') or [])}{actions}</article>"
    )


def _forget_button(item: dict[str, Any]) -> str:
    return (
        f'<p class="actions"><button type="button" data-forget="{_e(item["id"])}">'
        "Forget</button></p>"
    )


def _restore_button(item: dict[str, Any]) -> str:
    return (
        f'<p class="actions"><button type="button" data-restore="{_e(item["id"])}">'
        "Restore</button></p>"
    )


def learnings_section(
    learnings: dict[str, Any],
    *,
    withheld: bool = False,
) -> str:
    """Learnings per repository (global last), each with its rule and its proof.

    Args:
        learnings: :func:`reflect_jobs.dashboard.memory.learnings_by_repository` output.
        withheld: These are out of circulation (``#withheld``, each with Restore) rather
            than told (``#learnings``, each with Forget).

    Returns:
        The ``#learnings`` or ``#withheld`` section.
    """
    groups = learnings.get("repositories") or []
    section, title = (
        ("withheld", "Forgotten and withheld (not told)")
        if withheld
        else ("learnings", "Learnings per repository")
    )
    button = _restore_button if withheld else _forget_button
    if not groups:
        body = (
            '<p class="empty">None.</p>' if withheld else '<p class="empty">No learnings yet.</p>'
        )
    else:
        body = "".join(
            f'<details class="repository" data-repository="{_e(g["repository"])}" open>'
            f"<summary>{_e(g['repository'])} <span class='n'>{int(g['total'])}</span>"
            + (
                f" <span class='meta'>(strongest {len(g['learnings'])} shown)</span>"
                if g["total"] > len(g["learnings"])
                else ""
            )
            + "</summary>"
            + "".join(_learning(x, actions=button(x)) for x in g["learnings"])
            + "</details>"
            for g in groups
        )
    return f'<section id="{section}"><h2>{title}</h2>{body}</section>'


def review_section(review: list[dict[str, Any]]) -> str:
    """The review queue: learnings never told until a person accepts them, and global
    ones told only in their repository until a second session or a person confirms them.

    Args:
        review: :func:`reflect_jobs.dashboard.memory.review_queue` output.

    Returns:
        The ``#review`` section with Accept and Reject per learning.
    """
    if not review:
        body = '<p class="empty">Nothing waits for review.</p>'
    else:
        rows = []
        for r in review:
            item = {
                **r,
                "scope": f"{r.get('scope', 'global')} ({r.get('repository', 'global')})",
                "proof": 1,
                "verdict": None,
                "anchors": r.get("anchors") or [],
            }
            why = "; ".join(r.get("why") or []) or "proposed"
            label = (
                '<p class="pending-global">global, awaiting a second session (told only '
                f"in {_e(r.get('repository') or '?')} until then; Accept makes it global)</p>"
                if r.get("proposed_scope") == "global"
                else ""
            )
            actions = (
                f'{label}<p class="why">why it waits: {_e(why)}</p><p class="actions">'
                f'<button type="button" data-review="accept" data-id="{_e(r["id"])}">Accept'
                f'</button> <button type="button" data-review="reject" data-id="{_e(r["id"])}">'
                "Reject</button></p>"
            )
            rows.append(_learning(item, actions=actions))
        body = "".join(rows)
    return (
        f'<section id="review"><h2>Review queue <span class="n">{len(review)}</span></h2>'
        f"{body}</section>"
    )


def items_section(items: dict[str, Any]) -> str:
    """Open items with their bodies and a note-required Done/Drop form each.

    Args:
        items: :func:`reflect_jobs.dashboard.memory.items_by_repository` output.

    Returns:
        The ``#items`` section.
    """
    if not items.get("available"):
        body = '<p class="empty">The Reflection Store is not available yet: nothing to show.</p>'
    elif not items["repositories"]:
        body = '<p class="empty">No open items.</p>'
    else:
        parts = []
        for r in items["repositories"]:
            parts.append(
                f'<details class="repository" data-repository="{_e(r["repository"])}" open>'
                f"<summary>{_e(r['repository'])} <span class='n'>{int(r['open'])}</span> open"
                "</summary>"
            )
            for i in r["items"]:
                parts.append(
                    f'<article class="item" data-item="{_e(i["id"])}">'
                    f"<h4><code>{_e(i['id'])}</code> {_e(i['kind'])}: {_e(i['title'])}</h4>"
                    f'<p class="meta">by {_e(i.get("by"))} · {_e(i.get("created_at"))}</p>'
                    + (f'<pre class="body">{_e(i["body"])}</pre>' if i.get("body") else "")
                    + f'<form class="item-change" data-repository="{_e(r["repository"])}" '
                    f'data-item="{_e(i["id"])}"><input name="note" required maxlength="2000" '
                    'placeholder="evidence it is done, or why it is dropped" '
                    'aria-label="note">'
                    '<button type="submit" value="done">Done</button>'
                    '<button type="submit" value="drop">Drop</button></form></article>'
                )
            parts.append("</details>")
        body = "".join(parts)
    return f'<section id="items"><h2>Open items</h2>{body}</section>'


def jobs_section(jobs: dict[str, Any], *, state: str = "", stage: str = "") -> str:
    """The jobs list with its state and stage filters (choices from what the ledger holds).

    Args:
        jobs: :func:`reflect_jobs.dashboard.memory.jobs` output.
        state: The state filter in force (``""``: all).
        stage: The stage filter in force.

    Returns:
        The ``#jobs`` section.
    """

    def options(values: list[str], chosen: str) -> str:
        return '<option value="">all</option>' + "".join(
            f'<option value="{_e(v)}"{" selected" if v == chosen else ""}>{_e(v)}</option>'
            for v in values
        )

    rows = "".join(
        f'<tr data-job="{_e(j["id"])}" data-state="{_e(j["state"])}">'
        f"<td><code>{_e(j['id'])}</code></td><td>{_e(j['state'])}</td><td>{_e(j['stage'])}</td>"
        f"<td>{_e(j.get('outcome') or '')}</td><td>{_e(j.get('updated_at') or '')}</td></tr>"
        for j in jobs["jobs"]
    )
    table = (
        "<table><thead><tr><th>job</th><th>state</th><th>stage</th><th>outcome</th>"
        f"<th>updated</th></tr></thead><tbody>{rows}</tbody></table>"
        if rows
        else '<p class="empty">No jobs match.</p>'
    )
    return (
        '<section id="jobs"><h2>Jobs</h2><form id="job-filter">'
        f'<label>state <select name="state">{options(jobs["states"], state)}</select></label> '
        f'<label>stage <select name="stage">{options(jobs["stages"], stage)}</select></label>'
        f"</form>{table}</section>"
    )


def render_memory(data: dict[str, Any]) -> str:
    """The memory view (what ``/fragment/memory`` returns).

    Args:
        data: :func:`reflect_jobs.dashboard.memory.memory` output.

    Returns:
        The review queue, the open items and the learnings, every value escaped.
    """
    return (
        review_section(data["review"])
        + items_section(data["items"])
        + learnings_section(data["learnings"])
        + learnings_section(data.get("withheld") or {}, withheld=True)
        + (recall_log_section(data["recall_log"]) if "recall_log" in data else "")
    )


def recall_log_section(entries: list[dict[str, Any]]) -> str:
    """What recent sessions were told (the recall log), newest first.

    Args:
        entries: :func:`reflect_jobs.dashboard.memory.recall_log` records (``session``,
            ``harness``, ``cwd``, ``at``, ``learnings``, ``items``, ``withheld``, ``chars``).

    Returns:
        The ``#recall-log`` section.
    """
    if not entries:
        body = '<p class="empty">No session has been told anything yet.</p>'
    else:
        body = (
            "<table><thead><tr><th>when</th><th>session</th><th>harness</th><th>directory</th>"
            "<th>learnings told</th><th>items</th><th>withheld</th><th>characters</th></tr>"
            "</thead><tbody>"
            + "".join(
                f'<tr data-session="{_e(x.get("session"))}"><td>{_e(x.get("at"))}</td>'
                f"<td><code>{_e(x.get('session'))}</code></td>"
                f"<td>{_e(x.get('harness'))}</td><td>{_e(x.get('cwd'))}</td>"
                f"<td>{_e(', '.join(map(str, x.get('learnings') or [])))}</td>"
                f"<td>{_e(', '.join(map(str, x.get('items') or [])))}</td>"
                f"<td>{_e(', '.join(map(str, x.get('withheld') or [])))}</td>"
                f"<td>{int(x.get('chars') or 0)}</td></tr>"
                for x in entries
            )
            + "</tbody></table>"
        )
    return f'<section id="recall-log"><h2>What sessions were told</h2>{body}</section>'
