"""The job state machine's rules, apart from how a move is written (ARCHITECTURE §3).

A move is planned here — checked against :data:`ALLOWED`, turned into the job's new column
values and its ``job_events`` row — and written by one of two executors that must not
drift: :func:`.jobs.transition` (an ORM ``Job`` in a ``Session``: the person's commands,
recovery, the paid stages) and :func:`.gateway.transition` (a :class:`.gateway.JobRow` on a
Core connection: the $0 hot path). Standard library only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from ..lifecycle import JOB_STAGES as STAGES
from ..lifecycle import JOB_STATES as STATES
from ..lifecycle import TERMINAL_STATES as TERMINAL

# Legal state moves. "running" is entered only by claim(); recovery may also move
# running → queued/poisoned. Anything else is a bug and raises.
ALLOWED: dict[str, frozenset[str]] = {
    "queued": frozenset({"running", "queued", "deferred", "done", "halted"}),
    "deferred": frozenset({"running", "queued", "deferred", "done", "halted"}),
    "retrying": frozenset({"running", "queued", "deferred", "done", "halted"}),
    "running": frozenset(
        {"queued", "deferred", "retrying", "done", "poisoned", "quarantined", "halted"}
    ),
    "halted": frozenset({"queued"}),
    "poisoned": frozenset({"queued"}),
    "quarantined": frozenset({"queued"}),
    "done": frozenset(),
}


class IllegalTransition(RuntimeError):
    """A code path tried a state move ARCHITECTURE §3 does not allow."""


class Movable(Protocol):
    """What a move reads from a job (an ORM ``Job`` or a gateway ``JobRow``)."""

    @property
    def id(self) -> str:
        """The job's id."""
        ...

    @property
    def stage(self) -> str:
        """Its stage now."""
        ...

    @property
    def state(self) -> str:
        """Its state now."""
        ...


def plan(
    job: Movable,
    *,
    to_state: str,
    to_stage: str | None,
    outcome: str | None,
    detail: str | None,
    next_run_at: datetime | None,
    worker: str | None,
    now: datetime,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The job's new column values and its event row for one move.

    Leaving ``running`` drops the lease and the owner; a terminal state stamps
    ``finished_at`` and stops the job accepting captures.

    Args:
        job: The job as it stands (not changed here).
        to_state: The new state; must be allowed from the current one by :data:`ALLOWED`.
        to_stage: The new stage, or ``None`` to stay at the current one.
        outcome: Stored on the job and the event; ``None`` keeps the job's outcome.
        detail: Free text for the event (cut to 4000 characters).
        next_run_at: When the job may run next; ``None`` clears it (runnable now).
        worker: Who made the move, recorded on the event.
        now: The time to record.

    Returns:
        ``(changes, event)``: the job's columns to set, and the ``job_events`` row's values.

    Raises:
        IllegalTransition: The state or stage is unknown, or the move is not allowed.
    """
    if to_state not in STATES:
        raise IllegalTransition(f"unknown state {to_state!r}")
    if to_stage is not None and to_stage not in STAGES:
        raise IllegalTransition(f"unknown stage {to_stage!r}")
    if to_state not in ALLOWED[job.state]:
        raise IllegalTransition(f"job {job.id}: {job.state} -> {to_state} is not allowed")
    event = {
        "job_id": job.id,
        "at": now,
        "from_stage": job.stage,
        "to_stage": to_stage or job.stage,
        "from_state": job.state,
        "to_state": to_state,
        "outcome": outcome,
        "detail": detail[:4000] if detail else None,
        "worker": worker,
    }
    changes: dict[str, Any] = {"state": to_state, "next_run_at": next_run_at, "updated_at": now}
    if to_stage is not None:
        changes["stage"] = to_stage
    if outcome is not None:
        changes["outcome"] = outcome
    if to_state != "running":
        changes.update(
            lease_owner=None,
            lease_expires_at=None,
            owner_host=None,
            owner_pid=None,
            owner_start=None,
        )
    if to_state in TERMINAL:
        changes.update(finished_at=now, accepting=False)
    return changes, event
