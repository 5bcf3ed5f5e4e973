"""The capture spool: one small private file per hook capture, until its job row commits.

Why (ARCHITECTURE §1, §2.3): Huey's transport is at-most-once. A SQLite dequeue deletes the
message, so a worker killed between taking a capture and committing its job row took the
capture with it; a queue store that is down or locked past the hook's time budget made the
hook drop it. So the hook writes the capture here *first* (``$REFLECT_HOME/spool/``, a 0700
directory, one 0600 file per capture, created with ``O_EXCL`` under a temporary name and
renamed into place so a reader never sees half a file), then pushes the queue message with
the entry's id. The capture stage deletes the entry only after the job row committed; the
consumer's recovery turns every entry still here into a capture (the ledger remembers each
entry id it recorded, so an entry recorded twice — by its message and by recovery — counts
once).

Standard library only: the hook imports this on every agent turn. The entry is not
fsynced (that alone would cost more than the whole hook): it survives the death of any
process, the hook's included, but not a power cut within the kernel's writeback delay.
"""

from __future__ import annotations

import json
import os
import time

SPOOL_DIRNAME = "spool"
SUFFIX = ".json"
BAD_SUFFIX = ".bad"
_TMP_PREFIX = ".tmp-"
_ID_CHARS = frozenset("0123456789abcdef-")
FIELDS = ("harness", "session_id", "transcript_path", "event")


def spool_dir(home: str) -> str:
    """The spool directory under a state directory.

    Args:
        home: ``$REFLECT_HOME`` (see :func:`reflect_jobs.envpaths.home_dir_str`).

    Returns:
        ``<home>/spool`` (not created).
    """
    return os.path.join(home, SPOOL_DIRNAME)


def valid_id(entry_id: object) -> bool:
    """Whether ``entry_id`` has the shape :func:`new_id` makes (digits, hex and dashes).

    Ids reach the capture task inside queue messages and the ledger's event details, so
    anything else (a path separator, a LIKE wildcard) is refused rather than trusted.

    Args:
        entry_id: The candidate id.

    Returns:
        True for a non-empty string of at most 64 characters from ``0-9a-f-``.
    """
    return (
        isinstance(entry_id, str)
        and 0 < len(entry_id) <= 64
        and all(c in _ID_CHARS for c in entry_id)
    )


def new_id() -> str:
    """A fresh entry id: nanosecond wall time first (so names sort by capture), then random.

    Returns:
        ``<20-digit time_ns>-<12 hex digits>``.
    """
    return f"{time.time_ns():020d}-{os.urandom(6).hex()}"


def append(
    home: str,
    *,
    harness: str,
    session_id: str,
    transcript_path: str,
    event: str,
    hook_ts: float,
    cwd: str | None = None,
) -> str:
    """Write one capture to the spool and return its id.

    The file is created with ``O_CREAT | O_EXCL`` and mode 0600 under a temporary name and
    renamed to ``<id>.json``, so a concurrent reader sees either nothing or the whole
    entry, and two hooks can never write the same file.

    Args:
        home: ``$REFLECT_HOME``; ``spool/`` is created under it (0700) when missing.
        harness: The harness name (``claude``, ``codex``, ``copilot``).
        session_id: The harness's session id.
        transcript_path: The transcript file (absolute).
        event: The hook event that fired.
        hook_ts: When the hook ran (``time.time()``).
        cwd: The session's working directory from the payload (None: none given).

    Returns:
        The entry id (see :func:`new_id`), to be carried by the queue message.

    Raises:
        OSError: The directory or the file cannot be written (read-only home, full disk).
    """
    directory = spool_dir(home)
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        # A first capture on a new home: the many hooks of a storm all get here at once, and
        # the spool another one created in between is as good as ours (exist_ok).
        os.makedirs(directory, 0o700, exist_ok=True)
    entry_id = new_id()
    body = json.dumps(
        {
            "id": entry_id,
            "harness": harness,
            "session_id": session_id,
            "transcript_path": transcript_path,
            "event": event,
            "hook_ts": hook_ts,
            **({"cwd": cwd} if cwd else {}),
        }
    ).encode("utf-8")
    tmp = os.path.join(directory, _TMP_PREFIX + entry_id)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, body)
    finally:
        os.close(fd)
    os.rename(tmp, os.path.join(directory, entry_id + SUFFIX))
    return entry_id


def entry_path(home: str, entry_id: str) -> str:
    """Where the entry ``entry_id`` lives.

    Args:
        home: ``$REFLECT_HOME``.
        entry_id: An id from :func:`append` (checked with :func:`valid_id`).

    Returns:
        ``<home>/spool/<id>.json``.

    Raises:
        ValueError: ``entry_id`` is not a spool id.
    """
    if not valid_id(entry_id):
        raise ValueError(f"not a spool id: {entry_id!r}")
    return os.path.join(spool_dir(home), entry_id + SUFFIX)


def entry_ids(home: str, *, min_age_sec: float = 0.0, now: float | None = None) -> list[str]:
    """The ids of the entries waiting in the spool, oldest capture first.

    Args:
        home: ``$REFLECT_HOME``.
        min_age_sec: Leave out entries written less than this many seconds ago (their
            queue message is most likely about to be consumed anyway).
        now: The current time for the age test (default ``time.time()``).

    Returns:
        Sorted ids; an empty list when there is no spool directory.
    """
    try:
        names = os.listdir(spool_dir(home))
    except FileNotFoundError:
        return []
    ids = sorted(n[: -len(SUFFIX)] for n in names if n.endswith(SUFFIX))
    ids = [i for i in ids if valid_id(i)]
    if min_age_sec <= 0:
        return ids
    cutoff = (time.time() if now is None else now) - min_age_sec
    kept = []
    for i in ids:
        try:
            if os.stat(entry_path(home, i)).st_mtime <= cutoff:
                kept.append(i)
        except FileNotFoundError:
            continue  # consumed while we looked
    return kept


def read_entry(home: str, entry_id: str) -> dict | None:
    """Load and check one entry.

    Args:
        home: ``$REFLECT_HOME``.
        entry_id: The entry's id.

    Returns:
        ``{"id", "harness", "session_id", "transcript_path", "event", "hook_ts", "cwd"}``
        with string fields, ``hook_ts`` a number or ``None`` and ``cwd`` a string or
        ``None`` (entries written before it existed have none); ``None`` when the entry is
        gone (another consumer recorded it meanwhile).

    Raises:
        ValueError: The file is not a well-formed entry (not a regular file — a FIFO
            would block recovery — not JSON, a field missing or of the wrong type, an id
            that does not match its name).
    """
    from reflect_jobs.fsio import NotRegularFile, open_regular  # worker side: not the hook's

    try:
        with open_regular(entry_path(home, entry_id)) as fh:
            raw = fh.read(1 << 16)
    except FileNotFoundError:
        return None
    except NotRegularFile:
        raise ValueError(f"spool entry {entry_id} is not a regular file") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"spool entry {entry_id} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"spool entry {entry_id} is not a JSON object")
    for key in FIELDS:
        if not isinstance(data.get(key), str) or not data[key]:
            raise ValueError(f"spool entry {entry_id} has no valid {key!r}")
    ts = data.get("hook_ts")
    if isinstance(ts, bool) or not isinstance(ts, int | float | None):
        raise ValueError(f"spool entry {entry_id} has a bad 'hook_ts'")
    if data.get("id", entry_id) != entry_id:
        raise ValueError(f"spool entry {entry_id} names another id")
    cwd = data.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ValueError(f"spool entry {entry_id} has a bad 'cwd'")
    return {"id": entry_id, **{k: data[k] for k in FIELDS}, "hook_ts": ts, "cwd": cwd or None}


def delete(home: str, entry_id: str) -> bool:
    """Remove an entry whose capture is committed in the ledger.

    Args:
        home: ``$REFLECT_HOME``.
        entry_id: The entry's id; an invalid id deletes nothing.

    Returns:
        True when this call removed it; False when it was already gone (or the id invalid).
    """
    if not valid_id(entry_id):
        return False
    try:
        os.unlink(entry_path(home, entry_id))
    except FileNotFoundError:
        return False
    return True


def set_aside(home: str, entry_id: str) -> str:
    """Rename a malformed entry to ``<id>.bad`` so recovery stops retrying it; nothing is lost.

    Args:
        home: ``$REFLECT_HOME``.
        entry_id: The entry's id.

    Returns:
        The new path (kept for a person to inspect).

    Raises:
        OSError: The rename failed.
    """
    src = entry_path(home, entry_id)
    dst = src[: -len(SUFFIX)] + BAD_SUFFIX
    os.replace(src, dst)
    return dst


def adopt_stale_temps(home: str, *, min_age_sec: float = 60.0, now: float | None = None) -> int:
    """Finish the writes of hooks killed between writing an entry and renaming it into place.

    A temporary file older than ``min_age_sec`` whose content is a whole entry becomes
    ``<id>.json`` (its capture is recovered: the hook died before it pushed the message); a
    partial one is removed (that hook pushed nothing either, so nothing refers to it).

    Args:
        home: ``$REFLECT_HOME``.
        min_age_sec: Leave younger temporary files alone: their hook may still be writing.
        now: The current time for the age test (default ``time.time()``).

    Returns:
        How many entries were adopted.
    """
    from reflect_jobs.fsio import open_regular  # worker side: not the hook's

    directory = spool_dir(home)
    try:
        names = [n for n in os.listdir(directory) if n.startswith(_TMP_PREFIX)]
    except FileNotFoundError:
        return 0
    cutoff = (time.time() if now is None else now) - min_age_sec
    adopted = 0
    for name in names:
        entry_id = name[len(_TMP_PREFIX) :]
        tmp = os.path.join(directory, name)
        try:
            if not valid_id(entry_id) or os.stat(tmp).st_mtime > cutoff:
                continue
            with open_regular(tmp) as fh:  # a FIFO never blocks recovery
                data = json.loads(fh.read(1 << 16).decode("utf-8"))
            whole = isinstance(data, dict) and all(isinstance(data.get(k), str) for k in FIELDS)
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError, ValueError):
            whole = False
        try:
            if whole:
                os.rename(tmp, os.path.join(directory, entry_id + SUFFIX))
                adopted += 1
            else:
                os.unlink(tmp)
        except FileNotFoundError:
            continue
    return adopted
