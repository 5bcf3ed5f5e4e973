"""Items from events: latest event wins, ids abbreviated, ``stale`` derived — all pure.

The events of one item may come from several host logs (each machine appends only to its
own), so an item is the fold of its events in one total order: timestamp, then host, then
the event id (:func:`sort_key`; an ``add`` first among events of one instant and host). Every machine folding the same logs gets the same items,
whatever order the files were read in. An ``add`` sets the kind, title and body and puts the
item back to its starting status (re-adding brings an item back); ``edit`` changes the title
or body; ``done``, ``drop`` and ``reopen`` move the status and append their note to the
item's evidence trail.

Stale is never written: an open item whose last event is older than :data:`STALE_AFTER`
(7 days for the reflector's items, 30 for a person's or a skill's) *reads* ``stale`` at the
moment it is read (:func:`derived_status`, with ``now`` a parameter so tests move the clock).
No machine sweeps, so none can race another.

An item's id is ``#`` and the shortest prefix (at least 4 digits) of its 16-hex uid that no
other item of the repository shares (:func:`abbreviate`), like git's short hashes: two hosts
that picked the same 4 digits offline both grow a digit after the sync, and an older short
id still finds its item while it is unambiguous.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .events import ACTIONABLE, format_ts

MIN_ID_DIGITS = 4
STALE_AFTER = {
    "reflector": timedelta(days=7),
    "person": timedelta(days=30),
    "skill": timedelta(days=30),
}
STATUSES = ("open", "stale", "done", "dropped", "note")

__all__ = [
    "STALE_AFTER",
    "STATUSES",
    "Item",
    "abbreviate",
    "derived_status",
    "fold",
    "fold_item",
    "sort_key",
    "stale_cutoffs",
    "starting_status",
]


def sort_key(event: dict[str, Any]) -> tuple[str, str, int, str]:
    """The total order of events: timestamp, then host, then event id.

    At one timestamp and host an ``add`` comes before the item's other events (a writer
    that stamps a batch with one time still creates an item before it changes it).

    Args:
        event: A validated event (its ``ts`` in the canonical form, which sorts as text).

    Returns:
        The key; equal only for the same event.
    """
    return (event["ts"], event["host"], 0 if event["op"] == "add" else 1, event["eid"])


def starting_status(kind: str) -> str:
    """``open`` for the actionable kinds, ``note`` for knowledge kinds and summaries.

    Args:
        kind: The item's kind.

    Returns:
        The status an ``add`` or a ``reopen`` gives it.
    """
    return "open" if kind in ACTIONABLE else "note"


def derived_status(base: str, by: str, updated_at: str, now: datetime) -> str:
    """The status an item reads as at ``now``: ``stale`` for an open item left untouched.

    Args:
        base: The folded status (``open``, ``note``, ``done``, ``dropped``).
        by: Who created the item (its staleness threshold, :data:`STALE_AFTER`).
        updated_at: The time of its last event (canonical form).
        now: The reading time.

    Returns:
        ``stale`` when ``base`` is ``open`` and the last event is older than the threshold,
        else ``base``.
    """
    if base != "open":
        return base
    cutoffs = _cutoffs(now)
    return "stale" if updated_at < cutoffs.get(by, cutoffs["reflector"]) else base


def stale_cutoffs(now: datetime) -> dict[str, str]:
    """Per author, the timestamp before which an open item reads stale at ``now``.

    Args:
        now: The reading time.

    Returns:
        ``{"reflector": ts, "person": ts, "skill": ts}`` in the canonical form, so an SQL
        query can apply exactly the rule of :func:`derived_status`.
    """
    return dict(_cutoffs(now))


@functools.lru_cache(maxsize=16)
def _cutoffs(now: datetime) -> dict[str, str]:
    """Per author, the timestamp before which an open item is stale (one format per read)."""
    return {by: format_ts(now - age) for by, age in STALE_AFTER.items()}


@dataclass
class Item:
    """One folded item; :meth:`to_json` is the stable ``--json`` shape."""

    uid: str
    kind: str
    title: str
    body: str
    base: str
    by: str
    created_at: str
    updated_at: str
    session: str | None = None
    host: str = ""
    notes: list[dict[str, str]] = field(default_factory=list)
    id: str = ""

    def to_json(self, now: datetime, *, repo: str | None = None) -> dict[str, Any]:
        """The item as ``reflections … --json`` prints it (keys are added, never renamed).

        Args:
            now: The reading time (for ``stale``).
            repo: The repository key, added as ``repo`` when given.

        Returns:
            ``id``, ``kind``, ``title``, ``body``, ``status``, ``notes``, ``by``,
            ``created_at``, ``updated_at``, plus ``uid``, ``session`` and ``host``.
        """
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "title": self.title,
            "body": self.body,
            "status": derived_status(self.base, self.by, self.updated_at, now),
            "notes": list(self.notes),
            "by": self.by,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "uid": self.uid,
            "session": self.session,
            "host": self.host,
        }
        if repo is not None:
            out["repo"] = repo
        return out


def fold_item(events: Iterable[dict[str, Any]]) -> Item | None:
    """Fold the events of one item (any order) into its current state.

    Args:
        events: Validated events sharing one ``uid``.

    Returns:
        The item, or ``None`` when no ``add`` is among them (its other events wait for it,
        e.g. until the log that holds the ``add`` is synced).
    """
    ordered = sorted(events, key=sort_key)
    first = next((e for e in ordered if e["op"] == "add"), None)
    if first is None:
        return None
    item = Item(
        uid=first["uid"],
        kind=first["kind"],
        title=first["title"],
        body=first.get("body") or "",
        base=starting_status(first["kind"]),
        by=first["by"],
        created_at=first["ts"],
        updated_at=first["ts"],
        session=first.get("session"),
        host=first["host"],
    )
    for e in ordered:
        op = e["op"]
        if op == "add":
            item.kind = e["kind"]
            item.title = e["title"]
            if "body" in e:
                item.body = e["body"]
            item.base = starting_status(item.kind)
        elif op == "edit":
            item.title = e.get("title", item.title)
            item.body = e.get("body", item.body)
        elif op in ("done", "drop", "reopen"):
            item.base = {"done": "done", "drop": "dropped"}.get(op, starting_status(item.kind))
        if e.get("note"):
            item.notes.append({"at": e["ts"], "op": op, "by": e["by"], "text": e["note"]})
        item.updated_at = max(item.updated_at, e["ts"])
    return item


def abbreviate(uids: Iterable[str]) -> dict[str, str]:
    """Each uid's id: ``#`` + its shortest unique prefix of at least 4 hex digits.

    Args:
        uids: Every item uid of one repository.

    Returns:
        ``uid -> "#…"``; independent of the order the uids are given in.
    """
    ordered = sorted(set(uids))
    out: dict[str, str] = {}
    for i, uid in enumerate(ordered):
        n = MIN_ID_DIGITS
        for j in (i - 1, i + 1):
            if 0 <= j < len(ordered):
                other = ordered[j]
                common = 0
                while common < len(uid) and uid[common] == other[common]:
                    common += 1
                n = max(n, common + 1)
        out[uid] = "#" + uid[: min(n, len(uid))]
    return out


def fold(events: Iterable[dict[str, Any]]) -> list[Item]:
    """Fold every event of one repository (all host logs together) into its items.

    Args:
        events: Validated events, in any order.

    Returns:
        The items, newest first by ``created_at``, each with its abbreviated ``id``.
    """
    by_uid: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        by_uid.setdefault(e["uid"], []).append(e)
    items = [it for it in (fold_item(evs) for evs in by_uid.values()) if it is not None]
    ids = abbreviate(it.uid for it in items)
    for it in items:
        it.id = ids[it.uid]
    items.sort(key=lambda it: (it.created_at, it.uid), reverse=True)
    return items


def now_utc() -> datetime:
    """The current time, aware UTC (the default ``now`` of every reader).

    Returns:
        ``datetime.now(UTC)``.
    """
    return datetime.now(UTC)
