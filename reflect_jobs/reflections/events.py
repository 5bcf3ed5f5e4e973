"""The event lines of the reflection logs: schema, validation, redaction, and the append.

One change to one item is one JSON object on one line of ``reflections/<host>.jsonl``
(docs/REFLECTIONS.md is the contract; other tools read it). A machine appends only to its own
host's file, so a git sync never has to merge a log, and a log is never rewritten: the items
are the fold of every line of every host file (:mod:`.fold`).

The append is one ``os.write`` of the whole line on an ``O_APPEND`` descriptor, so two
processes on one machine cannot interleave inside a line, and a reader that meets a last
line without its newline (a writer killed mid-write) ignores it until it is complete. Every
string of the event is passed through :func:`reflect_jobs.cascade.secrets.redact_secrets`
before the line is built: a log is synced to other machines and never rewritten, so a
secret that reached it could never be taken back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

VERSION = 1
ACTIONABLE = ("action", "question", "handoff")
KNOWLEDGE = ("learning", "decision", "gotcha", "idea", "note")
KINDS = (*ACTIONABLE, *KNOWLEDGE, "summary")
AUTHORS = ("reflector", "person", "skill")
OPS = ("add", "edit", "done", "drop", "reopen")
MAX_TITLE = 300
MAX_TEXT = 64 * 1024
#: A log line longer than this (bytes, newline included) is refused by the writer and
#: skipped (and counted) by every reader without being held: a synced log cannot make a
#: reader hold or index an arbitrarily large line.
MAX_LINE_BYTES = 64 * 1024
_HEX = re.compile(r"^[0-9a-f]{16}$")
_HOST_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")

__all__ = [
    "ACTIONABLE",
    "AUTHORS",
    "KINDS",
    "KNOWLEDGE",
    "MAX_LINE_BYTES",
    "OPS",
    "EventError",
    "append_event",
    "format_ts",
    "host_name",
    "make_event",
    "new_hex",
    "parse_line",
    "parse_ts",
    "redact_text",
    "validate",
]


class EventError(ValueError):
    """An event (from the command line or a log line) breaks the schema; the text says how."""


def format_ts(when: datetime) -> str:
    """The one timestamp form of the logs: UTC, microseconds, ``Z`` (sorts as text).

    Args:
        when: An aware datetime (a naive one is taken as UTC).

    Returns:
        E.g. ``2026-12-01T21:50:00.123456Z``.
    """
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_ts(raw: Any) -> datetime:
    """Read a timestamp another tool may have written in any ISO 8601 form.

    Args:
        raw: The ``ts`` value of a line.

    Returns:
        The aware UTC datetime (a value without an offset is taken as UTC).

    Raises:
        EventError: It is not an ISO 8601 string.
    """
    if not isinstance(raw, str):
        raise EventError("ts must be an ISO 8601 string")
    try:
        when = datetime.fromisoformat(raw.strip())
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    except (ValueError, OverflowError):  # not a date, or one an offset moves out of range
        raise EventError(f"ts is not ISO 8601: {raw[:40]!r}") from None


def host_name(environ: dict[str, str] | None = None) -> str:
    """This machine's log name: ``$REFLECT_HOST``, else the short hostname, made file-safe.

    Args:
        environ: The environment; ``None`` means ``os.environ``.

    Returns:
        A non-empty name of ``[A-Za-z0-9._-]`` (``host`` when nothing usable is left).
    """
    from reflect_jobs.envpaths import environ as merged_environ

    env = merged_environ(environ)
    raw = (env.get("REFLECT_HOST") or "").strip() or socket.gethostname().split(".")[0]
    safe = _HOST_UNSAFE.sub("-", raw).strip(".-")[:64]
    return safe or "host"


def new_hex(*parts: str) -> str:
    """16 hex digits from a hash of ``parts`` and 16 random bytes (uids and event ids).

    Args:
        *parts: What makes the value meaningful (host, time, title); the random bytes make
            two equal calls differ.

    Returns:
        16 lowercase hex digits.
    """
    h = hashlib.sha256("\x1f".join(parts).encode("utf-8", "replace"))
    h.update(secrets.token_bytes(16))
    return h.hexdigest()[:16]


def redact_text(value: str) -> str:
    """``value`` with every credential replaced, as it will be stored.

    Args:
        value: Any text of an event.

    Returns:
        The text after :func:`reflect_jobs.cascade.secrets.redact_secrets`.
    """
    # Imported here: loading the cascade package costs ~40 ms, and only writes need it
    # (``reflections context`` at a session start reads).
    from reflect_jobs.cascade.secrets import redact_secrets

    return redact_secrets(value)[0]


_redacted = redact_text


def _text(obj: dict[str, Any], key: str, *, limit: int | None = MAX_TEXT) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise EventError(f"{key} must be a string")
    if limit is not None and len(value) > limit:
        raise EventError(f"{key} is longer than {limit} characters")
    return value


def validate(obj: Any, *, strict: bool = True) -> dict[str, Any]:
    """Check one event against the schema and return its normalised form.

    Unknown keys are dropped (a newer writer may add some); a missing ``by`` reads as
    ``person``. A reader is lenient about sizes only (``strict=False``: a long title is cut,
    a long text kept), so a line another tool wrote is not lost for being long; everything
    else is checked alike on both sides, so nothing the CLI writes can be refused by a reader.

    Args:
        obj: The decoded JSON object.
        strict: Refuse titles over :data:`MAX_TITLE` and texts over :data:`MAX_TEXT`
            characters (writing); ``False`` when reading a log.

    Returns:
        A new dict with ``v``, ``eid``, ``ts`` (canonical form), ``host``, ``op``, ``uid``,
        ``by`` and the op's fields (``kind``, ``title``, ``body``, ``session``, ``note``,
        ``id``) where present.

    Raises:
        EventError: A required field is missing or has the wrong shape.
    """
    if not isinstance(obj, dict):
        raise EventError("an event is a JSON object")
    if obj.get("v") != VERSION:
        raise EventError(f"unsupported event version {obj.get('v')!r}")
    op = obj.get("op")
    if op not in OPS:
        raise EventError(f"unknown op {op!r}")
    out: dict[str, Any] = {"v": VERSION, "op": op}
    for key in ("eid", "uid"):
        value = obj.get(key)
        if not isinstance(value, str) or not _HEX.match(value):
            raise EventError(f"{key} must be 16 lowercase hex digits")
        out[key] = value
    out["ts"] = format_ts(parse_ts(obj.get("ts")))
    host = obj.get("host")
    if not isinstance(host, str) or not host.strip():
        raise EventError("host must be a non-empty string")
    out["host"] = host
    by = obj.get("by", "person")
    if by not in AUTHORS:
        raise EventError(f"by must be one of {', '.join(AUTHORS)}")
    out["by"] = by
    title = _text(obj, "title", limit=MAX_TITLE if strict else None)
    if title is not None:
        title = " ".join(title.split())[:MAX_TITLE]
        if not title:
            raise EventError("title must not be empty")
        out["title"] = title
    for key in ("body", "note", "session", "id"):
        value = _text(obj, key, limit=MAX_TEXT if strict else None)
        if value is not None:
            out[key] = value
    if op == "add":
        if obj.get("kind") not in KINDS:
            raise EventError(f"kind must be one of {', '.join(KINDS)}")
        out["kind"] = obj["kind"]
        if "title" not in out:
            raise EventError("add needs a title")
    elif op == "edit" and "title" not in out and "body" not in out:
        raise EventError("edit needs a title or a body")
    elif op in ("done", "drop") and not (out.get("note") or "").strip():
        raise EventError(f"{op} needs a note (the evidence)")
    return out


def parse_line(line: str) -> dict[str, Any]:
    """Decode and validate one log line.

    Args:
        line: One line of a host log, without its newline.

    Returns:
        The normalised event (see :func:`validate`).

    Raises:
        EventError: Not JSON, or not a valid event.
    """
    try:
        obj = json.loads(line)
    except ValueError:
        raise EventError("not a JSON line") from None
    return validate(obj, strict=False)


def make_event(
    op: str,
    uid: str,
    *,
    host: str,
    by: str,
    now: datetime | None = None,
    **fields: str | None,
) -> dict[str, Any]:
    """Build a new, redacted, validated event.

    Args:
        op: One of :data:`OPS`.
        uid: The item's 16-hex uid.
        host: The writing machine (:func:`host_name`).
        by: Who writes it, one of :data:`AUTHORS`.
        now: The event's time; ``None`` for the current time.
        **fields: ``kind``, ``title``, ``body``, ``note``, ``session``, ``id``; ``None``
            values are left out.

    Returns:
        The event as :func:`validate` returns it, every string already redacted.

    Raises:
        EventError: The event breaks the schema (nothing is written).
    """
    ts = format_ts(now or datetime.now(UTC))
    raw: dict[str, Any] = {"v": VERSION, "eid": new_hex(host, ts, op, uid), "ts": ts}
    raw.update(host=_redacted(host), op=op, uid=uid, by=by)
    for key, value in fields.items():
        if value is not None:
            raw[key] = value if key == "kind" else _redacted(value)
    return validate(raw)


def _mkdirs(path: Path) -> None:
    """Create ``path`` and missing parents 0700; existing directories keep their mode."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            d.mkdir(mode=0o700)


def append_event(log: Path, event: dict[str, Any]) -> None:
    """Append ``event`` to ``log`` as one line, in one ``write``, and fsync it.

    The file is created 0600 (and its missing directories 0700). The line is redacted once
    more as a whole before it is written, so no field can carry a secret past this point.

    Args:
        log: The host log, ``<memory home>/reflections/<host>.jsonl``.
        event: A validated event (:func:`make_event`).

    Raises:
        EventError: The event does not validate, or its line is longer than
            :data:`MAX_LINE_BYTES` (nothing is written).
        OSError: The directory or the file could not be written.
    """
    line = json.dumps(validate(event), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    cleaned = _redacted(line)
    if cleaned != line:  # a secret only visible across fields: keep the line if it still parses
        validate(json.loads(cleaned))
        line = cleaned
    data = (line + "\n").encode("utf-8")
    if len(data) > MAX_LINE_BYTES:
        raise EventError(
            f"the event is {len(data)} bytes as a log line; at most {MAX_LINE_BYTES} (shorten the text)"
        )
    _mkdirs(log.parent)
    # O_NOFOLLOW: a log that is a symbolic link (a synced memory home can carry one to
    # ~/.bashrc) is refused, never appended to.
    fd = os.open(log, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            # a writer died mid-line: end that torn line so it cannot swallow this one
            data = b"\n" + data
        written = os.write(fd, data)
        if written != len(data):  # a regular file takes it whole; a short write is a full disk
            raise OSError(f"short write to {log} ({written} of {len(data)} bytes)")
        os.fsync(fd)
    finally:
        os.close(fd)
