"""Failpoints: named places where a test can make this process die, for real.

``REFLECT_FAILPOINTS=after_record,after_notes`` makes the process SIGKILL itself when it
reaches one of those points — no cleanup, no ``finally``, exactly like ``kill -9`` or a
power cut at that instant. The chaos tests use it to prove that each stage boundary is
crash-safe. With the variable unset (always, in production) a failpoint is one dict lookup.

Points: ``after_claim:<stage>``, ``after_record`` (the paid answer is committed, nothing
parsed), ``after_notes`` (notes on disk, ledger not yet committed), ``before_commit:<stage>``,
``after_commit:add`` (the add is committed with its note edits pending; the existing notes'
proof/retirement rewrites have not run — recovery applies them, see ``pipeline.note_edits``).
"""

from __future__ import annotations

import os
import signal

ENV = "REFLECT_FAILPOINTS"


def failpoint(name: str) -> None:
    armed = os.environ.get(ENV)
    if armed and name in {p.strip() for p in armed.split(",")}:
        os.kill(os.getpid(), signal.SIGKILL)
