"""Which reflection items the write stage's one paid call is shown, with their ids ($0).

The reflector keeps the Reflection Store true in the same call that extracts learnings
(docs/REFLECTIONS.md, "The reflector"). It may only change items it was *offered*, so the
offer is chosen here, before the call, and the chosen uids are kept on the job
(``prepare_stats["items_offered"]``): the add stage checks every id the answer names against
that list instead of trusting the model.

The offer, in this order and without repeats: this session's own open items, open (and
stale) items that match the excerpt, the repository's freshest open items, the most recently
closed ones. It is bounded (:data:`MAX_OFFERED` items, :data:`MAX_BLOCK_CHARS` characters of
listing), every string is redacted (the store is redacted on the way in; this is the second
guard) and the block is a JSON listing after the slice marker, i.e. inert data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from .events import redact_text
from .fold import Item, derived_status

MAX_OFFERED = 20
MAX_BLOCK_CHARS = 4000
MAX_CLOSED = 5
_BODY_CHARS = 200
_QUERY_CHARS = 2000
ITEMS_MARKER = "\n\n## Reflection items (candidates)\n"
_CONTRACT = """\
These are items of this repository's Reflection Store (open tasks, questions, handoffs and
recently closed ones), each with its id. Beside "actions" your answer may carry:
"items": {"update": [{"id": "<an id listed below>", "status": "done|dropped|open",
                      "note": "<why, in a sentence>",
                      "evidence": "<a verbatim quote of this session that shows it>"}],
          "new": [{"kind": "action|question|handoff|learning|decision|gotcha|idea|note",
                   "title": "<one line>", "body": "<text>",
                   "evidence": "<a verbatim quote of this session that shows it>"}]},
"summary": "<this session so far, in at most a few sentences>".
Close (done), drop or reopen only a listed id, with its note and evidence; do not re-add a
listed item as new. "Previous summary" is this session's summary so far: replace it.
"""

__all__ = [
    "ITEMS_MARKER",
    "MAX_BLOCK_CHARS",
    "MAX_OFFERED",
    "Offer",
    "render_block",
    "select_candidates",
    "session_summary",
]


@dataclass
class Offer:
    """What one job offers the reflector: the items (in order), the block, the summary."""

    items: list[Item] = field(default_factory=list)
    summary: Item | None = None
    block: str = ""

    @property
    def uids(self) -> list[str]:
        """The offered items' uids, as kept on the job for the add stage's check."""
        return [i.uid for i in self.items]


def session_summary(items: list[Item], session: str | None) -> Item | None:
    """The session's one rolling ``summary`` item (the newest if a sync made two).

    Args:
        items: Items of the repository (any order).
        session: The session id; ``None`` has no summary.

    Returns:
        The item, or ``None``.
    """
    if not session:
        return None
    own = [i for i in items if i.kind == "summary" and i.session == session and i.by == "reflector"]
    return max(own, key=lambda i: (i.updated_at, i.uid), default=None)


def select_candidates(
    items: list[Item],
    matches: list[Item],
    *,
    session: str | None,
    now: datetime,
    limit: int = MAX_OFFERED,
) -> list[Item]:
    """The items to offer, most relevant first, without repeats (pure).

    Args:
        items: Every item of the repository (as :meth:`Store.items` ``("all")`` gives).
        matches: Items matching the excerpt, best first (:meth:`Store.search`).
        session: The job's session id: its own open items come first.
        now: The reading time (for ``stale``).
        limit: At most this many.

    Returns:
        This session's open items (newest first), matching open or stale items, the
        freshest open items, then up to :data:`MAX_CLOSED` recently closed ones; summaries
        are never offered here (the previous summary has its own line).
    """

    def status(i: Item) -> str:
        return derived_status(i.base, i.by, i.updated_at, now)

    live = [i for i in items if i.kind != "summary"]
    newest = sorted(live, key=lambda i: (i.updated_at, i.uid), reverse=True)
    own = [i for i in newest if session and i.session == session and status(i) == "open"]
    matching = [i for i in matches if i.kind != "summary" and status(i) in ("open", "stale")]
    fresh = [i for i in newest if status(i) == "open"]
    closed = [i for i in newest if i.base in ("done", "dropped")][:MAX_CLOSED]
    out: dict[str, Item] = {}
    for item in (*own, *matching, *fresh, *closed):
        if len(out) >= limit:
            break
        out.setdefault(item.uid, item)
    return list(out.values())


def _entry(item: Item, now: datetime) -> dict[str, str]:
    body = " ".join(item.body.split())
    body = body[:_BODY_CHARS] + ("…" if len(body) > _BODY_CHARS else "")
    return {
        "id": item.id,
        "kind": item.kind,
        "status": derived_status(item.base, item.by, item.updated_at, now),
        "title": redact_text(item.title),
        "body": redact_text(body),
    }


def render_block(
    candidates: list[Item], summary: Item | None, now: datetime, budget: int = MAX_BLOCK_CHARS
) -> tuple[str, list[Item]]:
    """The block appended after the slice, and the items that fit in it.

    Args:
        candidates: :func:`select_candidates`' answer, in order.
        summary: The session's previous summary, offered as input to this pass.
        now: The reading time.
        budget: At most this many characters of listing (the first item always fits).

    Returns:
        ``ITEMS_MARKER``, the contract and a JSON listing (``[]`` when the store holds
        nothing to offer: the call may still add items and the first summary), and the
        items actually listed: only those count as offered.
    """
    listed: list[dict[str, str]] = []
    shown: list[Item] = []
    used = 0
    for item in candidates:
        entry = _entry(item, now)
        size = len(json.dumps(entry, ensure_ascii=False)) + 2
        if listed and used + size > budget:
            break
        listed.append(entry)
        shown.append(item)
        used += size
    text = ITEMS_MARKER + _CONTRACT
    if summary is not None:
        prev = " ".join(redact_text(summary.body or summary.title).split())[: _BODY_CHARS * 4]
        text += f"Previous summary: {json.dumps(prev, ensure_ascii=False)}\n"
    text += "Items:\n" + json.dumps(listed, indent=1, ensure_ascii=False) + "\n"
    return text, shown


def excerpt_query(slice_text: str) -> str:
    """The free text the store is searched with: the slice's start, bounded.

    Args:
        slice_text: The prepared slice.

    Returns:
        At most 2,000 characters of it.
    """
    return slice_text[:_QUERY_CHARS]
