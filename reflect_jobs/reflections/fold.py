"""Items from events: latest event wins, ids abbreviated, ``stale`` derived — all pure.

The events of one item may come from several host logs (each machine appends only to its
own), so an item is the fold of its events in one total order: timestamp, then host, then
the event id (:func:`sort_key`; an ``add`` first among events of one instant and host). Every
machine folding the same logs gets the same items, whatever order the files were read in.
An ``add`` sets the kind, title and body and puts the item back to its starting status
(re-adding brings an item back); ``edit`` changes the title or body; ``done``, ``drop`` and
``reopen`` move the status and append their note to the item's evidence trail.

**A log's clock is a claim, not a fact** (:func:`clamp`): a synced log may carry any time.
Before they are ordered, event times are clamped to [the item's creation, now + 5 minutes]:
an event stamped in the far future cannot sort after every honest change for ever (nor keep
its item fresh for ever, nor overflow a date), and a change stamped before the item it
changes (a machine whose clock is behind) is ordered 1 µs after the creation, not before
it — changes clamped alike keep their own order (the key is the clamped time, then
:func:`sort_key`). The index clamps the upper end when it first reads an event (:data:`FUTURE_SLACK` after
that moment), so a later fold does not move the bound along with the clock.

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
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from .events import ACTIONABLE, format_ts, parse_ts

MIN_ID_DIGITS = 4
#: How far ahead of the reader's clock an event may claim to be (clock skew between hosts).
FUTURE_SLACK = timedelta(minutes=5)
#: The newest notes an item keeps in its trail (an item's memory is bounded, whatever a log
#: holds about it).
MAX_NOTES = 100
STALE_AFTER = {
    "reflector": timedelta(days=7),
    "person": timedelta(days=30),
    "skill": timedelta(days=30),
}
STATUSES = ("open", "stale", "done", "dropped", "note")

__all__ = [
    "FUTURE_SLACK",
    "MAX_NOTES",
    "STALE_AFTER",
    "STATUSES",
    "Folder",
    "Item",
    "abbreviate",
    "after_creation",
    "clamp_future",
    "derived_status",
    "effective_ts",
    "fold",
    "fold_item",
    "sort_key",
    "stale_cutoffs",
    "starting_status",
    "unique_id",
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
    """One folded item; :meth:`to_json` is the stable ``--json`` shape.

    ``seen`` is when this machine's index first read the item's ``add`` (empty from the
    pure fold): unlike ``created_at`` it is not a claim of the log, so the dedupe pass can
    tell a backdated item (:mod:`.dedupe`).
    """

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
    seen: str = ""

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


def clamp_future(ts: str, now: datetime) -> str:
    """``ts`` no later than ``now`` + :data:`FUTURE_SLACK` (both in the canonical form).

    Args:
        ts: An event's time as validated (canonical, sorts as text).
        now: The moment the event is first read.

    Returns:
        ``ts``, or the bound when ``ts`` is later.
    """
    bound = format_ts(now + FUTURE_SLACK)
    return ts if ts <= bound else bound


def after_creation(first_add: str) -> str:
    """Where a change stamped at or before its item's creation is ordered: 1 µs after it.

    Args:
        first_add: The (clamped) time of the item's first ``add``.

    Returns:
        That time plus one microsecond, canonical.
    """
    return format_ts(parse_ts(first_add) + timedelta(microseconds=1))


def effective_ts(event: dict[str, Any], first_add: str, floor: str) -> str:
    """An event's time as the fold orders it: a change is never before its item's creation.

    Args:
        event: A validated event (already clamped to the future bound).
        first_add: The time of the item's first ``add``.
        floor: :func:`after_creation` of ``first_add``.

    Returns:
        ``floor`` for a non-``add`` event stamped at or before ``first_add``, else its ``ts``.
    """
    ts = event["ts"]
    return floor if event["op"] != "add" and ts <= first_add else ts


class Folder:
    """The fold of one item's events fed in :func:`sort_key` order, one at a time.

    Memory is one item's state whatever the number of events (the index streams an item's
    events from SQLite in order): only the newest :data:`MAX_NOTES` notes are kept.
    """

    def __init__(self) -> None:
        """Start with no item (the first ``add`` creates it)."""
        self.item: Item | None = None
        self._notes: deque[dict[str, str]] = deque(maxlen=MAX_NOTES)

    def feed(self, e: dict[str, Any]) -> None:
        """Apply the next event (its ``ts`` already :func:`effective_ts`).

        Args:
            e: A validated event. A non-``add`` event before the first ``add`` is
                ignored (the callers order every change after its item's creation).
        """
        op = e["op"]
        item = self.item
        if item is None:
            if op != "add":
                return
            item = self.item = Item(
                uid=e["uid"],
                kind=e["kind"],
                title=e["title"],
                body="",
                base=starting_status(e["kind"]),
                by=e["by"],
                created_at=e["ts"],
                updated_at=e["ts"],
                session=e.get("session"),
                host=e["host"],
            )
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
            self._notes.append({"at": e["ts"], "op": op, "by": e["by"], "text": e["note"]})
        item.updated_at = max(item.updated_at, e["ts"])

    def result(self) -> Item | None:
        """The folded item (``None`` when no ``add`` was fed).

        Returns:
            The item with its notes (the newest :data:`MAX_NOTES`).
        """
        if self.item is not None:
            self.item.notes = list(self._notes)
        return self.item


def fold_item(events: Iterable[dict[str, Any]], now: datetime | None = None) -> Item | None:
    """Fold the events of one item (any order) into its current state.

    Args:
        events: Validated events sharing one ``uid``.
        now: The reading time: times later than ``now`` + 5 minutes are clamped to it
            (``None``: the current time).

    Returns:
        The item, or ``None`` when no ``add`` is among them (its other events wait for it,
        e.g. until the log that holds the ``add`` is synced).
    """
    when = now or now_utc()
    capped = [
        e if e["ts"] <= (c := clamp_future(e["ts"], when)) else {**e, "ts": c} for e in events
    ]
    first = min((e["ts"] for e in capped if e["op"] == "add"), default=None)
    if first is None:
        return None
    floor = after_creation(first)
    keyed = sorted(((effective_ts(e, first, floor), *sort_key(e)), e) for e in capped)
    ordered = [{**e, "ts": key[0]} for key, e in keyed]
    folder = Folder()
    for e in ordered:
        folder.feed(e)
    return folder.result()


def unique_id(uid: str, before: str | None, after: str | None) -> str:
    """The id of ``uid`` given its neighbours in the sorted uids of its repository.

    Args:
        uid: The item's uid.
        before: The next smaller uid, or ``None``.
        after: The next larger uid, or ``None``.

    Returns:
        ``#`` + the shortest prefix of at least 4 digits that neither neighbour shares.
    """
    n = MIN_ID_DIGITS
    for other in (before, after):
        if other is not None:
            common = 0
            while common < len(uid) and common < len(other) and uid[common] == other[common]:
                common += 1
            n = max(n, common + 1)
    return "#" + uid[: min(n, len(uid))]


def abbreviate(uids: Iterable[str]) -> dict[str, str]:
    """Each uid's id: ``#`` + its shortest unique prefix of at least 4 hex digits.

    Args:
        uids: Every item uid of one repository.

    Returns:
        ``uid -> "#…"``; independent of the order the uids are given in.
    """
    ordered = sorted(set(uids))
    return {
        uid: unique_id(
            uid, ordered[i - 1] if i else None, ordered[i + 1] if i + 1 < len(ordered) else None
        )
        for i, uid in enumerate(ordered)
    }


def fold(events: Iterable[dict[str, Any]], now: datetime | None = None) -> list[Item]:
    """Fold every event of one repository (all host logs together) into its items.

    Event ids are unique across a repository's logs: of two events with one id only the
    first is folded (a synced log cannot replace an event another log holds).

    Args:
        events: Validated events, in any order (a repeated event id: the first one counts).
        now: The reading time (see :func:`fold_item`).

    Returns:
        The items, newest first by ``created_at``, each with its abbreviated ``id``.
    """
    by_uid: dict[str, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for e in events:
        if e["eid"] not in seen:
            seen.add(e["eid"])
            by_uid.setdefault(e["uid"], []).append(e)
    when = now or now_utc()
    items = [it for it in (fold_item(evs, when) for evs in by_uid.values()) if it is not None]
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
