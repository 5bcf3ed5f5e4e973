"""The dedupe pass's runner: when a repository is due, one cheap call, its cost, the drops.

Gates, in order, all free: the kill switch and the drain's dry run (no call), fewer than two
open items (nothing to group: no call, no unit), the interval (``dedupe_interval_sec``, a day
since the repository's last pass, unless a person asked), the heuristic writer (it has no
model to ask), then the paid path shared with the write stage
(``pipeline/paid_call.py``, :data:`reflect_jobs.gates.PAID_PATH` order): a write slot, the
quota gate, and one unit of the pass's **own** daily budget
(``REFLECT_DEDUPE_DAILY_MAX``, counted under ``caps:dedupe:<utc-day>`` in Huey's storage by
:class:`reflect_jobs.limits.Caps`, apart from the writer's ``caps:daily:``). Then one call to
the configured writer backend with ``REFLECT_DEDUPE_MODEL``; its answer is redacted and its
cost committed to the ledger (a row with no job, ``pending`` until the answer is parsed,
then outcome ``dedupe_…``, so ``reflect-jobs cost`` shows it; a pass that dies in between
reuses the recorded answer next time instead of paying again); then the drops are appended (``by:
reflector``, one ``drop`` event each, event ids derived from the pass so a retry writes
nothing twice).

**When a repository was last deduplicated** is a ledger control flag
(``dedupe:<hash of the repo key>`` → ``{"at", "repo"}``), not a Huey key: the ledger is the
durable truth shared by every worker and machine, whereas a Redis queue may be flushed (and
the interval would silently restart). The flag is *claimed* before the call with a
compare-and-set (an UPDATE on the value read, or an INSERT that fails on a race), so two
workers that find a repository due at once make one call; it is put back when the pass
ends without an applied answer (a closed gate, no unit, a backend error, an unparseable
answer), so the next periodic run tries again, within the daily units.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import delete, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from reflect_jobs.config import Settings
from reflect_jobs.gates import Defer, Gate, Go, first_defer, kill_switch
from reflect_jobs.gates import dry_run as dry_run_gate
from reflect_jobs.ledger import control
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Control, utcnow
from reflect_jobs.limits import Caps, CapsGate, CounterStorage
from reflect_jobs.pipeline import paid_call
from reflect_jobs.repo import RepoError
from reflect_jobs.write_lease import LEASE_WAIT_SEC, LeaseGate, WriteLease
from reflect_jobs.writer.outcomes import AttemptContext, classify_attempt
from reflect_jobs.writer.quota import QuotaGate

from .dedupe import build_prompt, dedupe_candidates, parse_groups, plan_drops
from .events import EventError, host_name
from .index import ReflectionIndex, index_path
from .known import known_repos
from .store import Store, StoreError

DEDUPE_PREFIX = "caps:dedupe:"
log = structlog.get_logger("reflect_jobs.reflections.dedupe")

__all__ = ["DEDUPE_PREFIX", "DedupeReport", "dedupe_caps", "run_dedupe", "run_due"]


def dedupe_caps(settings: Settings, storage: CounterStorage) -> Caps:
    """The pass's own daily budget over Huey's storage (no per-window cap).

    Args:
        settings: Supplies ``dedupe_daily_max``.
        storage: Huey's storage (shared by every consumer: one budget for all).

    Returns:
        :class:`~reflect_jobs.limits.Caps` counting ``caps:dedupe:<utc-day>``.
    """
    return Caps(
        storage,
        daily_max=settings.dedupe_daily_max,
        run_max=0,
        window_sec=0,
        daily_prefix=DEDUPE_PREFIX,
    )


@dataclass
class DedupeReport:
    """What one pass over one repository did (``--json`` prints :meth:`to_json`).

    ``status``: ``done`` (an answer was applied), ``dry_run`` (asked, nothing written),
    ``too_few`` (fewer than 2 open items), ``not_due``, ``deferred`` (quota gate or no
    unit left), ``heuristic`` (no model to ask), ``disabled``, ``failed`` (the call or its
    answer failed; nothing dropped).
    """

    repo: str
    status: str
    detail: str = ""
    offered: int = 0
    groups: list[dict[str, Any]] = field(default_factory=list)
    held: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0
    ignored: dict[str, int] = field(default_factory=dict)
    outcome: str = ""
    cost_usd: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The report as a plain dict.

        Returns:
            Every field; ``groups`` is ``[{"keep": {"id", "title"}, "drop": [{"id",
            "title"}]}]``; ``held`` the person's items the pass left open, ``[{"id",
            "title", "keep"}]`` (a person confirms with ``reflections drop``).
        """
        return asdict(self)


def _flag_key(repo_key: str) -> str:
    """The control flag of a repository's last pass (keys are at most 64 characters)."""
    return "dedupe:" + hashlib.sha256(repo_key.encode()).hexdigest()[:24]


def _flag_at(value: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(json.loads(value or "")["at"])
    except (ValueError, KeyError, TypeError):
        return None


def last_dedupe(db_url: str, repo_key: str, aliases: tuple[str, ...] = ()) -> datetime | None:
    """When the repository's last pass was applied (or claimed by a pass still running).

    Args:
        db_url: The ledger.
        repo_key: The repository.
        aliases: Older names of the repository whose flags count too (its memory home's
            directory name keyed the flag before ``reflect_jobs/repo.py``), so a pass made
            before the upgrade is not paid for again.

    Returns:
        An aware UTC datetime, or ``None`` when it never ran.
    """
    with session_scope(db_url, readonly=True) as session:
        seen = [_flag_at(control.get_flag(session, _flag_key(k))) for k in (repo_key, *aliases)]
    return max((at for at in seen if at is not None), default=None)


def _claim(db_url: str, repo_key: str, now: datetime, interval: int, force: bool) -> Any:
    """Compare-and-set the last-pass flag to ``now``; returns the old value, or False."""
    key = _flag_key(repo_key)
    new = json.dumps({"at": now.isoformat(), "repo": repo_key})
    try:
        with session_scope(db_url) as session:
            row = session.get(Control, key)
            old = row.value if row is not None else None
            at = _flag_at(old)
            if not force and at is not None and at > now - timedelta(seconds=interval):
                return False
            if row is None:
                session.add(Control(key=key, value=new, updated_at=utcnow()))
                session.flush()
            else:
                done = session.execute(
                    update(Control)
                    .where(Control.key == key, Control.value == old)
                    .values(value=new, updated_at=utcnow())
                )
                if getattr(done, "rowcount", 0) != 1:
                    return False
            return old or ""
    except IntegrityError:  # another worker inserted it first
        return False


def _unclaim(db_url: str, repo_key: str, now: datetime, old: str) -> None:
    """Put the flag back as it was, if it is still our claim (the pass applied nothing)."""
    key = _flag_key(repo_key)
    mine = json.dumps({"at": now.isoformat(), "repo": repo_key})
    with session_scope(db_url) as session:
        if old:
            session.execute(
                update(Control)
                .where(Control.key == key, Control.value == mine)
                .values(value=old, updated_at=utcnow())
            )
        else:
            session.execute(delete(Control).where(Control.key == key, Control.value == mine))


class DedupeClaim:
    """The repository's last-pass flag as a gate: claimed by compare-and-set before the
    call (one of two racing workers wins), put back by :meth:`refund` when the pass applied
    nothing, so the next periodic run tries again.

    Args:
        db_url: The ledger.
        repo_key: The repository.
        now: This pass's time (the flag's new value).
        interval: ``REFLECT_DEDUPE_INTERVAL_SEC``.
        force: Claim whatever the interval (a person asked).
    """

    name = "claim"

    def __init__(self, db_url: str, repo_key: str, now: datetime, interval: int, force: bool):
        """Bind the gate to the repository; nothing is written until :meth:`acquire`."""
        self.db_url, self.repo_key, self.now = db_url, repo_key, now
        self.interval, self.force = interval, force

    def acquire(self) -> Go | Defer:
        """Compare-and-set the flag to this pass's time.

        Returns:
            ``Go`` holding the value it replaced, or ``Defer`` (another pass is newer).
        """
        old = _claim(self.db_url, self.repo_key, self.now, self.interval, self.force)
        if old is False:
            return Defer(self.name, "deduplicated less than the interval ago")
        return Go(self.name, old)

    def release(self, go: Go) -> None:
        """An applied pass keeps its claim: it is the repository's last pass.

        Args:
            go: The pass this gate gave.
        """

    def refund(self, go: Go) -> None:
        """Nothing was applied: put the flag back as it was, if it is still ours.

        Args:
            go: The pass holding the replaced value.
        """
        _unclaim(self.db_url, self.repo_key, self.now, go.taken)


def _eid(repo_key: str, stamp: str, uid: str) -> str:
    raw = "\x1f".join(["dedupe", repo_key, stamp, uid])
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def run_dedupe(
    store: Store,
    settings: Settings,
    storage: CounterStorage,
    *,
    force: bool = False,
    dry_run: bool = False,
    lease: WriteLease | None = None,
) -> DedupeReport:
    """One pass over one repository's store, if it is due (see the module docstring).

    Args:
        store: The repository's store (writes go to this host's log).
        settings: The settings (model, units, interval, backend, ledger).
        storage: Huey's storage, for the pass's own daily units.
        force: Run whatever the interval (a person asked); the units still apply.
        dry_run: Make the call and report the groups, but drop nothing and leave the
            repository due (the call is paid: it takes a unit and its cost is recorded).
        lease: The write lease (``REFLECT_WRITE_CONCURRENCY`` paid calls in flight, §4):
            a slot is held from before the quota gate until the answer's telemetry is
            recorded, as the write stage does; ``None`` takes none.

    Returns:
        What happened.

    Raises:
        Exception: What the store, the ledger or the backend raised; the repository's
            claim is put back first, so it stays due.
    """
    key = store.repo.key
    off = first_defer([kill_switch(settings.disabled), dry_run_gate(settings.dry_run)])
    if off is not None:
        return DedupeReport(key, "disabled", f"{off.reason}: no model call")
    candidates = dedupe_candidates(store.items("open"))
    if len(candidates) < 2:
        return DedupeReport(key, "too_few", f"{len(candidates)} open item(s): nothing to group")
    backend_name = settings.resolved_writer_backend()
    if backend_name == "heuristic":
        return DedupeReport(key, "heuristic", "the heuristic writer has no model to ask")
    now = datetime.now(UTC)
    last = None if force or dry_run else last_dedupe(settings.db_url, key, store.repo.names)
    if last is not None and last > now - timedelta(seconds=settings.dedupe_interval_sec):
        # read-only first: the hourly task takes no ledger write lock for a repository
        # that is not due
        return DedupeReport(key, "not_due", f"deduplicated at {last:%Y-%m-%d %H:%M} UTC")
    gate = DedupeClaim(settings.db_url, key, now, settings.dedupe_interval_sec, force)
    claim = None if dry_run else gate.acquire()  # a dry run leaves the repository due
    if isinstance(claim, Defer):
        return DedupeReport(key, "not_due", claim.reason)
    try:
        report = _ask(store, settings, storage, backend_name, candidates, dry_run, now, lease)
    except BaseException:
        if claim is not None:
            with contextlib.suppress(Exception):
                gate.refund(claim)
        raise
    if report.status != "done" and claim is not None:
        gate.refund(claim)
    return report


def _ask(
    store: Store,
    settings: Settings,
    storage: CounterStorage,
    backend_name: str,
    candidates: list[Any],
    dry_run: bool,
    now: datetime,
    lease: WriteLease | None,
) -> DedupeReport:
    """The gated call, its recorded cost, the parse and (unless ``dry_run``) the drops."""
    key = store.repo.key
    prompt, offered = build_prompt(candidates)
    gates: list[Gate] = [
        QuotaGate.from_settings(settings, paid_call.snapshots(settings.db_url)),
        CapsGate(dedupe_caps(settings, storage), "dedupe "),
    ]
    if lease is not None:  # held from before the quota gate until the answer is recorded
        gates.append(LeaseGate(lease, LEASE_WAIT_SEC))
    spec = paid_call.PaidPass(
        kind="dedupe",
        backend=backend_name,
        model=settings.dedupe_pass_model,
        label=f"dedupe:{key}",
        after_record="dedupe:after_record",
    )
    answer = paid_call.call(settings, spec, gates, lambda: prompt)
    if isinstance(answer, Defer):
        log.info("dedupe deferred", repo=key, gate=answer.gate, reason=answer.reason)
        detail = answer.reason
        if answer.gate == "caps" and answer.until is not None:
            detail += f"; resets {answer.until:%H:%M} UTC"
        return DedupeReport(key, "deferred", detail)
    if answer.result is None:  # the backend is missing: nothing was paid
        answer.settle(0)
        log.warning("dedupe backend missing", repo=key, error=answer.missing)
        return DedupeReport(
            key, "failed", f"backend missing: {answer.missing}", offered=len(offered)
        )
    result = answer.result
    attempt = classify_attempt(result, AttemptContext(0, 0, 0, expect_actions=False))
    parsed = parse_groups(result.text, offered) if attempt.disposition == "ok" else None
    if parsed is None:
        outcome = f"dedupe_{attempt.outcome}"
    elif parsed.error:
        outcome = "dedupe_unparseable"
    else:
        outcome = "dedupe_dry_run" if dry_run else "dedupe_ok"
    if answer.row_id is not None:
        paid_call.settle_row(settings.db_url, answer.row_id, outcome)
    answer.settle(attempt.entries)  # a free outcome (a rate limit, a refused key…): not paid
    report = DedupeReport(key, "failed", offered=len(offered), outcome=outcome)
    report.cost_usd = float(result.cost_usd or 0.0)
    if parsed is None or parsed.error:
        report.detail = attempt.detail if parsed is None else parsed.error
        log.warning("dedupe call failed", repo=key, outcome=outcome, detail=report.detail)
        return report
    report.ignored = parsed.counts()
    store.refresh()
    planned = plan_drops(parsed.groups, store.items("open"), own=store.host)
    drops = [d for d in planned if not d.held]
    report.held = [
        {"id": d.item.id, "title": d.item.title, "keep": d.keep.id} for d in planned if d.held
    ]
    groups: dict[str, dict[str, Any]] = {}
    for drop in drops:
        group = groups.setdefault(
            drop.keep.uid, {"keep": {"id": drop.keep.id, "title": drop.keep.title}, "drop": []}
        )
        group["drop"].append({"id": drop.item.id, "title": drop.item.title})
    report.groups = list(groups.values())
    report.status = "dry_run" if dry_run else "done"
    if dry_run:
        report.detail = f"would drop {len(drops)} of {len(offered)} open item(s)"
        return report
    stamp = now.isoformat()
    for drop in drops:
        try:
            wrote = store.record(
                "drop",
                drop.item.uid,
                eid=_eid(key, stamp, drop.item.uid),
                by="reflector",
                note=drop.note,
            )
        except (EventError, StoreError) as exc:  # not reachable with our own note
            log.warning("dedupe drop rejected", repo=key, error=str(exc))
            continue
        report.dropped += int(wrote)
    store.refresh()
    report.detail = f"dropped {report.dropped} of {len(offered)} open item(s)"
    if report.held:
        report.detail += f"; {len(report.held)} person's item(s) held for a person to drop"
    log.info("dedupe pass", repo=key, dropped=report.dropped, groups=len(groups), **report.ignored)
    return report


def run_due(
    settings: Settings,
    storage: CounterStorage,
    environ: dict[str, str] | None = None,
    lease: WriteLease | None = None,
) -> list[DedupeReport]:
    """The periodic path: every repository this machine knows, each pass only if due.

    Repositories are those with logs in a default memory home or already in this machine's
    index (as ``reflections list --all`` and the dashboard see them). A repository whose
    store or ledger fails is logged and skipped; the others still run.

    Args:
        settings: The settings.
        storage: Huey's storage (the pass's units).
        environ: The environment (``REFLECT_HOST`` names the log written); ``None`` means
            ``os.environ``.
        lease: The write lease (see :func:`run_dedupe`).

    Returns:
        One report per repository looked at.
    """

    from reflect_jobs.envpaths import environ as merged_environ

    env = merged_environ(environ)
    out: list[DedupeReport] = []
    index = ReflectionIndex(index_path(settings.home))
    try:
        for known in known_repos(index, settings.kb_path):
            store, key = Store(known, host_name(env), index), known.display
            try:
                out.append(run_dedupe(store, settings, storage, lease=lease))
            except (RepoError, OSError, ValueError, sqlite3.Error, SQLAlchemyError) as exc:
                log.warning("dedupe pass failed", repo=key, error=f"{type(exc).__name__}: {exc}")
                out.append(DedupeReport(key, "failed", f"{type(exc).__name__}: {exc}"))
    finally:
        index.close()
    return out
