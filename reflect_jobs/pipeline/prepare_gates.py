"""The prepare stage's free gates: what stops a capture before the cascade reads a byte.

In the order they are asked: the session's running pass (in the claim's transaction,
:class:`RunningPass`), then :func:`free_gates` — the transcript gone, its repository
ignored, unchanged since its last job, the data boundary, the checkpoints
(:class:`CheckpointGate`). Each ``Defer`` carries the job's $0 outcome (ARCHITECTURE §2.2's
gates table). What prepare read from the job and its session's rows is a :class:`PrepTicket`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Connection

from reflect_jobs import boundary, userconfig
from reflect_jobs.checkpoints import BELOW_CHECKPOINT, Models, PassPlan, SessionState, plan_pass
from reflect_jobs.gates import Check, Defer, FreeGate, Gate, Go
from reflect_jobs.ledger import checkpoints, watermarks
from reflect_jobs.ledger.gateway import JobRow
from reflect_jobs.ledger.models import utcnow
from reflect_jobs.recall.scope import transcript_repo
from reflect_jobs.repo import Repo, listed, repo_for
from reflect_jobs.transcripts import UnreadableTranscript
from reflect_jobs.transcripts.usage import context_tokens

from .runtime import Runtime


def restricted(
    rt: Runtime, harness: str, session_id: str, path: str, cwd: str | None = None
) -> str | None:
    """Ask the data-boundary command (``REFLECT_BOUNDARY_CMD``) about a session, unread.

    Args:
        rt: The runtime (for the command and its timeout).
        harness: The job's harness.
        session_id: The job's session id.
        path: The transcript path (passed, never opened here).
        cwd: The session's working directory from the hook payload (the job's ``cwd``).

    Returns:
        None when no boundary is configured or the command allowed the session; else the
        restricted verdict's reason (a missing, failing or slow command restricts).
    """
    command = rt.settings.boundary_cmd
    if not command:
        return None
    verdict = boundary.check(
        command,
        boundary.request(harness, session_id, path, cwd),
        timeout_sec=rt.settings.boundary_timeout_sec,
    )
    return None if verdict.allowed else verdict.reason


#: How long a capture waits before looking again when its session's pass is still running.
SIBLING_WAIT = timedelta(seconds=5)


def _plan(
    rt: Runtime, path: str, deep: bool, state: SessionState | None, floor: int = 0
) -> PassPlan:
    """The checkpoint decision for this capture: the fill read from the transcript's end.

    ``floor`` is the size the session's previous capture saw: the fill is looked for only
    in what was written since (the previous capture found what lies before it, and
    ``state`` kept it), so a huge line early in a session is not read again at every Stop.
    """
    s = rt.settings
    floor = floor if state is not None else 0  # no fill kept: read back as far as needed
    tokens = context_tokens(path, floor=floor) if s.checkpoints else None
    if tokens is None and floor and state is not None and state.fill_pct > 0:
        tokens = round(state.fill_pct * s.context_window / 100)  # nothing new: as it was
    return plan_pass(
        deep=deep,
        tokens=tokens,
        window=s.context_window,
        thresholds=s.checkpoints,
        state=state,
        models=Models(cheap=s.cheap_pass_model, drain=s.model, deep=s.deep_pass_model),
    )


@dataclass
class PrepTicket:
    """What prepare reads from the job and its session's rows before the cascade."""

    path: str
    harness: str
    session_id: str
    base: watermarks.Mark | None
    cp_state: SessionState | None
    deep: bool
    cwd: str | None
    unchanged: bool
    #: The transcript size the session's previous capture saw (the fill is read after it).
    floor: int = 0


class RunningPass(FreeGate):
    """One pass per session at a time (ARCHITECTURE §14.1), asked in the claim's transaction:
    another job of the session at ``write``/``add`` or running defers this one until that
    pass is due, plus :data:`SIBLING_WAIT`; it goes on accepting captures meanwhile.

    Args:
        session: The claim's open ledger session.
        job: The job just claimed.
    """

    name = "running_pass"

    def __init__(self, session: Connection, job: JobRow) -> None:
        """Bind the gate to the claim's transaction and job."""
        self.session, self.job = session, job

    def acquire(self) -> Go | Defer:
        """Look for the session's pass in flight.

        Returns:
            ``Go``, or ``Defer`` until it is due (at least :data:`SIBLING_WAIT` from now).
        """
        sibling = checkpoints.running_pass(self.session, self.job)
        if sibling is None:
            return Go(self.name)
        other, due = sibling
        until = utcnow() + SIBLING_WAIT
        if due is not None and due + SIBLING_WAIT > until:
            until = due + SIBLING_WAIT
        return Defer(self.name, f"waiting for the session's running pass {other}", until)


class CheckpointGate(FreeGate):
    """The checkpoints (ARCHITECTURE §14.1): a capture crossing no new context-fill
    threshold makes no pass. The plan it decided is kept in :attr:`plan`.

    Args:
        rt: The runtime (the checkpoint settings and models).
        t: What prepare read (the transcript, the session's checkpoint state, deep or not).
    """

    name = "checkpoint"

    def __init__(self, rt: Runtime, t: PrepTicket) -> None:
        """Bind the gate to the capture."""
        self.rt, self.t = rt, t
        self.plan: PassPlan | None = None

    def acquire(self) -> Go | Defer:
        """Decide the pass from the fill read at the transcript's end.

        Returns:
            ``Go`` (a pass; :attr:`plan` says which), or ``Defer`` ending the job:
            ``skip_below_checkpoint``, or ``skip_unreadable`` when the file cannot be read.
        """
        try:
            self.plan = _plan(self.rt, self.t.path, self.t.deep, self.t.cp_state, self.t.floor)
        except UnreadableTranscript as exc:
            return Defer(self.name, str(exc), outcome="skip_unreadable")
        except OSError as exc:
            return Defer(self.name, f"{type(exc).__name__}: {exc}", outcome="skip_unreadable")
        if not self.plan.make_pass:
            return Defer(self.name, self.plan.reason, outcome=BELOW_CHECKPOINT)
        return Go(self.name, self.plan)


#: A session in a repository the user ignores (``reflect-jobs ignore``): $0, nothing read.
IGNORED_OUTCOME = "skip_ignored"


def free_gates(rt: Runtime, t: PrepTicket) -> list[Gate]:
    """Prepare's free gates before the cascade, in the order they are asked.

    Args:
        rt: The runtime.
        t: What prepare read.

    Returns:
        Transcript gone (``stale``), its repository ignored (``skip_ignored``, ``reflect-jobs
        ignore``), unchanged since its last job (``skip_unchanged``),
        the data boundary (``skip_restricted``, decided before one byte is read) and the
        checkpoints (:class:`CheckpointGate`); each ``Defer`` carries the job's outcome.
    """

    def gone() -> Defer | None:
        if os.path.exists(t.path):
            return None
        return Defer("stale", f"transcript no longer exists: {t.path}", outcome="stale")

    def ignored() -> Defer | None:
        # `reflect-jobs ignore` (the config file's list, read now: a running worker sees a
        # change at once). The hook's cwd first; else the transcript's own ($0, local).
        entries = userconfig.ignored()
        if not entries:
            return None
        ref = repo_for(t.cwd) if t.cwd else None
        if ref is None:
            found = transcript_repo(t.path)
            ref = Repo(str(found["key"]), found["root"]) if found else None
        if ref is None or not listed(ref, entries):
            return None
        why = f"repository {ref.key} is ignored (`reflect-jobs unignore` to capture it again)"
        return Defer("ignored", why, outcome=IGNORED_OUTCOME)

    def unchanged() -> Defer | None:
        if not t.unchanged:
            return None
        reason = "transcript unchanged since its last job"
        return Defer("unchanged", reason, outcome="skip_unchanged")

    def boundary_says() -> Defer | None:
        why = restricted(rt, t.harness, t.session_id, t.path, t.cwd)
        if why is None:
            return None
        return Defer("boundary", f"boundary command: {why}", outcome=boundary.RESTRICTED_OUTCOME)

    return [
        Check("stale", gone),
        Check("ignored", ignored),
        Check("unchanged", unchanged),
        Check("boundary", boundary_says),
        CheckpointGate(rt, t),
    ]
