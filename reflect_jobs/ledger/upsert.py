"""One-statement upserts for the ledger's small per-key rows (SQLite and PostgreSQL alike).

A $0 job used to read a row, then insert it in a savepoint or update it — three statements
and an extra flush of everything pending — for rows it only overwrites: the transcript's
last outcome and the session's checkpoint state (issue 22 item 8). ``INSERT … ON CONFLICT
DO UPDATE`` does it in one atomic statement on both ledgers, and two consumers recording the
same key at once cannot lose a race (the row lock the read took is the conflict's).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Connection, Executable, Table, func
from sqlalchemy.orm import DeclarativeBase, Session


def upsert(
    session: Session | Connection,
    model: type[DeclarativeBase],
    key: Mapping[str, Any],
    values: Mapping[str, Any],
    *,
    add: Sequence[str] = (),
) -> None:
    """Insert ``key`` + ``values`` as a row of ``model``, or overwrite the existing row's values.

    Args:
        session: The open write session (pending changes are flushed first, as by any query),
            or a gateway transaction's connection (:mod:`.gateway`).
        model: The ORM class; ``key`` names all of its primary-key columns.
        key: The primary key's columns and values.
        values: The other columns: written on insert, overwritten on conflict.
        add: Columns of ``values`` that are added to the existing row's value on conflict
            (a counter), not overwritten.

    Raises:
        NotImplementedError: The ledger is neither SQLite nor PostgreSQL.
    """
    dialect = (session.get_bind() if isinstance(session, Session) else session).dialect.name
    table = cast(Table, model.__table__)
    stmt = _statement(dialect, table, tuple(key), tuple(values), tuple(add))
    session.execute(stmt, {**key, **values})
    if not isinstance(session, Session):
        return
    # A copy of the row this session loaded before would now be stale.
    ident = tuple(key.values())
    loaded = session.identity_map.get(
        session.identity_key(model, ident if len(ident) > 1 else ident[0])
    )
    if loaded is not None:
        session.expire(loaded)


@functools.lru_cache(maxsize=64)
def _statement(
    dialect: str, table: Table, key: tuple[str, ...], names: tuple[str, ...], add: tuple[str, ...]
) -> Executable:
    """The upsert for one table and column set, built once: a $0 job runs two, and building
    ``INSERT … ON CONFLICT`` afresh cost more than SQLite's running it."""
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert  # type: ignore[assignment]
    else:  # pragma: no cover - the ledger runs on SQLite or PostgreSQL only
        raise NotImplementedError(f"upsert on {dialect}")
    stmt = insert(table)
    new = {
        name: (func.coalesce(table.c[name], 0) + stmt.excluded[name])
        if name in add
        else stmt.excluded[name]
        for name in names
    }
    return stmt.on_conflict_do_update(index_elements=list(key), set_=new)
