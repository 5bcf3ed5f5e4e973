"""Stage runners: load the job, call the pure stage logic, record the transition.

One module per stage, named like its Huey task (``capture``, ``prepare``, ``write``,
``add``), over a shared :mod:`.runtime`; :mod:`.middleware` wraps prepare, write and add in
the same chain (stage errors, kill switch, dry run, claim), and :mod:`.paid_call` is the one
sequence every paid pass makes its call through. Each runner follows the same shape so that
it is idempotent and crash-safe:

1. *claim* the job for its stage in one short transaction (a second delivery, a recovery
   duplicate or another consumer gets ``None`` and returns: nothing happens twice);
2. do the work **outside** any transaction (reading a transcript, calling the model,
   writing notes) — a ledger lock is never held across I/O;
3. *commit* the outcome and the job event together, but only while our lease still holds
   (a worker presumed dead must not overwrite the job its replacement now owns);
4. hand the next stage to the dispatcher (Huey in production, a list in unit tests).

The add stage's edits to *existing* notes (proof, retirement) are the one piece of I/O
that has to follow its commit; :mod:`.note_edits` records them in that commit and applies
them after it, and the periodic recovery finishes any a crash left pending.

Nothing here imports Huey; ``tasks.py`` wraps these functions as Huey tasks. The names
below are re-exported so ``from reflect_jobs import pipeline; pipeline.run_prepare(...)``
keeps working.
"""

from reflect_jobs.writer.outcomes import ERROR_KINDS

from .add import run_add
from .capture import run_capture
from .note_edits import heal as heal_note_edits
from .prepare import run_prepare
from .runtime import Dispatcher, Runtime, finish, owned
from .write import run_write

__all__ = [
    "ERROR_KINDS",
    "Dispatcher",
    "Runtime",
    "finish",
    "heal_note_edits",
    "owned",
    "run_add",
    "run_capture",
    "run_prepare",
    "run_write",
]
