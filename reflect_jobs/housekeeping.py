"""The bounded clean-up every recovery sweep ends with (once a minute in a worker).

Kept apart from the sweep's re-sends (``tasks.recover_now``) because none of it moves a job:
it prunes the counters of windows that have passed (the writer's caps, the dedupe pass's
and the nightly layer's own daily units), the ledger's retention (chunk hashes, heartbeats),
and settles a jobless paid pass (dedupe) that was killed inside its call — there is no job
to reclaim, so its cost row is closed once the call can no longer be running.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from .config import Settings
from .ledger import control, costs, learnings
from .ledger.db import session_scope
from .ledger.models import utcnow
from .limits import Caps


def prune(settings: Settings, storage: Any, caps: Caps) -> None:
    """Prune past windows' counters and the ledger's retention; settle abandoned jobless calls.

    Args:
        settings: ``db_url`` and ``timeout_sec`` (a call older than twice the timeout plus a
            minute can no longer be running).
        storage: Huey's storage, which holds the dedupe and nightly units.
        caps: The writer's daily/run-window caps.
    """
    caps.prune()
    from .reflections.dedupe_run import dedupe_caps

    dedupe_caps(settings, storage).prune()  # the dedupe pass's own daily units
    from .nightly.synthesis import nightly_caps

    nightly_caps(settings, storage).prune()  # the nightly layer's own daily units
    with session_scope(settings.db_url) as session:  # see prune_chunks / prune_heartbeats
        learnings.prune_chunks(session)
        control.prune_heartbeats(session)
        stale = utcnow() - timedelta(seconds=2 * settings.timeout_sec + 60)
        costs.settle_abandoned_jobless(session, stale)
