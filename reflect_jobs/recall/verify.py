"""Verify before telling: does the code a learning names still exist? (stdlib only, $0).

A learning carries ``anchors: [{path, symbol?}]`` — the files (and the symbol in each) its
evidence named when it was written (``kb/anchors.py``, ARCHITECTURE §7). Before the
SessionStart block tells it, each anchor is checked against the session's working tree
(ARCHITECTURE §13.2):

* the path exists and *stays inside the repository*: it is resolved under the root and a
  symlink whose target leaves the repository counts as gone (its target is never read);
  a FIFO, socket or device counts as gone too (never opened);
* the symbol still occurs in that file as a whole identifier, by a **bounded read**
  (:data:`READ_CAP_BYTES` at most, in chunks; a 2 GB file is never read whole): a file
  larger than the cap whose first bytes lack the symbol is *unchecked*, not gone.

The verdict of a learning: ``ok`` (every anchor holds), ``partial`` (some path or symbol is
gone: told, marked ``(unverified: X gone)``), ``stale`` (every anchored path is gone:
withheld), ``unanchored`` (nothing to check: told as before), and ``unverified`` (the check
ran out of time: told, marked). A symbol's presence is cached per file by ``(mtime_ns,
size)`` (:mod:`reflect_jobs.recall.verify_store`), so a session start re-reads only files
that changed; a path's existence is a ``stat`` every time (that *is* the freshness check).

Time: a working tree on a network mount that hangs must never hold the hook. The checks run
in one background thread; the caller waits at most :data:`PER_VERIFY_SEC` for each learning
and :data:`TOTAL_SEC` for all; on timeout that learning and every later one is told
``unverified`` and the stuck thread is abandoned (a daemon: it does not delay the exit).
"""

from __future__ import annotations

import json
import os
import stat
import time

OK = "ok"
PARTIAL = "partial"
STALE = "stale"
UNANCHORED = "unanchored"
UNVERIFIED = "unverified"
VERDICTS = (OK, PARTIAL, STALE, UNANCHORED)

#: At most this much of one file is read to find a symbol (a 2 GB file: 4 MiB, never more).
READ_CAP_BYTES = 4 * 1024 * 1024
_CHUNK = 256 * 1024
#: Seconds the hook waits for one learning's check, and for all of them together.
PER_VERIFY_SEC = 0.2
TOTAL_SEC = 0.5
#: At most this many anchors of one learning are checked (``kb/render.py:MAX_ANCHORS``).
MAX_ANCHORS = 10
_MAX_TOKEN = 200
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")

#: What a cached symbol lookup says: found, not in the file, or beyond the read cap.
FOUND, ABSENT, UNCHECKED = 1, 0, 2


class Verdict:
    """One learning's verdict and what is missing (``path`` or ``symbol in path``)."""

    __slots__ = ("missing", "status", "unchecked")

    def __init__(
        self, status: str, missing: list[str] | None = None, unchecked: list[str] | None = None
    ) -> None:
        """Hold the values.

        Args:
            status: One of :data:`VERDICTS` or :data:`UNVERIFIED`.
            missing: The anchors found gone, as people read them.
            unchecked: Symbols that could not be looked for within the read cap.
        """
        self.status = status
        self.missing = list(missing or [])
        self.unchecked = list(unchecked or [])

    @property
    def told(self) -> bool:
        """Whether a learning with this verdict may be told (everything but ``stale``)."""
        return self.status != STALE

    def mark(self) -> str:
        """The short mark the block adds to the learning's line (``""`` for none).

        Returns:
            ``(unverified: a.py gone)`` for a partial verdict, ``(unverified: check timed
            out)`` for a timed-out one, else ``""``.
        """
        if self.status == PARTIAL:
            return f"(unverified: {', '.join(self.missing[:3])} gone)"
        if self.status == UNVERIFIED:
            return "(unverified: check timed out)"
        return ""

    def as_dict(self) -> dict:
        """The ``verify --json`` form: ``{"verdict", "missing", "unchecked"}``.

        Returns:
            The mapping.
        """
        return {"verdict": self.status, "missing": self.missing, "unchecked": self.unchecked}

    def __repr__(self) -> str:
        return f"Verdict({self.status!r}, {self.missing!r})"


class MemoryCache:
    """A symbol-presence cache in a dict (tests, ``verify`` without a home)."""

    def __init__(self) -> None:
        """Start empty."""
        self.data: dict[tuple[str, str, str], tuple[int, int, int]] = {}

    def get(self, root: str, rel: str, symbol: str, mtime_ns: int, size: int) -> int | None:
        """The cached answer for this file version, or ``None``.

        Args:
            root: The repository's real root.
            rel: The anchor's path under it.
            symbol: The symbol looked for.
            mtime_ns: The file's modification time now.
            size: Its size now.

        Returns:
            :data:`FOUND`, :data:`ABSENT` or :data:`UNCHECKED`; ``None`` when not cached or
            the file changed since.
        """
        hit = self.data.get((root, rel, symbol))
        if hit is None or hit[0] != mtime_ns or hit[1] != size:
            return None
        return hit[2]

    def put(self, root: str, rel: str, symbol: str, mtime_ns: int, size: int, found: int) -> None:
        """Remember an answer for this file version (see :meth:`get`).

        Args:
            root: The repository's real root.
            rel: The anchor's path under it.
            symbol: The symbol looked for.
            mtime_ns: The file's modification time when read.
            size: Its size when read.
            found: :data:`FOUND`, :data:`ABSENT` or :data:`UNCHECKED`.
        """
        self.data[(root, rel, symbol)] = (mtime_ns, size, found)


def safe_relpath(token: object) -> str | None:
    """``token`` as a repository-relative path, or ``None`` when it must not be touched.

    The one rule for anchor paths (``kb/anchors.py`` uses it when it writes them, this module
    when it checks them: a hand-edited note is as hostile as a model's answer).

    Args:
        token: A path as a learning wrote it.

    Returns:
        The normalised relative path (``./a/b.py`` → ``a/b.py``, a trailing ``/`` dropped);
        ``None`` for a non-string or empty token, an absolute path, a drive letter, a ``~``
        or ``..`` component, a NUL, a backslash, or a path into ``.git``.
    """
    if not isinstance(token, str) or not token or len(token) > _MAX_TOKEN:
        return None
    if "\x00" in token or "\\" in token or token.startswith(("/", "~")):
        return None
    if len(token) > 1 and token[1] == ":" and token[0].isascii() and token[0].isalpha():
        return None
    parts = [p for p in token.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." or p.startswith("~") for p in parts) or parts[0] == ".git":
        return None
    return "/".join(parts)


def parse_anchors(value: object) -> list[tuple[str, str | None]]:
    """A stored ``anchors`` value (JSON text or a list) as ``(path, symbol)`` pairs.

    Args:
        value: The context store's ``anchors`` column, or a note's frontmatter list.

    Returns:
        At most :data:`MAX_ANCHORS` pairs; an item without a string ``path`` is skipped.
    """
    if isinstance(value, str):
        if not value.strip():
            return []
        try:
            value = json.loads(value)
        except ValueError:
            return []
    out: list[tuple[str, str | None]] = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict) and isinstance(item.get("path"), str) and item["path"]:
            sym = item.get("symbol")
            out.append((item["path"], sym if isinstance(sym, str) and sym else None))
        if len(out) >= MAX_ANCHORS:
            break
    return out


def locate(root_real: str, rel: str) -> tuple[str, os.stat_result] | None:
    """The real path and ``stat`` of ``root/rel``, when it is a file or directory inside.

    Args:
        root_real: The repository root, already ``realpath``-ed.
        rel: A path from :func:`safe_relpath`.

    Returns:
        ``(real path, stat)``; ``None`` when it does not exist, resolves outside the root
        (through a symlink), or is neither a regular file nor a directory.
    """
    joined = os.path.join(root_real, rel)
    try:
        os.lstat(joined)
        real = os.path.realpath(joined)
        if real != root_real and not real.startswith(root_real + os.sep):
            return None
        st = os.stat(real)
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return real, st
    return None


def _whole_word(data: bytes, needle: bytes, start: int = 0) -> int:
    """The offset of ``needle`` in ``data`` as a whole identifier from ``start``, or -1."""
    head_word = needle[:1] and needle[0] in _WORD
    tail_word = needle[-1:] and needle[-1] in _WORD
    at = data.find(needle, start)
    while at >= 0:
        before = at > 0 and data[at - 1] in _WORD
        end = at + len(needle)
        after = end < len(data) and data[end] in _WORD
        if not (head_word and before) and not (tail_word and after):
            return at
        at = data.find(needle, at + 1)
    return -1


def find_symbol(real: str, symbol: str, cap: int = READ_CAP_BYTES) -> int:
    """Whether a file holds ``symbol`` as a whole identifier, reading at most ``cap`` bytes.

    Args:
        real: The file's real path (from :func:`locate`).
        symbol: The symbol.
        cap: The read bound.

    Returns:
        :data:`FOUND`; :data:`ABSENT` when the whole file was read without it;
        :data:`UNCHECKED` when the cap stopped the read first, or the file cannot be read
        (it is not told as gone on a guess).
    """
    needle = symbol.encode("utf-8", "replace")
    if not needle:
        return FOUND
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(real, flags)
    except OSError:
        return UNCHECKED
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return UNCHECKED
        keep = b""
        read = 0
        while read < cap:
            chunk = os.read(fd, min(_CHUNK, cap - read))
            if not chunk:  # the end: a match ending the file is whole
                return FOUND if _whole_word(keep, needle) >= 0 else ABSENT
            read += len(chunk)
            data = keep + chunk
            at = _whole_word(data, needle)
            # A match at the very end may go on in the next chunk: decide it there.
            if at >= 0 and at + len(needle) < len(data):
                return FOUND
            keep = data[-(len(needle) + 1) :]
        more = os.read(fd, 1)
        if _whole_word(keep + more, needle) >= 0:
            return FOUND
        return UNCHECKED if more else ABSENT
    except OSError:
        return UNCHECKED
    finally:
        os.close(fd)


def verdict(repo_root: str | None, anchors: object, cache: object = None) -> Verdict:
    """A learning's verdict against a working tree (pure but for reads and ``stat``).

    Args:
        repo_root: The session's repository root; ``None`` (no repository) checks nothing.
        anchors: The learning's anchors (JSON text or a list of ``{path, symbol?}``).
        cache: A symbol cache with ``get``/``put`` (:class:`MemoryCache`,
            ``verify_store.VerifyStore``); ``None`` for none.

    Returns:
        ``unanchored`` without anchors or a root; ``stale`` when every anchored path is gone
        (including paths that are no longer safe or leave the repository); ``partial`` when
        some path is gone or a symbol no longer occurs in its (still present) file; else
        ``ok``. A symbol beyond the read cap is listed in ``unchecked`` and counts as held.
    """
    pairs = parse_anchors(anchors)
    if not pairs or not repo_root:
        return Verdict(UNANCHORED)
    root_real = os.path.realpath(repo_root)
    missing: list[str] = []
    unchecked: list[str] = []
    paths_gone = 0
    for path, symbol in pairs:
        rel = safe_relpath(path)
        hit = locate(root_real, rel) if rel is not None else None
        if hit is None:
            paths_gone += 1
            missing.append(path)
            continue
        real, st = hit
        if not symbol or not stat.S_ISREG(st.st_mode):
            continue
        found = cache.get(root_real, rel, symbol, st.st_mtime_ns, st.st_size) if cache else None  # type: ignore[attr-defined]
        if found is None:
            found = find_symbol(real, symbol)
            if cache is not None:
                cache.put(root_real, rel, symbol, st.st_mtime_ns, st.st_size, found)  # type: ignore[attr-defined]
        if found == ABSENT:
            missing.append(f"{symbol} in {path}")
        elif found == UNCHECKED:
            unchecked.append(f"{symbol} in {path}")
    if paths_gone == len(pairs):
        return Verdict(STALE, missing)
    return Verdict(PARTIAL if missing else OK, missing, unchecked)


class Checked(dict):
    """``id -> Verdict``, and whether the checking thread has stopped (``settled``).

    A caller may close what the thread uses (the cache's connection) only when it is
    settled; a thread stuck on a hung mount is left alone (the process exits soon).
    """

    settled = True


def check_many(
    repo_root: str | None,
    rows: list[dict],
    cache: object = None,
    *,
    want: int | None = None,
    per_item: float = PER_VERIFY_SEC,
    total: float = TOTAL_SEC,
) -> Checked:
    """Verdicts for ranked rows, in order, within a time budget; only as many as needed.

    Rows without anchors are ``unanchored``. The others are checked in one background
    thread; the caller sleeps on a lock and gives up when no row finished within
    ``per_item`` seconds, or after ``total``: that row and every later one is
    ``unverified`` and the thread is abandoned (a hung mount). With ``want``, checking stops once that many
    rows may be told (verify only what would be told).

    Args:
        repo_root: The session's repository root (``None``: every row is unanchored).
        rows: Context-store rows (``id``, ``anchors``), best first.
        cache: The symbol cache (see :func:`verdict`).
        want: Stop after this many tellable verdicts (``None``: check every row).
        per_item: Seconds to wait for one row's check.
        total: Seconds to wait for all.

    Returns:
        ``id -> Verdict`` for the rows looked at, in order (rows after ``want`` was reached
        are absent), as :class:`Checked`: ``settled`` is False when the thread did not stop
        within ``per_item`` after the answer was complete.
    """
    out = Checked()
    if not repo_root or not any(parse_anchors(r.get("anchors")) for r in rows):
        for r in rows[: want if want is not None else len(rows)]:
            out[str(r.get("id"))] = Verdict(UNANCHORED)
        return out
    import _thread

    done: list[tuple[str, Verdict]] = []
    stop = [False]
    running = _thread.allocate_lock()
    running.acquire()

    def work() -> None:
        # Everything in this thread, the caller asleep on one lock: handing each verdict
        # across would cost a GIL switch interval (5 ms) per row.
        try:
            tellable = 0
            for row in rows:
                if stop[0] or (want is not None and tellable >= want):
                    return
                anchors = row.get("anchors")
                if parse_anchors(anchors):
                    _fail_point()
                    try:
                        v = verdict(repo_root, anchors, cache)
                    except Exception:  # noqa: BLE001 - an unexpected error: told, unverified
                        v = Verdict(UNVERIFIED)
                else:
                    v = Verdict(UNANCHORED)
                done.append((str(row.get("id")), v))
                tellable += v.told
        finally:
            running.release()

    _thread.start_new_thread(work, ())
    deadline = time.monotonic() + total
    seen = 0
    finished = False
    while True:
        wait = min(per_item, deadline - time.monotonic())
        if wait > 0 and running.acquire(timeout=wait):
            finished = True
            break
        if len(done) == seen or time.monotonic() >= deadline:
            break  # no row finished within per_item (a hung check), or out of time
        seen = len(done)
    stop[0] = True
    got = list(done)
    out.update(got)
    if not finished:  # the row being checked and every later one: told, unverified
        tellable = sum(v.told for _, v in got)
        for row in rows[len(got) :]:
            if want is not None and tellable >= want:
                break
            out[str(row.get("id"))] = Verdict(UNVERIFIED)
            tellable += 1
        out.settled = running.acquire(timeout=0.0)
    return out


def _fail_point() -> None:
    """The ``verify:check`` failpoint (a hung mount, for the timeout tests); free when unset."""
    if os.environ.get("REFLECT_FAILPOINTS"):
        from reflect_jobs.faults import failpoint

        failpoint("verify:check")
