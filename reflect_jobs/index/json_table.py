"""A read-only, live ``Mapping`` view over one JSON-valued table of the index database.

Split from :mod:`.sqlite_store`: what tests and callers used to get as plain dicts (a
namespace of the KV store, the chunk → document map) read through on every access instead
of being copied.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol


class Executes(Protocol):
    """What a view needs of the index database (``sqlite_store.IndexDB``): one query.

    A protocol rather than an import, so this module and ``sqlite_store`` (which builds
    views) do not import each other.
    """

    def execute(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Cursor: ...


class JsonTableView(Mapping):
    """``key -> JSON value`` rows of one table (optionally one namespace), read live."""

    def __init__(self, db: Executes, table: str, key: str, value: str, ns: str | None = None):
        """A view of ``table``'s ``key`` and ``value`` columns.

        Args:
            db: The shared database.
            table: The table (a fixed name from this module, never user input).
            key: The key column.
            value: The value column; ``doc_id`` values are returned as text, others are
                decoded from JSON.
            ns: Only rows of this namespace (tables with an ``ns`` column).
        """
        self._db, self._t, self._k, self._v, self._ns = db, table, key, value, ns
        self._where = " AND ns = ?" if ns is not None else ""
        self._args: tuple = (ns,) if ns is not None else ()

    def __getitem__(self, k: str) -> Any:
        row = self._db.execute(
            f"SELECT {self._v} FROM {self._t} WHERE {self._k} = ?{self._where}",  # noqa: S608
            (k, *self._args),
        ).fetchone()
        if row is None:
            raise KeyError(k)
        return json.loads(row[0]) if self._v != "doc_id" else row[0]

    def __contains__(self, k: object) -> bool:
        return (
            self._db.execute(
                f"SELECT 1 FROM {self._t} WHERE {self._k} = ?{self._where}",  # noqa: S608
                (k, *self._args),
            ).fetchone()
            is not None
        )

    def __iter__(self) -> Iterator[str]:
        where = " WHERE ns = ?" if self._ns is not None else ""
        rows = self._db.execute(
            f"SELECT {self._k} FROM {self._t}{where} ORDER BY rowid",  # noqa: S608
            self._args,
        ).fetchall()
        return iter([r[0] for r in rows])

    def __len__(self) -> int:
        where = " WHERE ns = ?" if self._ns is not None else ""
        return self._db.execute(
            f"SELECT count(*) FROM {self._t}{where}",  # noqa: S608
            self._args,
        ).fetchone()[0]

    def __bool__(self) -> bool:
        where = " WHERE ns = ?" if self._ns is not None else ""
        return (
            self._db.execute(
                f"SELECT 1 FROM {self._t}{where} LIMIT 1",  # noqa: S608
                self._args,
            ).fetchone()
            is not None
        )

    def items(self):  # one query instead of one per key
        """Every ``(key, value)`` pair in one query.

        Returns:
            A list of pairs in row order, values decoded as for ``view[key]``.
        """
        where = " WHERE ns = ?" if self._ns is not None else ""
        rows = self._db.execute(
            f"SELECT {self._k}, {self._v} FROM {self._t}{where} ORDER BY rowid",  # noqa: S608
            self._args,
        ).fetchall()
        dec = (lambda x: x) if self._v == "doc_id" else json.loads
        return [(k, dec(v)) for k, v in rows]

    def values(self):
        """Every value in one query.

        Returns:
            A list of the decoded values, in row order.
        """
        return [v for _, v in self.items()]
