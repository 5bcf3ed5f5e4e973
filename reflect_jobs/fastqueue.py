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
import time

from reflect_jobs.perms import private_file

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the hook imports this module, stdlib-cheap
if TYPE_CHECKING:
    import socket
    from typing import Any

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


def encode_message(
    task_name: str,
    args: tuple,
    kwargs: dict | None = None,
    *,
    retries: int = 0,
    retry_delay: int = 0,
) -> bytes:
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
        retries: How many times Huey re-runs the task after it raised (Huey takes this from
            the message, not from the task's decorator).
        retry_delay: Seconds Huey waits before each retry.

    Returns:
        The message bytes: a fresh random id, no ETA, no priority; ready for
        :func:`push_sqlite` or :func:`push_redis`.
    """
    fields = (
        _uuid4(),
        task_name,
        None,
        int(retries),
        int(retry_delay),
        None,
        tuple(args),
        dict(kwargs or {}),
    )
    inner = pickle.dumps(fields, protocol=2)
    assert inner[:2] == b"\x80\x02" and inner[-1:] == b"."
    return b"\x80\x02chuey.registry\nMessage\n" + inner[2:-1] + b"R."


def push_sqlite(path: str, data: bytes, *, name: str = QUEUE_NAME, timeout: float = 5.0) -> None:
    """INSERT one message into Huey's ``task`` table in the SQLite queue file ``path``.

    If the table does not exist yet (the hook ran before any consumer started), the file is
    switched to WAL and given Huey's own DDL, then the insert is retried, so the file a
    consumer later opens is one Huey itself could have made.

    ``timeout`` is one budget for the whole push, not per statement: before each statement
    the busy timeout is set to what is left of it, so a locked queue costs the hook at most
    ``timeout`` seconds (the hook then falls back to the spool, ARCHITECTURE §2.3).

    Args:
        path: Filesystem path of the queue database (what follows ``sqlite:///``). The file
            is created (0600) if missing; its directory must exist.
        data: The message bytes from :func:`encode_message`.
        name: Huey's queue name (the ``queue`` column); a consumer reads only its own name.
        timeout: Seconds, in total, to wait for locks held by a consumer or another hook.

    Raises:
        sqlite3.Error: The database stayed locked past ``timeout``, cannot be opened, or is
            not a Huey queue file.
    """
    if not os.path.exists(path):
        private_file(path)  # 0600 before SQLite creates it (its -wal/-shm copy the mode)
    deadline = time.monotonic() + timeout
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)

    def run(sql: str, params: tuple = ()) -> None:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            raise sqlite3.OperationalError(f"database is locked ({timeout:g} s budget spent)")
        conn.execute(f"pragma busy_timeout={left_ms}")
        conn.execute(sql, params)

    insert = "insert into task (queue, data, priority) values (?, ?, ?)"
    try:
        try:
            run(insert, (name, memoryview(data), 0))
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            run('pragma journal_mode="wal"')
            run(TASK_TABLE_DDL)
            run(TASK_INDEX_DDL)
            run(insert, (name, memoryview(data), 0))
    finally:
        conn.close()


def _resp(*parts: bytes) -> bytes:
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(part), part))
    return b"".join(out)


def read_replies(sock: socket.socket, count: int, deadline: float) -> list[bytes]:
    """Read ``count`` single-line RESP replies from ``sock``, in order.

    Pipelined replies often arrive in one segment (``+OK\\r\\n:1\\r\\n``), so the bytes
    received are split into lines and kept across replies. (The reader before this one
    read a segment per reply and threw the rest away, then waited for a second segment
    that never came: every hook on a Redis URL with a password or a db other than 0 took
    the whole timeout and lost its capture.)

    Args:
        sock: A connected socket the commands were written to.
        count: How many replies to read (one per pipelined command).
        deadline: ``time.monotonic()`` value by which all replies must have arrived.

    Returns:
        The reply lines without their CRLF (only ``+``/``:`` replies; our commands
        answer nothing else).

    Raises:
        ConnectionError: Redis closed the connection or answered a command with an error;
            the message names the first error.
        TimeoutError: The replies did not all arrive by ``deadline``.
    """
    buf = b""
    lines: list[bytes] = []
    while len(lines) < count:
        while b"\r\n" in buf and len(lines) < count:
            line, buf = buf.split(b"\r\n", 1)
            lines.append(line)
        if len(lines) >= count:
            break
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"redis sent {len(lines)} of {count} replies in time")
        sock.settimeout(left)
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("redis closed the connection")
        buf += chunk
    for line in lines:
        if line.startswith(b"-"):
            raise ConnectionError(f"redis error: {line[1:].strip().decode(errors='replace')}")
    return lines


def push_redis(url: str, data: bytes, *, name: str = QUEUE_NAME, timeout: float = 3.0) -> None:
    """LPUSH onto RedisStorage's list key, honouring password and db number in the URL.

    Speaks RESP over a plain TCP socket: ``AUTH`` when the URL has a password (with the user
    name when it has one), ``SELECT`` when the db is not 0, then ``LPUSH huey.redis.<name>``,
    all sent in one write; then one reply per command is read (:func:`read_replies`).

    Args:
        url: ``redis://[[user]:password@]host[:port][/db]``; host defaults to 127.0.0.1, port
            to 6379, db to 0. Percent-escapes in the user name and password are decoded.
        data: The message bytes from :func:`encode_message`.
        name: Huey's queue name; the list key is ``huey.redis.<name>``, as RedisStorage has it.
        timeout: Seconds allowed for the whole push: the connect and every reply.

    Raises:
        ConnectionError: Redis closed the connection or answered with an error (a wrong
            password, a bad db number).
        OSError: The connection could not be made, or the replies did not arrive within
            ``timeout`` (``TimeoutError``).
    """
    import socket  # only the Redis deployment pays for these imports
    from urllib.parse import unquote, urlparse

    deadline = time.monotonic() + timeout
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
        read_replies(sock, len(commands), deadline)


def enqueue(
    queue_url: str,
    task_name: str,
    args: tuple,
    kwargs: dict | None = None,
    *,
    timeout: float | None = None,
    retries: int = 0,
    retry_delay: int = 0,
) -> None:
    """Encode one task call and push it onto the queue ``queue_url`` names.

    Args:
        queue_url: ``sqlite:///PATH`` or ``redis://...`` (see :func:`push_redis`): the same
            URL the consumers read from ``REFLECT_QUEUE_URL``.
        task_name: Huey's name of the task, e.g. ``reflect_jobs.tasks.capture``.
        args: Positional arguments of the task call.
        kwargs: Keyword arguments of the call; ``None`` means none.
        timeout: Seconds the whole push may take; ``None`` keeps each store's default
            (5 s SQLite, 3 s Redis). The hook passes a fraction of a second.
        retries: Huey retries of the task if it raises (see :func:`encode_message`).
        retry_delay: Seconds between those retries.

    Raises:
        ValueError: ``rediss://`` (TLS is not spoken here), ``unix://`` or any other scheme.
        sqlite3.Error: The SQLite push failed (see :func:`push_sqlite`).
        OSError: The Redis push failed (see :func:`push_redis`).
    """
    data = encode_message(task_name, args, kwargs, retries=retries, retry_delay=retry_delay)
    extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    if queue_url.startswith("sqlite:///"):
        push_sqlite(queue_url[len("sqlite:///") :], data, **extra)
    elif queue_url.startswith(("redis://", "rediss://")):
        if queue_url.startswith("rediss://"):
            raise ValueError("rediss:// (TLS) is not supported on the hook fast path")
        push_redis(queue_url, data, **extra)
    else:
        raise ValueError(f"unsupported queue URL {queue_url!r}")
