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
import threading
from datetime import datetime
from functools import cache
from typing import Any

import structlog
from huey import crontab
from huey.constants import EmptyData

from . import kb_jobs
from .config import resolve
from .housekeeping import prune
from .index import maintenance
from .kb_jobs import REINDEX_PENDING, REINDEX_RUNNING
from .ledger import control
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
from .pipeline.runtime import Runtime, stage_failed, transient_error
from .pipeline.write import run_write
from .queue import make_huey
from .queue_repair import record_repairs
from .warm import supervisor
from .write_lease import make_write_lease

_resolved = resolve()
settings = _resolved.settings
huey = make_huey(settings, repair=True)  # a garbled queue file is moved aside, not fatal
#: What this process's heartbeat says it is: ``worker`` (the service) or ``drain``, which
#: sets it before starting its in-process consumer (``status`` flags two *workers*).
CONSUMER_KIND = "worker"
log = structlog.get_logger("reflect_jobs.tasks")


def graph_writer() -> contextlib.AbstractContextManager[None]:
    """One graph writer at a time (:func:`reflect_jobs.kb_jobs.graph_writer` on this queue).

    Returns:
        A context manager holding the lock for its block; entering it raises
        ``TaskLockedException`` when another graph writer holds the lock.
    """
    return kb_jobs.graph_writer(huey, settings)


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
    record_repairs(huey.storage, settings.db_url, caps)  # a garbled queue moved aside
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
    run_prepare(runtime(), job_id)


@huey.task()
def write(job_id: str) -> None:
    """The write stage (see :func:`reflect_jobs.pipeline.write.run_write`).

    Args:
        job_id: The job to write.
    """
    run_write(runtime(), job_id)


@huey.task()
def add(job_id: str) -> None:
    """The add stage (see :func:`reflect_jobs.pipeline.add.run_add`).

    Args:
        job_id: The job to add.
    """
    run_add(runtime(), job_id)


@huey.task()
def stale_anchors(reached: list) -> list[str]:
    """Take learnings whose anchors were gone at STALE_AFTER session starts out of circulation.

    Sent by the SessionStart hook (``recall/session_start.py``, ARCHITECTURE §13.2); the ledger and
    the note become ``stale_anchors`` and the coalesced reindex drops them from the context
    store and search.

    Args:
        reached: ``[[id, [missing anchors]], …]``.

    Returns:
        The ids moved.
    """
    from .pipeline.stale import apply_stale

    rt = runtime()
    return _changed(rt, "stale anchors", apply_stale(rt.db, reached))


@huey.task()
def confirm_learnings(entries: list) -> list[str]:
    """Record confirmations the MCP server saw (an agent's ``get``; ARCHITECTURE §13.3).

    Args:
        entries: ``[[id, by, session or None], …]``.

    Returns:
        The ids whose confirmation was recorded.
    """
    from .pipeline.confirm import apply_confirmations

    rt = runtime()
    return _changed(rt, "confirmed", apply_confirmations(rt.settings.kb_path, rt.db, entries))


@huey.periodic_task(crontab(minute="41"))
def forget_expired() -> list[str]:
    """Hourly: forget every learning whose own ``forget_after`` has passed (seed 003).

    Returns:
        The ids forgotten (``pipeline/expiry.py:forget_expired``).
    """
    from .pipeline.expiry import forget_expired as sweep

    rt = runtime()
    return _changed(rt, "forget_after", sweep(rt.settings.kb_path, rt.db))


def _changed(rt: Runtime, what: str, ids: list[str]) -> list[str]:
    """Log the learnings a task changed and ask for the coalesced reindex (unless skipped)."""
    if ids:
        log.info(what, learnings=ids)
        if not rt.settings.skip_reindex:
            rt.dispatcher.kb_changed()
    return ids


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
    runtime()  # logging configured, modes repaired
    return kb_jobs.reindex(huey, settings, force=force)


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
    return kb_jobs.communities(huey, settings)


def _in_child(service: supervisor.ModelService, op: str, **args: Any) -> Any:
    """Run a KB-wide task's body in the model child; its failure fails this task as before."""
    answer = service.call(op, **args)
    if not answer.get("ok"):
        raise RuntimeError(f"model service {op}: {answer.get('kind')}: {answer.get('error')}")
    return answer.get("result")


@huey.periodic_task(crontab(minute="17"))
def dedupe_reflections() -> list[dict[str, Any]]:
    """Hourly: the Reflection Store's dedupe pass for every repository that is due.

    A repository is due once a day (``dedupe_interval_sec``) has passed since its
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
def nightly() -> dict[str, Any] | None:
    """Every minute, a cheap check: the nightly layer runs once per ``REFLECT_NIGHTLY_AT`` slot.

    Due when no run completed since the latest slot (a ledger flag), so a worker that was
    down at 03:30 catches up once when it starts, and not again until the next slot. A
    ledger that never saw a run records now as its baseline (nothing was missed yet).

    Returns:
        The run's result when it ran, else ``None``.
    """
    from datetime import UTC

    from .nightly import state
    from .nightly.run import run_nightly

    now = datetime.now(UTC)
    if not state.due(settings.db_url, now, settings.nightly_at):
        return None
    rt = runtime()
    result = run_nightly(
        settings,
        huey.storage,
        now=now,
        lease=rt.write_lease,
        kb_changed=HueyDispatcher().kb_changed,
    )
    return result.to_json() if result.status not in ("not_due", "running") else None


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
    from .statusline import refresh_cache

    refresh_cache(budget_sec=5.0)  # the status line's counts kept current (statusline.py)
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
    prune(rt.settings, huey.storage, rt.caps)
    if recovered or due or spooled or idle:
        log.info("recovery", recovered=len(recovered), resent=len(due), spooled=spooled, idle=idle)
    return {"recovered": len(recovered), "resent": len(due), "spooled": spooled, "idle": idle}


def beat_now() -> None:
    """Record this process's heartbeat with the configuration it runs with (errors ignored)."""
    from .consumers import effective_config

    with contextlib.suppress(Exception), session_scope(settings.db_url) as session:
        control.beat(
            session,
            worker_id().rsplit(":", 1)[0],
            effective_config(settings, CONSUMER_KIND),
        )


@huey.periodic_task(crontab(minute="*"))
def recover() -> dict[str, int]:
    """Every minute: lost messages and dead workers' jobs come back (ARCHITECTURE §1).

    Records this process's heartbeat first (a failure to do so is ignored).

    Returns:
        What :func:`recover_now` returns.
    """
    beat_now()
    return recover_now()


_started = threading.Event()


@huey.on_startup()
def _on_startup() -> None:
    configure_logging(settings)
    beat_now()
    if _started.is_set():  # one check per process, not one per worker thread
        return
    _started.set()
    for line in _resolved.warnings:
        log.warning("config_warning", problem=line)
    if CONSUMER_KIND == "worker":
        from .consumers import flag_second_worker

        with contextlib.suppress(Exception):
            flag_second_worker(settings)
