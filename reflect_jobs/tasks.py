"""Thin Huey tasks around the stage runners in ``pipeline`` (ARCHITECTURE §2).

A task only builds the runtime and calls a runner; the runner claims, works and records.
Huey is the transport: every task is safe to run twice and every lost message is re-sent by
:func:`recover` from the ledger, which is the truth.

The KB-wide tasks (``repair``, ``reindex``) are coalesced: a burst of committed adds sets
one pending flag and enqueues one task; a single graph writer runs at a time under a Huey
lock (a Redis key with the Redis queue, so it holds across machines).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from datetime import datetime
from functools import cache
from typing import Any

import structlog
from huey import crontab
from huey.constants import EmptyData
from huey.exceptions import TaskLockedException

from .config import load_settings
from .faults import failpoint
from .index import maintenance
from .ledger import control, learnings
from .ledger.db import session_scope
from .ledger.jobs import due_jobs, recover_expired, worker_id
from .limits import Caps
from .logging import configure_logging
from .perms import fix_tree, private_dir
from .pipeline.add import run_add
from .pipeline.capture import SPOOL_MIN_AGE_SEC, reconcile_spool, run_capture
from .pipeline.idle import sweep_idle_sessions
from .pipeline.note_edits import heal as heal_note_edits
from .pipeline.prepare import run_prepare
from .pipeline.runtime import Runtime, run_guarded, stage_failed, transient_error
from .pipeline.write import run_write
from .queue import make_huey
from .warm import supervisor
from .write_lease import make_write_lease

settings = load_settings()
huey = make_huey(settings)
log = structlog.get_logger("reflect_jobs.tasks")

REINDEX_PENDING = "kb:reindex-pending"
# Set while a reindex task runs its passes; left behind only by a writer that died in one.
REINDEX_RUNNING = "kb:reindex-running"
GRAPH_LOCK = "graph-writer"
GRAPH_LOCK_TTL = 900


@contextlib.contextmanager
def graph_writer() -> Iterator[None]:
    """One graph writer at a time; a dead holder never wedges the index.

    On Redis (several machines) it is a Huey lock with a TTL: a consumer killed mid-reindex
    frees it when the TTL runs out. Locally it is an ``flock`` on a file in
    ``$REFLECT_HOME``, which the kernel releases the moment the holding process dies — a
    Huey lock on SQLite has no TTL, and ``huey_consumer -f`` only flushes locks already
    declared at start-up, so a SIGKILLed reindex used to block indexing for good.

    Yields:
        Nothing; the lock is held for the body of the ``with`` block.

    Raises:
        TaskLockedException: Another graph writer holds the lock (it is not waited for).
    """
    if settings.queue_is_redis:
        with huey.lock_task(GRAPH_LOCK, ttl=GRAPH_LOCK_TTL):
            yield
        return
    private_dir(settings.home)
    fd = os.open(settings.home / "graph-writer.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TaskLockedException(GRAPH_LOCK) from None
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class HueyDispatcher:
    """Hands the next stage to Huey (``eta`` in the future → Huey's schedule)."""

    def schedule(self, stage: str, job_id: str, eta: datetime | None = None) -> None:
        """Enqueue the stage's task for ``job_id``.

        Args:
            stage: ``prepare``, ``write`` or ``add`` (a key of :data:`STAGE_TASKS`).
            job_id: The job the task runs for.
            eta: When the task becomes due (UTC); ``None`` enqueues it for now.

        Raises:
            KeyError: ``stage`` has no task.
        """
        task = STAGE_TASKS[stage]
        if eta is None:
            task(job_id)
        else:
            task.schedule(args=(job_id,), eta=eta)

    def kb_changed(self) -> None:
        """Ask for a reindex; a burst of calls enqueues one :func:`reindex_task`."""
        # put_if_empty is atomic in every Huey storage: only the first add of a burst
        # enqueues; the rest see the flag and ride along with that reindex.
        if huey.storage.put_if_empty(REINDEX_PENDING, b"1"):
            reindex_task()


@cache
def runtime() -> Runtime:
    """The process's runtime, built once: modes repaired, logging configured, caps and the
    write lease over Huey's storage.

    Building it makes ``$REFLECT_HOME`` and the KB private (directories 0700, files 0600,
    :func:`reflect_jobs.perms.fix_tree`), so every worker and drain start repairs them.

    Returns:
        The same :class:`~reflect_jobs.pipeline.runtime.Runtime` on every call, with the
        module's settings, a :class:`HueyDispatcher`, the daily/run-window caps and the
        write lease (``REFLECT_WRITE_CONCURRENCY`` paid calls in flight).
    """
    # Installations made before files were private, and files a person copied in: repair
    # the modes once per process start, before anything is logged or written.
    private_dir(settings.home)
    for root in (settings.home, settings.kb_path):
        fix_tree(root)
    configure_logging(settings)
    caps = Caps(
        huey.storage,
        daily_max=settings.daily_max,
        run_max=settings.run_max,
        window_sec=settings.debounce_sec,
    )
    return Runtime(
        settings=settings,
        dispatcher=HueyDispatcher(),
        caps=caps,
        write_lease=make_write_lease(settings, huey.storage),
    )


@huey.task()
def capture(
    harness: str,
    session_id: str,
    transcript_path: str,
    event: str = "unknown",
    hook_ts: float | None = None,
    settle_sec: int | None = None,
    spool_id: str | None = None,
    cwd: str | None = None,
) -> str | None:
    """Enqueued by ``reflect-jobs-hook`` (via ``fastqueue``) and ``reflect-jobs enqueue``.

    A transient error (a ledger that is down or locked) propagates: Huey retries the task as often as the message asks (the
    hook asks for a few retries) and the hook's spool entry stays until the job row
    commits, so a ledger that is down loses no capture (ARCHITECTURE §2.3).

    Args:
        harness: ``claude``, ``codex``, ``copilot``…
        session_id: The harness's session id.
        transcript_path: The transcript file.
        event: The hook event that fired.
        hook_ts: When the hook enqueued the message (epoch seconds); the capture logs the
            queue delay from it (``None`` for captures not made by a hook).
        settle_sec: Override of the capture settle delay (``None``: the setting).
        spool_id: The hook's spool entry for this capture, deleted once the job row
            committed (``None`` when the capture was not spooled).
        cwd: The session's working directory from the hook payload (told to the data
            boundary); ``None`` when the payload had none.

    Returns:
        The job id, or ``None`` when reflect-jobs is disabled or the capture was already
        recorded (Huey stores no results, so only a direct caller sees it).
    """
    rt = runtime()
    try:
        return run_capture(
            rt,
            harness,
            session_id,
            transcript_path,
            event,
            settle_sec,
            hook_ts=hook_ts,
            spool_id=spool_id,
            cwd=cwd,
        )
    except Exception as exc:  # noqa: BLE001 - no job yet: the error goes to the errors ledger
        if transient_error(exc):
            raise  # Huey retries it as the message asks; the spool entry keeps it meanwhile
        stage_failed(rt, "capture", None, exc)
        return None


@huey.task()
def prepare(job_id: str) -> None:
    """The prepare stage (see :func:`reflect_jobs.pipeline.prepare.run_prepare`).

    Args:
        job_id: The job to prepare.
    """
    run_guarded(runtime(), "prepare", run_prepare, job_id)


@huey.task()
def write(job_id: str) -> None:
    """The write stage (see :func:`reflect_jobs.pipeline.write.run_write`).

    Args:
        job_id: The job to write.
    """
    run_guarded(runtime(), "write", run_write, job_id)


@huey.task()
def add(job_id: str) -> None:
    """The add stage (see :func:`reflect_jobs.pipeline.add.run_add`).

    Args:
        job_id: The job to add.
    """
    run_guarded(runtime(), "add", run_add, job_id)


@huey.task()
def reindex_task(force: bool = False) -> dict | None:
    """Repair the graph, then reindex — one graph writer at a time, coalesced.

    Coalescing protocol: whoever wants a reindex sets the pending flag first (``kb_changed``
    only enqueues when it was empty). The writer pops the flag *while holding the lock* and
    loops until no request is left, so a request made during a run is served by the same
    task. A task that finds the lock taken just returns: its flag is still set, and the
    holder pops it before releasing. Nothing is scheduled for later, so ``drain
    --until-idle`` never stops with a reindex owed. The running mark
    (``kb:reindex-running``) outlives a writer killed mid-pass, whose popped flag would
    otherwise be lost: recovery re-sends the task, and the pass finishes what the killed
    one left (the graph's debt is in the manifest, see ``maintenance.reindex``).

    Each pass repairs the graphml (with maintenance every ``maintain_every`` passes) and
    reindexes; problems go to the errors ledger.

    Args:
        force: Rebuild every index from the notes on the first pass (later passes of the
            same run are incremental).

    Returns:
        The last pass's :meth:`~reflect_jobs.index.maintenance.ReindexStats.to_dict`, or
        ``None`` when another graph writer held the lock.
    """
    service = supervisor.current()
    if service is not None and settings.index_vectors:
        # A consumer: the model child runs this same body (ARCHITECTURE §8.1). With vectors
        # off there is no model, and the body is as light here.
        return _in_child(service, "reindex_task", force=force)
    rt = runtime()
    last: dict | None = None
    try:
        with graph_writer():
            # Marked before the pending flag is popped and cleared only after the last
            # pass: a writer killed in between leaves it, and recovery serves it again.
            # (An exception clears it too: only a death mid-pass leaves it behind.)
            huey.storage.put_data(REINDEX_RUNNING, b"1")
            try:
                first = True
                while huey.storage.pop_data(REINDEX_PENDING) is not EmptyData or first:
                    last = _reindex_once(rt, force=force and first)
                    first = False
            finally:
                huey.storage.pop_data(REINDEX_RUNNING)
    except TaskLockedException:
        return None
    return last


def _reindex_once(rt: Runtime, *, force: bool) -> dict:
    with session_scope(rt.db) as session:
        count = control.incr_counter(session, "repairs_since_maintain")
        due = rt.settings.maintain_every > 0 and count >= rt.settings.maintain_every
        if due:
            control.set_flag(session, "repairs_since_maintain", "0")
    failpoint("reindex:holding_lock")
    s = rt.settings
    vec = {"vectors": s.index_vectors, "embed_model": s.embed_model}
    report = maintenance.repair(s.kb_path, maintain=due, **vec)
    if report.action not in ("valid", "missing"):
        with session_scope(rt.db) as session:
            control.record_error(
                session,
                kind="graphml_corrupt",
                severity="warn",
                message=f"{report.action}: {report.detail}",
            )
    stats = maintenance.reindex(s.kb_path, force=force, **vec)
    log.info("reindexed", repair=report.action, **stats.to_dict())
    if stats.errors:
        with session_scope(rt.db) as session:
            control.record_error(
                session, kind="reindex_fail", message="; ".join(stats.errors)[:500]
            )
    return stats.to_dict()


@huey.periodic_task(crontab(minute="*/30"))
def communities() -> bool | None:
    """Every 30 minutes: re-cluster the graph and regenerate community reports if it changed.

    Deferred here so that an insert never re-clusters the whole graph (B14); the global
    search mode reads the reports this builds.

    Returns:
        ``True`` when it rebuilt, ``False`` when there was nothing to do, ``None`` when a
        reindex held the graph.
    """
    service = supervisor.current()
    if service is not None and settings.index_vectors:
        if not maintenance.communities_owed(settings.kb_path):
            return False  # decided from one SQLite row: no child started every 30 minutes
        return _in_child(service, "communities")
    try:
        with graph_writer():
            return maintenance.rebuild_communities(
                settings.kb_path, vectors=settings.index_vectors, embed_model=settings.embed_model
            )
    except TaskLockedException:
        return None  # a reindex holds the graph; the next run catches up


def _in_child(service: supervisor.ModelService, op: str, **args: object) -> Any:
    """Run a KB-wide task's body in the model child; its failure fails this task as before."""
    answer = service.call(op, **args)
    if not answer.get("ok"):
        raise RuntimeError(f"model service {op}: {answer.get('kind')}: {answer.get('error')}")
    return answer.get("result")


@huey.periodic_task(crontab(minute="17"))
def dedupe_reflections() -> list[dict[str, Any]]:
    """Hourly: the Reflection Store's dedupe pass for every repository that is due.

    A repository is due once ``REFLECT_DEDUPE_INTERVAL_SEC`` (a day) has passed since its
    last applied pass (a ledger flag, so restarts and other workers see it); the calls
    spend the pass's own ``REFLECT_DEDUPE_DAILY_MAX`` units, never the writer's. Running
    hourly rather than daily means a pass deferred by the quota gate, the units or an
    error is tried again within the hour, not a day later.

    Returns:
        The reports of the repositories where something was tried
        (:meth:`~reflect_jobs.reflections.dedupe_run.DedupeReport.to_json`).
    """
    from .reflections.dedupe_run import run_due

    rt = runtime()  # logging configured, modes repaired; the write lease
    reports = run_due(settings, huey.storage, lease=rt.write_lease)
    return [r.to_json() for r in reports if r.status not in ("not_due", "too_few")]


@huey.periodic_task(crontab(minute="*"))
def refresh_reflections() -> dict[str, Any]:
    """Every minute: bring the reflection index up to date, in the background, bounded.

    The session-start hook and ``status --line`` only read the last committed index and
    leave a request when the logs moved beyond their small budget (ARCHITECTURE §14); this
    serves the requests and every repository this machine knows. A big log is indexed over
    several runs (40 s of work each, committed as it goes); a refresh already running in
    another process is not waited for.

    Returns:
        ``{"repos", "refreshed", "events", "unfinished", "errors"}``.
    """
    from dataclasses import asdict

    from .reflections.background import refresh_known
    from .reflections.events import host_name

    runtime()  # logging configured, modes repaired
    report = refresh_known(settings.home, settings.kb_path, host_name())
    if report.refreshed or report.errors:
        log.info("reflections refreshed", **asdict(report))
    return asdict(report)


STAGE_TASKS = {"prepare": prepare, "write": write, "add": add}


def recover_now(spool_min_age_sec: float = SPOOL_MIN_AGE_SEC) -> dict[str, int]:
    """Re-queue expired leases and re-send messages for every due job (idempotent).

    Also turns the captures left in the spool into jobs (a message lost with a killed
    worker, a queue or ledger that was down: ``pipeline.capture.reconcile_spool``),
    applies note edits a killed worker left pending, serves a reindex request whose
    task was lost, and prunes the caps' counters of past windows.

    Args:
        spool_min_age_sec: Reconcile only spool entries at least this old; consumer
            start-up and ``drain`` pass 0 (no message of theirs can be in flight yet).

    Returns:
        ``{"recovered": n, "resent": n, "spooled": n, "idle": n}``: jobs taken back from
        dead workers, due jobs whose stage task was enqueued again, spooled captures
        recorded, and idle sessions captured for their deep pass.
    """
    rt = runtime()
    with session_scope(rt.db) as session:
        recovered = recover_expired(session, max_recoveries=rt.settings.max_recoveries)
    spooled = reconcile_spool(rt, min_age_sec=spool_min_age_sec)["spooled"]
    idle = sweep_idle_sessions(rt)  # sessions that never ended get their deep pass
    heal_note_edits(rt)  # a worker killed between its add commit and the note rewrites
    with session_scope(rt.db) as session:
        due = [(j.id, j.stage) for j in due_jobs(session)]
    for job_id, stage in due:
        if stage in STAGE_TASKS:
            STAGE_TASKS[stage](job_id)
    if any(huey.storage.peek_data(k) is not EmptyData for k in (REINDEX_PENDING, REINDEX_RUNNING)):
        # A request whose task was lost, or a pass a killed writer left unfinished: serve
        # it now (a writer still alive holds the lock; this task then just returns).
        reindex_task()
    rt.caps.prune()
    from .reflections.dedupe_run import dedupe_caps

    dedupe_caps(rt.settings, huey.storage).prune()  # the dedupe pass's own daily units
    with session_scope(rt.db) as session:  # retention: see prune_chunks / prune_heartbeats
        learnings.prune_chunks(session)
        control.prune_heartbeats(session)
    if recovered or due or spooled or idle:
        log.info("recovery", recovered=len(recovered), resent=len(due), spooled=spooled, idle=idle)
    return {"recovered": len(recovered), "resent": len(due), "spooled": spooled, "idle": idle}


@huey.periodic_task(crontab(minute="*"))
def recover() -> dict[str, int]:
    """Every minute: lost messages and dead workers' jobs come back (ARCHITECTURE §1).

    Records this process's heartbeat first (a failure to do so is ignored).

    Returns:
        What :func:`recover_now` returns.
    """
    with contextlib.suppress(Exception), session_scope(settings.db_url) as session:
        control.beat(session, worker_id().rsplit(":", 1)[0])
    return recover_now()


@huey.on_startup()
def _on_startup() -> None:
    configure_logging(settings)
    with contextlib.suppress(Exception), session_scope(settings.db_url) as session:
        control.beat(session, worker_id().rsplit(":", 1)[0])
