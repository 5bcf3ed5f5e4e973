"""Failpoints: named places where a test can make this process fail, for real.

``REFLECT_FAILPOINTS`` is a comma-separated list of ``point`` or ``point=action``:

* ``after_record`` (or ``after_record=kill``) — SIGKILL this process at that point: no
  cleanup, no ``finally``, exactly like ``kill -9`` or a power cut at that instant. The
  chaos tests use it to prove that each stage boundary is crash-safe.
* ``point=raise`` — raise :class:`FailpointError` there (an unexpected bug in that place).
* ``point=oserror:ENOSPC`` — raise ``OSError`` with that errno name there (a full disk,
  ``EIO`` from a failing device, ...), for the error paths a real filesystem rarely offers.
* ``point=pause`` — create ``$REFLECT_FAILPOINT_DIR/<point>.paused`` and wait until that
  file is removed, so a test can run another real process while this one is stopped at
  the point (a real interleaving, not a spy); each pass through the point pauses again.

With the variable unset (always, in production) a failpoint is one dict lookup.

Points: ``after_claim:<stage>``, ``after_record`` (the paid answer is committed, nothing
parsed), ``after_notes`` (notes on disk, ledger not yet committed), ``before_commit:<stage>``
(``before_commit:capture``: the capture message taken, its job row not committed; the spool
entry survives),
``after_commit:add`` (the add is committed with its note edits pending; the existing notes'
proof/retirement rewrites have not run — recovery applies them, see ``pipeline.note_edits``)
(pipeline); ``<pass>:holding_lease`` — ``write:holding_lease``, ``dedupe:holding_lease``
(``pipeline/paid_call.py``: the pass holds a write slot, before the quota gate; a kill there
proves a dead holder frees its slot); ``dedupe:after_record`` (the dedupe pass's answer is
committed, nothing parsed); ``nightly:holding_lease``, ``nightly:after_record`` (the weekly
synthesis's paid call, as the dedupe pass's); ``nightly:after_repo`` (``nightly/run.py``: a
repository's parts done, its window not yet recorded); ``atomic_write:write``, ``atomic_write:fsync``, ``atomic_write:replace``
(``fsio``, before each step); ``graphml:check`` (reading the graph back to validate it);
``reindex:holding_lock`` (``tasks``, a reindex pass inside the graph-writer lock);
``mid:reindex`` (``index.maintenance.reindex``, the lexical index and manifest saved, the
graph/vector step not yet run);
``kv_upsert:<namespace>`` (the graph index's SQLite KV store, after a namespace's rows);
``model_child:request`` (``warm.child``, a request received, before it is served).
"""

from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path

ENV = "REFLECT_FAILPOINTS"
PAUSE_DIR_ENV = "REFLECT_FAILPOINT_DIR"
_PAUSE_POLL_SEC = 0.02


class FailpointError(RuntimeError):
    """Raised by a failpoint armed with ``=raise``."""


def failpoint(name: str) -> None:
    """Fail here if ``REFLECT_FAILPOINTS`` arms ``name``; otherwise do nothing.

    Args:
        name: The point's name, e.g. ``after_record`` or ``after_claim:write``.

    Raises:
        FailpointError: Armed with ``=raise``.
        OSError: Armed with ``=oserror:<ERRNO>`` (``ValueError`` for an unknown errno name).
        ValueError: An unknown action, or ``=pause`` without ``REFLECT_FAILPOINT_DIR``.
    """
    armed = os.environ.get(ENV)
    if not armed:
        return
    action = _action(armed, name)
    if action is not None:
        _fire(name, action)


def _action(armed: str, name: str) -> str | None:
    """The action armed for ``name`` in the variable's value, or None when it is not armed."""
    for entry in armed.split(","):
        point, _, action = entry.strip().partition("=")
        if point.strip() == name:
            return action.strip() or "kill"
    return None


def _fire(name: str, action: str) -> None:
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "raise":
        raise FailpointError(f"failpoint {name}")
    elif action.startswith("oserror:"):
        code_name = action.removeprefix("oserror:")
        code = getattr(errno, code_name, None)
        if not isinstance(code, int):
            raise ValueError(f"failpoint {name}: unknown errno {code_name!r}")
        raise OSError(code, f"{os.strerror(code)} (failpoint {name})")
    elif action == "pause":
        _pause(name)
    else:
        raise ValueError(f"failpoint {name}: unknown action {action!r}")


def _pause(name: str) -> None:
    """Announce the pause with a marker file and hold until the test removes it."""
    directory = os.environ.get(PAUSE_DIR_ENV)
    if not directory:
        raise ValueError(f"failpoint {name}=pause needs {PAUSE_DIR_ENV}")
    marker = Path(directory) / f"{name.replace(os.sep, '_')}.paused"
    marker.write_text(str(os.getpid()), encoding="utf-8")
    while marker.exists():
        time.sleep(_PAUSE_POLL_SEC)
