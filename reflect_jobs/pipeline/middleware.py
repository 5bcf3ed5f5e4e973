"""The stage runner as a small middleware chain: what every stage does around its own work.

Before, each runner (``prepare``, ``write``, ``add``) wrote out its own kill-switch and
dry-run checks (the add stage forgot the kill switch), its claim, its failpoint and — one
level up, in ``tasks.py`` — the stage-error guard. Now a stage is a :class:`Stage`: its
name, a ``claim`` hook run inside the claim's transaction (the claim-time gates, and what
the step needs from the job), a ``step`` (the work and its record) and a ``preview`` for a
dry run; :func:`run_stage` wraps the step in the same chain for every stage::

    stage errors → kill switch → dry run → claim (+ the stage's claim-time gates)
        → failpoint after_claim:<stage> → step

so each runner reads *claim → pure step → record*.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from reflect_jobs.faults import failpoint
from reflect_jobs.gates import Defer, dry_run, kill_switch
from reflect_jobs.ledger import gateway

from .runtime import Runtime, log, stage_failed


@dataclass
class StageRun:
    """One run of one stage for one job, as it goes down the chain.

    Attributes:
        rt: The runtime.
        stage: ``prepare``, ``write`` or ``add``.
        job_id: The job.
        worker: Our lease-owner id.
        ticket: What the stage's ``claim`` hook read from the job (set by the claim).
    """

    rt: Runtime
    stage: str
    job_id: str
    worker: str
    ticket: Any = None


Step = Callable[[StageRun], None]
Middleware = Callable[[StageRun, Step], None]


@dataclass(frozen=True)
class Held:
    """A claim-time gate moved the job in the claim's transaction; the step does not run.

    ``after`` runs once that transaction committed (the next message for the job).
    """

    after: Callable[[], None] | None = None


#: The claim hook: inside the claim's transaction (a :mod:`~reflect_jobs.ledger.gateway`
#: connection), with the claimed job; returns the ticket the step needs, or :class:`Held`
#: when a claim-time gate moved the job. Columns it sets on the job commit with the claim.
ClaimHook = Callable[[StageRun, Connection, gateway.JobRow], Any]


@dataclass(frozen=True)
class Stage:
    """A stage runner's own parts; :func:`run_stage` adds the rest.

    Attributes:
        name: The stage (the job must be at it to be claimed).
        claim: See :data:`ClaimHook`.
        step: The work and its record, outside the claim's transaction.
        preview: What a dry run logs instead (no claim, nothing moves).
    """

    name: str
    claim: ClaimHook
    step: Step
    preview: Step


def stage_errors(run: StageRun, nxt: Step) -> None:
    """An exception out of the stage ends the attempt at once (``runtime.stage_failed``).

    Args:
        run: The run.
        nxt: The rest of the chain.
    """
    try:
        nxt(run)
    except Exception as exc:  # noqa: BLE001 - every stage error ends the attempt here
        stage_failed(run.rt, run.stage, run.job_id, exc)


def kill_switched(run: StageRun, nxt: Step) -> None:
    """``REFLECT_DISABLED``: the stage does nothing and the job keeps its place.

    Args:
        run: The run.
        nxt: The rest of the chain.
    """
    if isinstance(kill_switch(run.rt.settings.disabled).acquire(), Defer):
        return
    nxt(run)


def previewed(preview: Step) -> Middleware:
    """``REFLECT_DRAIN_DRY_RUN``: ``preview`` logs what would run instead; nothing moves.

    Args:
        preview: The stage's dry-run preview.

    Returns:
        The middleware.
    """

    def middleware(run: StageRun, nxt: Step) -> None:
        if isinstance(dry_run(run.rt.settings.dry_run).acquire(), Defer):
            preview(run)
            return
        nxt(run)

    return middleware


def claimed(hook: ClaimHook) -> Middleware:
    """Claim the job for the stage (compare-and-set), run the stage's claim-time gates in
    the same transaction, then fire ``after_claim:<stage>``.

    Args:
        hook: The stage's :data:`ClaimHook`.

    Returns:
        The middleware: a job that is not due at this stage, or that a claim-time gate
        held, ends the run.
    """

    def middleware(run: StageRun, nxt: Step) -> None:
        with gateway.transaction(run.rt.db) as conn:
            job = gateway.claim(
                conn,
                run.job_id,
                run.stage,
                worker=run.worker,
                lease_sec=run.rt.settings.lease_sec,
            )
            if job is None:
                return
            ticket = hook(run, conn, job)
            gateway.save(conn, job)
        if isinstance(ticket, Held):
            if ticket.after is not None:
                ticket.after()
            return
        run.ticket = ticket
        failpoint(f"after_claim:{run.stage}")
        nxt(run)

    return middleware


def chain(middlewares: Sequence[Middleware], step: Step) -> Step:
    """Compose: the first middleware is the outermost.

    Args:
        middlewares: Outermost first.
        step: The innermost step.

    Returns:
        One step that runs them all.
    """
    for middleware in reversed(middlewares):
        step = _bind(middleware, step)
    return step


def _bind(middleware: Middleware, nxt: Step) -> Step:
    return lambda run: middleware(run, nxt)


def run_stage(stage: Stage, rt: Runtime, job_id: str) -> None:
    """Run one stage for one job through the chain (see the module docstring).

    Args:
        stage: The stage.
        rt: The runtime.
        job_id: The job (a no-op unless it is due at ``stage.name``).
    """
    run = StageRun(rt, stage.name, job_id, rt.who())
    chain(
        [stage_errors, kill_switched, previewed(stage.preview), claimed(stage.claim)],
        stage.step,
    )(run)


def no_preview(run: StageRun) -> None:
    """A dry run's preview for a stage with nothing to compute: say it would run.

    Args:
        run: The run.
    """
    log.info(f"dry run: would {run.stage}", job_id=run.job_id)
