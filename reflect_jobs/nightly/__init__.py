"""The nightly layer (docs/NIGHTLY.md): the session analyzer, revert demotion, dreaming into
Claude Code's MEMORY.md, and the weekly synthesis of observations.

``run.py`` runs the parts in order over each repository, through the same gates as every
other pass (kill switch, halt, and for the one paid part the write lease, the quota gate and
its own daily units ``caps:nightly:``). Each part is idempotent: a run killed anywhere is run
again and ends where an uninterrupted run would have ended.
"""
