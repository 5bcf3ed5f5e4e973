"""What each session was told: ``$REFLECT_HOME/recall-log.jsonl`` (0600, stdlib only).

The recall hook appends one JSON line per answered event (ARCHITECTURE §13.2):
``{"ts", "session", "harness", "event", "cwd", "learnings": [ids], "items": [ids],
"withheld": [ids], "chars", "tokens"}``. One ``O_APPEND`` write of one line, no lock and no
read, so it costs the hook a few microseconds; lines of concurrent hooks never interleave
(a single ``write`` under ``PIPE_BUF``-free append semantics on a local file system; a
line is at most :data:`MAX_LINE` bytes, id lists cut to fit). ``reflect-jobs recall-log``
reads it back, newest last, from at most :data:`READ_BYTES` at its end.
"""

from __future__ import annotations

import json
import os

FILE_NAME = "recall-log.jsonl"
#: A record is cut to this many bytes (its id lists first) so one write stays one line.
MAX_LINE = 16_384
#: ``recall-log`` reads at most this much of the file's end.
READ_BYTES = 8 * 1024 * 1024


def log_path(home: str) -> str:
    """Where a home's recall log lives.

    Args:
        home: ``$REFLECT_HOME``.

    Returns:
        ``<home>/recall-log.jsonl``.
    """
    return os.path.join(home, FILE_NAME)


def append(home: str, record: dict) -> None:
    """Append one record (created 0600 in a 0700 home when missing).

    Args:
        home: ``$REFLECT_HOME``.
        record: JSON-able values; the id lists are cut until the line fits :data:`MAX_LINE`.

    Raises:
        OSError: The home or the file cannot be written (the hook logs it).
    """
    rec = dict(record)
    line = json.dumps(rec, ensure_ascii=False, separators=(",", ":"))
    while len(line.encode("utf-8")) > MAX_LINE:
        longest = max(("learnings", "items", "withheld"), key=lambda k: len(rec.get(k) or []))
        if not rec.get(longest):
            rec["cwd"] = str(rec.get("cwd") or "")[:200]
            line = json.dumps(rec, ensure_ascii=False, separators=(",", ":"))[:MAX_LINE]
            break
        rec[longest] = rec[longest][: len(rec[longest]) // 2]
        rec["cut"] = True
        line = json.dumps(rec, ensure_ascii=False, separators=(",", ":"))
    os.makedirs(home, mode=0o700, exist_ok=True)
    fd = os.open(log_path(home), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def read(home: str, *, session: str | None = None) -> list[dict]:
    """The records, oldest first, from the last :data:`READ_BYTES` of the log.

    Args:
        home: ``$REFLECT_HOME``.
        session: Only this session's records.

    Returns:
        The records (a damaged line is skipped); ``[]`` when there is no log.
    """
    path = log_path(home)
    try:
        fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        )
    except FileNotFoundError:
        return []
    try:
        import stat

        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return []
        start = max(st.st_size - READ_BYTES, 0)
        os.lseek(fd, start, os.SEEK_SET)
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    lines = b"".join(chunks).split(b"\n")
    if start:
        lines = lines[1:]  # the first is cut
    out = []
    for raw in lines:
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if isinstance(rec, dict) and (session is None or rec.get("session") == session):
            out.append(rec)
    return out
