"""Enqueue a Huey task message with the standard library only — the hook's fast path.

Why not ``import huey``? Measured on the target machines, ``import huey`` alone costs about
120 ms in a cold process (it also pulls the redis client in when installed), while a bare
interpreter starts in about 10 ms. A hook runs after every agent turn; it must cost no more
than twice a bare start (issue #2). So the hook writes the exact bytes Huey would write:

* the message is ``pickle`` of ``huey.registry.Message(id, name, eta, retries, retry_delay,
  priority, args, kwargs)`` (missing trailing fields default to None in Huey). We emit the
  pickle opcodes for "call huey.registry.Message with this tuple" without importing Huey;
  the consumer unpickles it with the real class.
* SQLite: one INSERT into Huey's ``task`` table (the same DDL Huey creates, so a hook that
  runs before the first consumer start still leaves a valid queue file).
* Redis: one ``LPUSH huey.redis.<name>`` spoken in RESP over a plain socket.

``tests/test_fastqueue.py`` checks that a real Huey consumer runs what we wrote and that the
DDL and key names still match the installed Huey, so an upgrade that changes the format
fails the tests instead of silently dropping captures.
"""

from __future__ import annotations

import os
import pickle
import sqlite3

from reflect_jobs.perms import private_file

QUEUE_NAME = "reflect"

# Huey 3.5 SqliteStorage DDL for the task queue (kept identical; see module docstring).
TASK_TABLE_DDL = (
    "create table if not exists task ("
    "id integer not null primary key, queue text not null, "
    "data blob not null, priority real not null default 0.0)"
)
TASK_INDEX_DDL = (
    "create index if not exists task_queue_priority_id on task (queue, priority desc, id)"
)


def _uuid4() -> str:
    """A random RFC 4122 v4 id as Huey makes them, without importing ``uuid``."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def encode_message(task_name: str, args: tuple, kwargs: dict | None = None) -> bytes:
    """Pickle bytes that unpickle to ``huey.registry.Message(...)``.

    Layout: PROTO 2, GLOBAL 'huey.registry Message', <args tuple>, REDUCE, STOP. The inner
    tuple is pickled by the stdlib (its own PROTO/STOP stripped); GLOBAL is not memoised,
    so the tuple's memo indices stay valid in the combined stream.

    Args:
        task_name: Huey's registered name of the task: module path and function name, e.g.
            ``reflect_jobs.tasks.capture``.
        args: Positional arguments of the task call; must be picklable by the stdlib and
            unpicklable by the consumer (plain values only).
        kwargs: Keyword arguments of the call; ``None`` means none.

    Returns:
        The message bytes: a fresh random id, no ETA, 0 retries, 0 retry delay, no priority;
        ready for :func:`push_sqlite` or :func:`push_redis`.
    """
    fields = (_uuid4(), task_name, None, 0, 0, None, tuple(args), dict(kwargs or {}))
    inner = pickle.dumps(fields, protocol=2)
    assert inner[:2] == b"\x80\x02" and inner[-1:] == b"."
    return b"\x80\x02chuey.registry\nMessage\n" + inner[2:-1] + b"R."


def push_sqlite(path: str, data: bytes, *, name: str = QUEUE_NAME, timeout: float = 5.0) -> None:
    """INSERT one message into Huey's ``task`` table in the SQLite queue file ``path``.

    If the table does not exist yet (the hook ran before any consumer started), the file is
    switched to WAL and given Huey's own DDL, then the insert is retried, so the file a
    consumer later opens is one Huey itself could have made.

    Args:
        path: Filesystem path of the queue database (what follows ``sqlite:///``). The file
            is created (0600) if missing; its directory must exist.
        data: The message bytes from :func:`encode_message`.
        name: Huey's queue name (the ``queue`` column); a consumer reads only its own name.
        timeout: Seconds to wait for a lock held by a consumer or another hook.

    Raises:
        sqlite3.Error: The database stayed locked past ``timeout``, cannot be opened, or is
            not a Huey queue file.
    """
    if not os.path.exists(path):
        private_file(path)  # 0600 before SQLite creates it (its -wal/-shm copy the mode)
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    try:
        try:
            conn.execute(
                "insert into task (queue, data, priority) values (?, ?, ?)",
                (name, memoryview(data), 0),
            )
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            conn.execute('pragma journal_mode="wal"')
            conn.execute(TASK_TABLE_DDL)
            conn.execute(TASK_INDEX_DDL)
            conn.execute(
                "insert into task (queue, data, priority) values (?, ?, ?)",
                (name, memoryview(data), 0),
            )
    finally:
        conn.close()


def _resp(*parts: bytes) -> bytes:
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(part), part))
    return b"".join(out)


def _read_reply(sock) -> bytes:  # type: ignore[no-untyped-def]
    buf = b""
    while not buf.endswith(b"\r\n"):
        chunk = sock.recv(256)
        if not chunk:
            raise ConnectionError("redis closed the connection")
        buf += chunk
    if buf.startswith(b"-"):
        raise ConnectionError(f"redis error: {buf[1:].strip().decode(errors='replace')}")
    return buf


def push_redis(url: str, data: bytes, *, name: str = QUEUE_NAME, timeout: float = 3.0) -> None:
    """LPUSH onto RedisStorage's list key, honouring password and db number in the URL.

    Speaks RESP over a plain TCP socket: ``AUTH`` when the URL has a password (with the user
    name when it has one), ``SELECT`` when the db is not 0, then ``LPUSH huey.redis.<name>``,
    all sent in one write; then one reply per command is read.

    Args:
        url: ``redis://[[user]:password@]host[:port][/db]``; host defaults to 127.0.0.1, port
            to 6379, db to 0. Percent-escapes in the user name and password are decoded.
        data: The message bytes from :func:`encode_message`.
        name: Huey's queue name; the list key is ``huey.redis.<name>``, as RedisStorage has it.
        timeout: Seconds allowed for the connect and for each socket read.

    Raises:
        ConnectionError: Redis closed the connection or answered with an error (a wrong
            password, a bad db number).
        OSError: The connection could not be made, or a reply did not arrive within
            ``timeout`` (``TimeoutError``).
    """
    import socket  # only the Redis deployment pays for these imports
    from urllib.parse import unquote, urlparse

    parsed = urlparse(url)
    host = parsed.hostname or "127.0.0.1"
    port = parsed.port or 6379
    db = (parsed.path or "/0").lstrip("/") or "0"
    with socket.create_connection((host, port), timeout=timeout) as sock:
        commands = []
        if parsed.password:
            user = unquote(parsed.username) if parsed.username else None
            pw = unquote(parsed.password)
            commands.append(
                _resp(b"AUTH", user.encode(), pw.encode()) if user else _resp(b"AUTH", pw.encode())
            )
        if db != "0":
            commands.append(_resp(b"SELECT", db.encode()))
        commands.append(_resp(b"LPUSH", f"huey.redis.{name}".encode(), data))
        sock.sendall(b"".join(commands))
        for _ in commands:
            _read_reply(sock)


def enqueue(queue_url: str, task_name: str, args: tuple, kwargs: dict | None = None) -> None:
    """Encode one task call and push it onto the queue ``queue_url`` names.

    Args:
        queue_url: ``sqlite:///PATH`` or ``redis://...`` (see :func:`push_redis`): the same
            URL the consumers read from ``REFLECT_QUEUE_URL``.
        task_name: Huey's name of the task, e.g. ``reflect_jobs.tasks.capture``.
        args: Positional arguments of the task call.
        kwargs: Keyword arguments of the call; ``None`` means none.

    Raises:
        ValueError: ``rediss://`` (TLS is not spoken here), ``unix://`` or any other scheme.
        sqlite3.Error: The SQLite push failed (see :func:`push_sqlite`).
        OSError: The Redis push failed (see :func:`push_redis`).
    """
    data = encode_message(task_name, args, kwargs)
    if queue_url.startswith("sqlite:///"):
        push_sqlite(queue_url[len("sqlite:///") :], data)
    elif queue_url.startswith(("redis://", "rediss://")):
        if queue_url.startswith("rediss://"):
            raise ValueError("rediss:// (TLS) is not supported on the hook fast path")
        push_redis(queue_url, data)
    else:
        raise ValueError(f"unsupported queue URL {queue_url!r}")
