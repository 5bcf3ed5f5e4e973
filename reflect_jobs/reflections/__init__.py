"""The reflection store: per-repository items (actions, questions, handoffs, notes) in logs.

Every change is one JSON line appended to ``reflections/<host>.jsonl`` in the repository's
memory home (docs/REFLECTIONS.md is the format); items are the fold of all host logs, latest
event wins (:mod:`.fold`); a SQLite FTS5 index under ``$REFLECT_HOME`` is derived from the
logs and never committed (:mod:`.index`). :mod:`.events` validates and appends lines,
:mod:`.home` finds the repository and its memory home, :mod:`.store` ties them together for
:mod:`.cli` (the ``reflections`` command, also ``reflect-jobs items``). Stdlib only, apart
from click in the CLI and the dedupe pass's runner (:mod:`.dedupe_run`: the ledger, the
queue's counters and the writer backends), which nothing on the hook path imports.
"""
