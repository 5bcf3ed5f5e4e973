"""What the ``reflections`` commands do, as plain methods over one repository's store.

Every write is one event appended to this machine's log (``<host>.jsonl``), then the index
is refreshed so the answer (the new id, the closed item) is read back from the fold, the
same way every other reader sees it. Reads refresh first: the index is never trusted to be
current, only to be cheap to bring up to date. A damaged index is deleted and rebuilt from
the logs once, without the user noticing anything but the time it takes.

Every event is stamped with this host's own clock, never "the item's last event + 1 µs":
a synced log may claim any time (``9999-12-31``), and a writer that followed it would write
into the future (or overflow). The fold orders a change stamped before its item's creation
right after it and clamps claims from the future (:mod:`.fold`), so closing, dropping or
reopening works whatever time a log stored.

Which repositories have logs on this machine is :mod:`.known`; the KB's own hits that
``reflections search`` shows beside the items, :mod:`.kb_search`.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from reflect_jobs.envpaths import environ as merged_environ
from reflect_jobs.envpaths import home_dir_str
from reflect_jobs.repo import Repo
from reflect_jobs.repo_home import record_key, resolve

from . import memories
from .events import append_event, host_name, make_event, new_hex, redact_text
from .fold import Item, derived_status, now_utc, stale_cutoffs
from .index import ReflectionIndex, RefreshStats, index_path

T = TypeVar("T")
_ID = re.compile(r"^#?([0-9a-fA-F]{4,16})$")
CONTEXT_BUDGET = 4000
_EXCERPT = 160

__all__ = [
    "CONTEXT_BUDGET",
    "BadIdError",
    "Store",
    "StoreError",
    "open_store",
]


class StoreError(RuntimeError):
    """A command cannot do what was asked (unknown or ambiguous id, wrong status…)."""


class BadIdError(StoreError):
    """The text given as an id cannot be one (a usage error, exit 2)."""


def _statuses(status: str) -> tuple[list[str] | None, set[str] | None]:
    """Folded statuses to fetch, and derived statuses to keep, for a ``--status`` value."""
    if status == "all":
        return None, None
    if status in ("open", "stale"):
        return ["open"], {status}
    return [status], {status}


@dataclass
class Store:
    """One repository's reflection store on this machine: its logs, this host, the index.

    ``warnings`` collects what refreshes noticed (invalid lines skipped, an unreadable log)
    for the command to print on stderr.
    """

    repo: Repo
    host: str
    index: ReflectionIndex
    warnings: list[str] = field(default_factory=list)

    @property
    def log_dir(self) -> Path:
        """``<memory home>/reflections``, where every host's log is."""
        return Path(self.repo.log_dir)

    @property
    def log(self) -> Path:
        """This machine's log: ``<memory home>/reflections/<host>.jsonl``."""
        return self.log_dir / f"{self.host}.jsonl"

    def _append(self, event: dict[str, Any]) -> None:
        """Append one event to this machine's log; a home written for the first time is
        labelled with its repository's key (:func:`reflect_jobs.repo_home.record_key`)."""
        append_event(self.log, event)
        record_key(self.repo)

    def close(self) -> None:
        """Close the index."""
        self.index.close()

    def refresh(self) -> RefreshStats:
        """Bring the index in line with the logs (rebuilt once if it is damaged).

        Returns:
            What the refresh read.
        """
        try:
            stats = self.index.refresh(self.repo.key, self.log_dir, own=self.host)
        except sqlite3.DatabaseError:
            self.index.reset()
            stats = self.index.refresh(self.repo.key, self.log_dir, own=self.host)
        self.warnings += [w for w in stats.warnings if w not in self.warnings]
        return stats

    def _read(self, query: Callable[[], T]) -> T:
        """Run an index query; a damaged index is rebuilt from the logs and asked again."""
        try:
            return query()
        except sqlite3.DatabaseError:
            self.index.reset()
            self.index.refresh(self.repo.key, self.log_dir, own=self.host)
            return query()

    def _uid_item(self, uid: str) -> Item:
        found = self._read(lambda: self.index.by_prefix(self.repo.key, uid))
        if len(found) != 1:
            raise StoreError(f"the event was written to {self.log} but its item is not readable")
        return found[0]

    def add(
        self,
        kind: str,
        title: str,
        body: str | None = None,
        *,
        by: str = "person",
        session: str | None = None,
        now: datetime | None = None,
    ) -> tuple[Item, bool]:
        """Add an item; the same title of the same kind, still open, is that item again.

        Args:
            kind: One of the kinds of :mod:`.events`.
            title: A one-line title.
            body: The text.
            by: ``reflector``, ``person`` or ``skill``.
            session: The source session's id.
            now: The event time; ``None`` for now.

        Returns:
            The item as folded after the write, and whether it is new.

        Raises:
            EventError: The item breaks the schema (nothing is written).
        """
        self.refresh()
        norm = " ".join(redact_text(title).split())  # as the stored title reads
        existing = (
            self._read(lambda: self.index.by_title(self.repo.key, kind, norm)) if norm else None
        )
        uid = existing.uid if existing else new_hex(self.host, str(now_utc()), norm)
        event = make_event(
            "add",
            uid,
            host=self.host,
            by=by,
            now=now,
            kind=kind,
            title=title,
            body=body,
            session=session,
        )
        self._append(event)
        self.refresh()
        return self._uid_item(uid), existing is None

    def record(
        self,
        op: str,
        uid: str,
        *,
        eid: str,
        by: str,
        now: datetime | None = None,
        **fields: str | None,
    ) -> bool:
        """Append one event with a caller-chosen id, unless a log already holds that id.

        The reflector derives its event ids from the job, so a retried add stage writes
        nothing twice (the index is refreshed first, so a line written before a crash is
        seen). The caller refreshes after its batch.

        Args:
            op: One of the event ops.
            uid: The item's uid.
            eid: The event's 16-hex id.
            by: Who writes it.
            now: The event time; ``None`` for now (this host's clock).
            **fields: ``kind``, ``title``, ``body``, ``note``, ``session``.

        Returns:
            True when the event was appended, False when it was already there.

        Raises:
            EventError: The event breaks the schema (nothing is written).
        """
        if self._read(lambda: self.index.has_event(self.repo.key, eid)):
            return False
        event = make_event(op, uid, host=self.host, by=by, now=now, **fields)
        event["eid"] = eid
        self._append(event)
        return True

    def find(self, ident: str) -> Item:
        """The item an id on the command line names (``#a1b2`` or ``a1b2``, any unique prefix).

        Args:
            ident: The id, with or without ``#``.

        Returns:
            The one matching item.

        Raises:
            StoreError: The id is malformed, unknown, or matches several items.
        """
        m = _ID.match(ident.strip())
        if not m:
            raise BadIdError(f"{ident!r} is not an item id (# and 4 or more hex digits)")
        prefix = m.group(1).lower()
        found = self._read(lambda: self.index.by_prefix(self.repo.key, prefix))
        if not found:
            raise StoreError(f"no item #{m.group(1).lower()} in {self.repo.display}")
        if len(found) > 1:
            ids = ", ".join(sorted(i.id for i in found))
            raise StoreError(f"#{m.group(1).lower()} is ambiguous: {ids}")
        return found[0]

    def change(
        self,
        op: str,
        ident: str,
        *,
        note: str | None = None,
        title: str | None = None,
        body: str | None = None,
        by: str = "person",
        now: datetime | None = None,
    ) -> Item:
        """Close, drop, reopen or edit an item, recording the note as evidence.

        Args:
            op: ``done``, ``drop``, ``reopen`` or ``edit``.
            ident: The item's id.
            note: The evidence (required for ``done`` and ``drop``).
            title: The new title (``edit``).
            body: The new body (``edit``).
            by: Who makes the change.
            now: The event time; ``None`` for now.

        Returns:
            The item as folded after the write.

        Raises:
            StoreError: Unknown id, or the item already has the status asked for.
            EventError: The change breaks the schema (nothing is written).
        """
        self.refresh()
        item = self.find(ident)
        status = derived_status(item.base, item.by, item.updated_at, now or now_utc())
        target = {"done": "done", "drop": "dropped"}.get(op)
        if target and item.base == target:
            raise StoreError(f"{item.id} is already {target}")
        if op == "reopen" and status in ("open", "note"):
            raise StoreError(f"{item.id} is already {status}")
        event = make_event(
            op,
            item.uid,
            host=self.host,
            by=by,
            now=now,
            note=note,
            title=title,
            body=body,
        )
        self._append(event)
        self.refresh()
        return self._uid_item(item.uid)

    def items(self, status: str = "open", now: datetime | None = None) -> list[Item]:
        """Items with the (derived) ``status``, newest first.

        Args:
            status: ``open``, ``stale``, ``done``, ``dropped``, ``note`` or ``all``.
            now: The reading time (for ``stale``).

        Returns:
            The items.
        """
        self.refresh()
        when = now or now_utc()
        bases, keep = _statuses(status)
        found = self._read(lambda: self.index.items(self.repo.key, bases))
        if keep is None:
            return found
        return [i for i in found if derived_status(i.base, i.by, i.updated_at, when) in keep]

    def search(self, query: str, k: int = 20) -> list[tuple[Item, float]]:
        """Items of every status matching ``query``, best first.

        Args:
            query: Free text.
            k: At most this many.

        Returns:
            ``(item, score)`` pairs.
        """
        self.refresh()
        return self._read(lambda: self.index.search(self.repo.key, query, k))

    def memory_search(
        self, query: str, k: int = 5, environ: dict[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """The harnesses' memory files matching ``query`` (``memories.py``), read-only.

        Claude Code's memory for this repository's project (when its root is known) and
        Codex's memories, refreshed by stat, then searched.

        Args:
            query: Free text.
            k: At most this many hits.
            environ: The environment (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``HOME``).

        Returns:
            Hits ``{"file", "harness", "title", "snippet", "score"}``, best first.
        """
        sources = memories.sources_for(self.repo.root, environ)
        return self._read(lambda: self.index.memory_search(sources, query, k))

    def context(
        self, budget: int = CONTEXT_BUDGET, now: datetime | None = None
    ) -> tuple[str, list[Item], int]:
        """What a new session is shown: open items with ids, people's handoffs first, then newest.

        Stale items are left out (that is how they drop out of sight on their own), and so
        are notes and summaries: the list is what is *open*.

        Args:
            budget: At most this many characters of text (the last line says how many
                items did not fit); the first item is shown even when it alone is longer.
            now: The reading time.

        Returns:
            The text (empty when nothing is open), the items shown, and how many are open.
        """
        self.refresh()
        cutoffs = stale_cutoffs(now or now_utc())
        # an item's line is at least 19 characters with its newline, so no more can fit
        items, total = self._read(
            lambda: self.index.fresh_open(self.repo.key, cutoffs, budget // 19 + 1)
        )
        if not items:
            return "", [], 0
        head = f"Open reflection items for {self.repo.display} (close with `reflections done ID --note EVIDENCE`):"
        lines, used = [head], len(head) + 1
        shown: list[Item] = []
        for item in items:
            excerpt = " ".join(item.body.split())
            excerpt = excerpt[:_EXCERPT] + ("…" if len(excerpt) > _EXCERPT else "")
            line = f"- {item.id} [{item.kind}] {item.title}" + (f" — {excerpt}" if excerpt else "")
            more = f"… and {total - len(shown)} more: `reflections list`"
            if used + len(line) + 1 + len(more) > budget and shown:
                lines.append(more)
                break
            lines.append(line)
            shown.append(item)
            used += len(line) + 1
        else:
            if len(shown) < total:  # not reached with the limit above; kept for safety
                lines.append(f"… and {total - len(shown)} more: `reflections list`")
        return "\n".join(lines), shown, total


def open_store(repo: str | None, cwd: Path | str, environ: dict[str, str] | None = None) -> Store:
    """The store of the repository a command means, with this machine's host and the index.

    Args:
        repo: ``--repo`` (a directory, a key or a memory home's name), or ``None`` for the
            cwd's repository (:func:`reflect_jobs.repo_home.resolve`).
        cwd: The current directory.
        environ: The environment; ``None`` means ``os.environ``.

    Returns:
        The open store (close it when done). An existing memory home without a label gets
        one (:func:`reflect_jobs.repo_home.record_key`).

    Raises:
        RepoError: The repository or its memory home cannot be determined.
    """
    env = merged_environ(environ)
    resolved = resolve(repo, cwd, env)
    record_key(resolved)
    index = ReflectionIndex(index_path(Path(home_dir_str(env))))
    return Store(resolved, host_name(env), index)
