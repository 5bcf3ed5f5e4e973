"""``doctor``'s knowledge-base checks: the KB is writable, its index current, and the
embedding model loads offline (a hub-name lookup hangs for over a minute without network).

Both are free: the probe writes no directory entry and the model is loaded in a child.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .config import Settings
from .doctor_check import check
from .markers import CHILD_ENV


def probe_writable(directory: Path) -> None:
    """Prove a byte can be written and synced in ``directory`` without changing its entries.

    On Linux an unnamed ``O_TMPFILE`` in the directory needs the same permission and space
    as a note and never gets a directory entry, so the folder's mtime — which
    :func:`reflect_jobs.index.maintenance.index_lags` compares — does not move. Where that
    is not supported, ``os.access`` checks the folder and the probe file is written in its
    parent (the KB root, which no staleness check watches).

    Args:
        directory: The folder to probe (``documents/``).

    Raises:
        OSError: The folder cannot be written (``EACCES``, ``EROFS``, ``ENOSPC``…).
    """
    flag = getattr(os, "O_TMPFILE", 0)
    if flag:
        try:
            fd = os.open(directory, flag | os.O_WRONLY, 0o600)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
        else:
            try:
                os.write(fd, b"ok")
                os.fsync(fd)
            finally:
                os.close(fd)
            return
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(directory))
    probe = directory.parent / ".doctor-probe"
    probe.write_text("ok")
    probe.unlink()


def check_kb(s: Settings) -> dict[str, Any]:
    """The KB's ``documents/`` is writable and the lexical index is intact and current.

    Probes ``documents/`` with :func:`probe_writable` (creating the KB directories when
    missing), which leaves the folder's mtime alone: a probe file created and removed there
    used to make every later ``search`` warn that the index lags the notes.

    Args:
        s: The settings (``kb_path``).

    Returns:
        A check: ``{"name", "ok", "detail", "fix"}``, ``fix`` empty when ``ok``. It fails
        on an OS error, a corrupted lexical index, or the first staleness warning of
        :func:`reflect_jobs.index.search.staleness`.
    """
    from . import kb
    from .index.lexical import LexicalIndex
    from .index.search import staleness

    try:
        paths = kb.kb_paths(s.kb_path)
        probe_writable(paths.documents)
        lex = LexicalIndex(paths.index / "lexical.db")
        try:
            intact = lex.check()
            lag = staleness(s.kb_path)
        finally:
            lex.close()
    except OSError as exc:
        return check(
            "knowledge base",
            False,
            f"{s.kb_path}: {exc}",
            f"make {s.kb_path} writable or set GLOBAL_LEARNINGS_PATH",
        )
    if not intact:
        return check(
            "knowledge base", False, "lexical index is corrupted", "reflect-jobs reindex --force"
        )
    if lag:
        return check("knowledge base", False, lag[0], "reflect-jobs reindex")
    return check("knowledge base", True, f"{s.kb_path} writable, index current")


EMBED_TIMEOUT_SEC = 120


_EMBED_PROBE = """
import sys, time
t = time.monotonic()
from reflect_jobs.index.embeddings import get_embedder
e = get_embedder(sys.argv[1] or None)
v = e.embed(["doctor probe"])
print(f"{e.model_name}\t{v.shape[1]}\t{time.monotonic() - t:.1f}")
"""


def check_embeddings(s: Settings, timeout: float = EMBED_TIMEOUT_SEC) -> dict[str, Any]:
    """Load the embedding model the way a worker does, with the network switched off.

    In a subprocess: torch costs ~4 s and a lot of memory the CLI should not keep, and a
    hub-name model that is not cached would otherwise hang this process.

    Args:
        s: The settings (unused: the probe reads the model choice from the environment,
            as a worker does).
        timeout: Seconds the probe may take before the check fails.

    Returns:
        A check: ``{"name", "ok", "detail", "fix"}``, ``fix`` empty when ``ok``. It passes
        as skipped when ``REFLECT_INDEX_VECTORS`` turns vectors off; otherwise the detail
        names the model, its dimension and the load time.
    """
    name = "embedding model"
    if not s.index_vectors:
        return check(name, True, "skipped: REFLECT_INDEX_VECTORS=0 (lexical index only)")
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        CHILD_ENV: "1",
    }
    fix_model = (
        "set REFLECT_EMBED_MODEL to a local model directory (or unset it for the shipped "
        "MiniLM), or REFLECT_INDEX_VECTORS=0 to run on the lexical index only"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _EMBED_PROBE, s.embed_model or ""],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return check(name, False, f"did not load offline within {timeout:g}s", fix_model)
    except OSError as exc:
        return check(name, False, f"cannot start {sys.executable}: {exc}", fix_model)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        last = lines[-1] if lines else f"exit {proc.returncode}"
        missing = "No module named" in last
        fix = (
            "install the index extra: `make install` (or pip install -e '.[index]')"
            if missing
            else fix_model
        )
        return check(name, False, f"does not load offline: {last[:300]}", fix)
    model, dim, secs = (proc.stdout.strip().splitlines() or ["?\t?\t?"])[-1].split("\t")
    return check(name, True, f"{model} ({dim}-d) loads offline in {secs}s")
