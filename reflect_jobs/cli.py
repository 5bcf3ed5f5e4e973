"""``reflect-jobs``: operate the queue, the ledger and the KB (DESIGN §9).

Exit codes: 0 success, 1 a handled failure (doctor found problems, a job cannot be retried),
2 bad usage or bad configuration. Errors are one line on stderr. Every command that prints
data has ``--json`` with the stable shapes of DESIGN §9. Heavy modules (Huey, torch) are
imported inside the commands that need them.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from .config import Settings, SettingsError, load_settings

HARNESSES = ("claude", "codex", "copilot")


def _settings() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None


def _quiet_libraries(s: Settings) -> None:
    """Route library logging (model loading, Huey) to drain.log, not the terminal or --json."""
    from .logging import configure_logging

    configure_logging(s, console=False)


def _emit(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


def _iso(dt: datetime | None) -> str | None:
    return dt.isoformat() if dt else None


def _table(rows: list[list[Any]], headers: list[str]) -> str:
    cells = [[str(c) if c is not None else "" for c in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)
    ]
    line = "  ".join(
        click.style(h.ljust(w), bold=True) for h, w in zip(headers, widths, strict=True)
    )
    out = [line]
    for r in cells:
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    return "\n".join(out)


def known_failure(exc: BaseException) -> str | None:
    """One clear line for failures a person can act on (DESIGN §9), else None (a bug)."""
    name, text = type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    module = type(exc).__module__
    if module.startswith("sqlalchemy") and name == "OperationalError":
        if "locked" in text:
            return "the ledger is locked by another process (waited 30 s); try again, or find the process holding reflect.db"
        return f"cannot use the ledger: {text[:300]}"
    if module.startswith("redis") and "Connection" in name:
        return f"cannot reach the Redis queue: {text[:300]}"
    if name == "SearchError":
        return text
    return None


class _Main(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            message = known_failure(exc)
            if message is None:
                raise
            raise click.ClickException(message) from None


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="reflect-jobs")
def main() -> None:
    """Turn coding-agent transcripts into a searchable knowledge base, in the background."""


# --- queue ------------------------------------------------------------------------------


@main.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--harness", type=click.Choice(HARNESSES), default="claude", show_default=True)
@click.option("--session-id", default=None, help="Defaults to the transcript's file stem.")
@click.option("--event", default="manual", show_default=True)
@click.option(
    "--settle",
    type=int,
    default=0,
    show_default=True,
    help="Seconds to wait for more captures before preparing.",
)
def enqueue(path: str, harness: str, session_id: str | None, event: str, settle: int) -> None:
    """Capture a transcript now; prints the job id."""
    s = _settings()
    p = Path(path).expanduser().resolve()
    if not p.is_file():
        raise click.UsageError(f"transcript not found: {p}")
    from . import pipeline, tasks

    job_id = pipeline.run_capture(
        tasks.runtime(), harness, session_id or p.stem, str(p), event, settle
    )
    if job_id is None:
        click.echo("reflect-jobs is disabled (REFLECT_DISABLED=1): nothing enqueued", err=True)
        sys.exit(1)
    click.echo(job_id)
    del s


@main.command()
@click.option(
    "--workers", "-w", type=int, default=None, help="Worker threads (default REFLECT_WORKERS)."
)
def worker(workers: int | None) -> None:
    """Run the consumer (huey_consumer) in the foreground; SIGTERM stops it gracefully."""
    s = _settings()
    exe = shutil.which("huey_consumer", path=os.path.dirname(sys.executable)) or shutil.which(
        "huey_consumer"
    )
    if exe is None:
        raise click.ClickException(
            "huey_consumer not found next to this Python; reinstall reflect-jobs"
        )
    argv = [
        exe,
        "workers.consumer.huey",
        "-w",
        str(workers or s.workers),
        "-k",
        "thread",
        "-g",
        "TERM",
        "-t",
        str(max(30, s.timeout_sec)),
        "-f",  # flush locks left by a killed consumer
        "-l",
        str(s.home / "consumer.log"),
    ]
    s.home.mkdir(parents=True, exist_ok=True)
    os.execv(exe, argv)


@main.command()
@click.option("--until-idle", is_flag=True, help="Stop when no job is runnable now.")
@click.option("--max-seconds", type=float, default=None, help="Stop after this long in any case.")
@click.option("--workers", "-w", type=int, default=None)
@click.option("--json", "as_json", is_flag=True)
def drain(until_idle: bool, max_seconds: float | None, workers: int | None, as_json: bool) -> None:
    """Run a consumer in this process (for cron, tests and the demo)."""
    s = _settings()
    from .drain import run_drain

    summary = run_drain(
        s, until_idle=until_idle, max_seconds=max_seconds, workers=workers or s.workers
    )
    if as_json:
        _emit(summary)
    else:
        click.echo(
            f"drained in {summary['seconds']:.1f}s: "
            + ", ".join(f"{k}={v}" for k, v in summary["counts"].items())
        )


# --- status and inspection ---------------------------------------------------------------


def status_data(s: Settings) -> dict[str, Any]:
    from .status import collect_status

    return collect_status(s)


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--line", is_flag=True, help="One line, for shell prompts and status lines.")
def status(as_json: bool, line: bool) -> None:
    """Counts by state, budget, run window, quota gate, last success and warnings."""
    s = _settings()
    data = status_data(s)
    if as_json:
        _emit(data)
        return
    counts = data["counts"]
    if line:
        parts = [f"{k}:{v}" for k, v in counts.items() if v]
        b = data["budget"]
        flag = " HALTED" if data["halted"] else ""
        warn = f" ⚠{len(data['warnings'])}" if data["warnings"] else ""
        click.echo(
            f"reflect {' '.join(parts) or 'idle'} budget {b['used']}/{b['limit']}{flag}{warn}"
        )
        return
    click.echo(
        click.style("reflect-jobs status", bold=True)
        + f"  (db {data['stores']['db']}, queue {data['stores']['queue']})"
    )
    click.echo("jobs: " + (", ".join(f"{k} {v}" for k, v in counts.items() if v) or "none"))
    b, r, q = data["budget"], data["run_window"], data["quota"]
    click.echo(
        f"budget {b['day']}: {b['used']}/{b['limit']} used; run window {r['used']}/{r['limit']} (resets {r['resets_at']})"
    )
    click.echo(
        f"quota gate: {q['gate'].upper()}" + (f" ({q['reason']})" if q.get("reason") else "")
    )
    click.echo(
        f"last success: {data['last_success_at'] or 'never'}; worker heartbeat: {data.get('heartbeat_at') or 'never'}"
    )
    if data["halted"]:
        click.secho(
            f"WRITE STAGE HALTED: {data['halt_reason']} — fix it, run `reflect-jobs doctor`, then `reflect-jobs resume`",
            fg="red",
            bold=True,
        )
    for w in data["warnings"]:
        click.secho(f"warning: {w}", fg="yellow")


JOB_KEYS = (
    "id",
    "harness",
    "session_id",
    "transcript_path",
    "stage",
    "state",
    "outcome",
    "attempts",
    "created_at",
    "updated_at",
    "next_run_at",
)


def job_dict(job: Any) -> dict[str, Any]:
    d = {k: getattr(job, k) for k in JOB_KEYS}
    for k in ("created_at", "updated_at", "next_run_at"):
        d[k] = _iso(d[k])
    d["error"] = job.error
    return d


@main.command()
@click.option(
    "--state",
    type=click.Choice(
        ["queued", "running", "deferred", "retrying", "done", "poisoned", "quarantined", "halted"]
    ),
    default=None,
)
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def jobs(state: str | None, limit: int, as_json: bool) -> None:
    """List jobs, newest first."""
    s = _settings()
    from sqlalchemy import select

    from .ledger.db import session_scope
    from .ledger.models import Job

    with session_scope(s.db_url, readonly=True) as session:
        q = select(Job).order_by(Job.created_at.desc()).limit(limit)
        if state:
            q = q.where(Job.state == state)
        rows = [job_dict(j) for j in session.scalars(q)]
    if as_json:
        _emit(rows)
        return
    if not rows:
        click.echo("no jobs")
        return
    click.echo(
        _table(
            [
                [
                    r["id"],
                    r["harness"],
                    r["stage"],
                    r["state"],
                    r["outcome"],
                    r["attempts"],
                    (r["updated_at"] or "")[:19],
                    Path(r["transcript_path"]).name,
                ]
                for r in rows
            ],
            ["id", "harness", "stage", "state", "outcome", "calls", "updated", "transcript"],
        )
    )


def _load_job(session: Any, job_id: str) -> Any:
    from .ledger.models import Job

    job = session.get(Job, job_id)
    if job is None:
        raise click.ClickException(f"no job {job_id}")
    return job


@main.command()
@click.argument("job_id")
@click.option(
    "--slice", "show_slice", is_flag=True, help="Print the slice sent (or to be sent) to the model."
)
@click.option("--json", "as_json", is_flag=True)
def show(job_id: str, show_slice: bool, as_json: bool) -> None:
    """A job and its events."""
    s = _settings()
    from sqlalchemy import select

    from .ledger.db import session_scope
    from .ledger.models import CostRow, JobEvent

    with session_scope(s.db_url, readonly=True) as session:
        job = _load_job(session, job_id)
        data = job_dict(job)
        data.update(
            prepare_stats=job.prepare_stats,
            actions=job.actions,
            slice_path=job.slice_path,
            recoveries=job.recoveries,
            failures=job.failures,
        )
        data["events"] = [
            {
                "at": _iso(e.at),
                "stage": e.to_stage,
                "from": e.from_state,
                "to": e.to_state,
                "outcome": e.outcome,
                "detail": e.detail,
                "worker": e.worker,
            }
            for e in session.scalars(
                select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id)
            )
        ]
        data["costs"] = [
            {
                "at": _iso(c.at),
                "outcome": c.outcome,
                "entries": c.entries,
                "tokens": c.tokens,
                "cost_usd": c.cost_usd,
                "backend": c.backend,
                "model": c.model,
            }
            for c in session.scalars(
                select(CostRow).where(CostRow.job_id == job_id).order_by(CostRow.id)
            )
        ]
    if show_slice:
        path = data.get("slice_path")
        if not path or not os.path.exists(path):
            raise click.ClickException(
                f"job {job_id} has no slice on disk (slices are removed when a job finishes)"
            )
        click.echo(Path(path).read_text(encoding="utf-8"))
        return
    if as_json:
        _emit(data)
        return
    click.echo(
        f"{data['id']}  {data['stage']}/{data['state']}  outcome={data['outcome']}  paid attempts={data['attempts']}"
    )
    click.echo(
        f"transcript: {data['transcript_path']} ({data['harness']}, session {data['session_id']})"
    )
    if data["error"]:
        click.secho(f"error: {data['error']}", fg="red")
    click.echo(
        _table(
            [
                [
                    e["at"][:19],
                    e["stage"],
                    f"{e['from'] or '-'} → {e['to']}",
                    e["outcome"],
                    (e["detail"] or "")[:70],
                ]
                for e in data["events"]
            ],
            ["at", "stage", "state", "outcome", "detail"],
        )
    )


def _retry(job_ids: list[str], states: tuple[str, ...] | None) -> list[tuple[str, str]]:
    s = _settings()
    from sqlalchemy import select

    from . import tasks
    from .ledger.db import session_scope
    from .ledger.jobs import IllegalTransition, retry_job
    from .ledger.models import Job

    done: list[tuple[str, str]] = []
    with session_scope(s.db_url) as session:
        targets = (
            list(session.scalars(select(Job).where(Job.state.in_(states))))
            if states
            else [_load_job(session, j) for j in job_ids]
        )
        for job in targets:
            try:
                done.append((job.id, retry_job(session, job)))
            except IllegalTransition as exc:
                raise click.ClickException(str(exc)) from None
    for job_id, stage in done:
        tasks.HueyDispatcher().schedule(stage, job_id)
    return done


@main.command()
@click.argument("job_ids", nargs=-1)
@click.option("--all-poisoned", is_flag=True)
@click.option("--all-quarantined", is_flag=True)
def retry(job_ids: tuple[str, ...], all_poisoned: bool, all_quarantined: bool) -> None:
    """Send poisoned/quarantined/halted jobs back to their stage."""
    states = tuple(
        st for st, on in (("poisoned", all_poisoned), ("quarantined", all_quarantined)) if on
    )
    if not job_ids and not states:
        raise click.UsageError("name job ids, or --all-poisoned / --all-quarantined")
    done = _retry(list(job_ids), states or None)
    for job_id, stage in done:
        click.echo(f"{job_id}: queued at {stage}")
    if not done:
        click.echo("nothing to retry")


@main.group()
def poison() -> None:
    """Poisoned jobs: list, show, purge."""


@poison.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def poison_list(ctx: click.Context, as_json: bool) -> None:
    ctx.invoke(jobs, state="poisoned", limit=1000, as_json=as_json)


@poison.command("show")
@click.argument("job_id")
@click.pass_context
def poison_show(ctx: click.Context, job_id: str) -> None:
    ctx.invoke(show, job_id=job_id, show_slice=False, as_json=False)


@poison.command("purge")
@click.option("--yes", is_flag=True, help="Do not ask.")
def poison_purge(yes: bool) -> None:
    """Delete poisoned jobs (and their slices) from the ledger; cost rows stay."""
    s = _settings()
    from sqlalchemy import select

    from .ledger.db import session_scope
    from .ledger.models import Job

    with session_scope(s.db_url) as session:
        rows = list(session.scalars(select(Job).where(Job.state == "poisoned")))
        if rows and not yes and not click.confirm(f"purge {len(rows)} poisoned job(s)?"):
            return
        for job in rows:
            if job.slice_path and os.path.exists(job.slice_path):
                os.unlink(job.slice_path)
            session.delete(job)
    click.echo(f"purged {len(rows)} poisoned job(s)")


@main.command()
def resume() -> None:
    """Clear a write-stage halt and re-queue the halted jobs (run doctor first)."""
    s = _settings()
    from sqlalchemy import select

    from . import tasks
    from .ledger import control
    from .ledger.db import session_scope
    from .ledger.jobs import transition
    from .ledger.models import Job, utcnow

    with session_scope(s.db_url) as session:
        reason = control.halt_reason(session)
        control.clear_flag(session, control.HALT_KEY)
        halted = list(session.scalars(select(Job).where(Job.state == "halted")))
        for job in halted:
            transition(session, job, to_state="queued", detail="resumed", next_run_at=utcnow())
        ids = [(j.id, j.stage) for j in halted]
    for job_id, stage in ids:
        tasks.HueyDispatcher().schedule(stage, job_id)
    click.echo(f"write stage resumed (was: {reason or 'not halted'}); {len(ids)} job(s) re-queued")


# --- money -------------------------------------------------------------------------------


@main.command()
@click.option("--since", default="30d", show_default=True, help="Nd, Nh, Nw or all")
@click.option(
    "--by",
    type=click.Choice(["day", "transcript", "model", "outcome", "writer", "backend"]),
    default="day",
    show_default=True,
)
@click.option(
    "--top", type=int, default=15, show_default=True, help="Rows shown (not for --by day)."
)
@click.option("--outlier-tokens", type=int, default=5_000_000, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def cost(since: str, by: str, top: int, outlier_tokens: int, as_json: bool) -> None:
    """What the writer spent, grouped (⚠ marks a bucket with an outlier run)."""
    s = _settings()
    from .ledger.costs import cost_report, parse_since
    from .ledger.db import session_scope

    with session_scope(s.db_url, readonly=True) as session:
        report = cost_report(session, by=by, since=parse_since(since))
    if as_json:
        _emit(report)
        return
    if not report["rows"]:
        click.echo(f"No reflect cost events in the last {since}.")
        return
    items = list(report["rows"].items())
    if by != "day":
        items = sorted(items, key=lambda kv: -kv[1]["tokens"])[:top]
    t = report["total"]
    rows = [_cost_cells(k, v, outlier_tokens) for k, v in items]
    rows.append(_cost_cells("TOTAL", t, None))
    click.echo(_table(rows, [by, "runs", "entries", "tokens", "cache_rd", "io", "$est"]))
    click.echo(
        f"cache reuse: {t['cache_reuse'] * 100:.1f}% of tokens were cache reads"
        " ($est uses per-model prices when the CLI reported none)"
    )
    outliers = [k for k, v in report["rows"].items() if v["max_run_tokens"] > outlier_tokens]
    if outliers:
        click.secho(
            f"⚠ a single run over {outlier_tokens:,} tokens in: {', '.join(outliers)}", fg="yellow"
        )


def _cost_cells(key: str, v: dict[str, Any], outlier_tokens: int | None) -> list[Any]:
    flag = (
        " ⚠" if outlier_tokens is not None and v.get("max_run_tokens", 0) > outlier_tokens else ""
    )
    return [
        key,
        v["runs"],
        v["entries"],
        v["tokens"],
        v["cache_read"],
        v["io"],
        f"${v['cost_usd']:.4f}{flag}",
    ]


# --- KB ----------------------------------------------------------------------------------


@main.command()
@click.argument("query")
@click.option(
    "--mode",
    type=click.Choice(["hybrid", "naive", "local", "global", "lexical"]),
    default="hybrid",
    show_default=True,
)
@click.option("-k", "k", type=int, default=5, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def search(query: str, mode: str, k: int, as_json: bool) -> None:
    """Search the knowledge base (retired notes never appear)."""
    s = _settings()
    _quiet_libraries(s)
    from .index.search import search as do_search

    result = do_search(s.kb_path, query, mode=mode, k=k)
    if as_json:
        _emit(result.hits)
    else:
        if not result.hits:
            click.echo("no matches")
        for i, h in enumerate(result.hits, 1):
            click.echo(f"{i}. {h['title']}  [{h['id']}]  score {h['score']:.3f}\n   {h['path']}")
    for w in result.warnings:
        click.secho(f"warning: {w}", fg="yellow", err=True)


@main.command()
@click.option("--force", is_flag=True, help="Rebuild every index from the notes.")
@click.option("--json", "as_json", is_flag=True)
def reindex(force: bool, as_json: bool) -> None:
    """Bring the indexes in line with the notes (incremental unless --force)."""
    s = _settings()
    _quiet_libraries(s)
    from .index.maintenance import reindex as do_reindex

    bar = None
    if sys.stderr.isatty() and not as_json:
        bar = click.progressbar(length=1, label="reindex", file=sys.stderr)

    def progress(i: int, n: int) -> None:
        if bar is not None:
            bar.length = n
            bar.update(1)

    stats = do_reindex(s.kb_path, force=force, progress=progress)
    if bar is not None:
        bar.render_finish()
    if as_json:
        _emit(stats.to_dict())
    else:
        click.echo(
            f"{stats.notes} notes: {stats.inserted} (re)indexed, {stats.removed} removed, {stats.unchanged} unchanged, graph {stats.graph}"
        )
        for e in stats.errors:
            click.secho(f"warning: {e}", fg="yellow", err=True)


@main.command()
@click.option("--maintain", is_flag=True, help="Also prune orphans and relink isolated nodes.")
def repair(maintain: bool) -> None:
    """Validate and repair the KB's graphml (rebuilt from the notes when beyond repair)."""
    s = _settings()
    _quiet_libraries(s)
    from .index.maintenance import repair as do_repair

    report = do_repair(s.kb_path, maintain=maintain)
    click.echo(
        f"graphml: {report.action}: {report.detail}"
        + (f"; maintain {report.maintained}" if report.maintained else "")
    )
    if report.action == "unrepairable" and not report.rebuilt:
        sys.exit(1)


# --- health ------------------------------------------------------------------------------


@main.command()
@click.option("--json", "as_json", is_flag=True)
def doctor(as_json: bool) -> None:
    """Check the installation; print the fix for each failure; exit 1 if any fails."""
    s = _settings()
    _quiet_libraries(s)
    from .doctor import run_checks

    checks = run_checks(s)
    if as_json:
        _emit(checks)
    else:
        for c in checks:
            mark = (
                click.style("ok  ", fg="green")
                if c["ok"]
                else click.style("FAIL", fg="red", bold=True)
            )
            click.echo(f"{mark} {c['name']}: {c['detail']}")
            if not c["ok"] and c.get("fix"):
                click.echo(f"     fix: {c['fix']}")
    if not all(c["ok"] for c in checks):
        sys.exit(1)


@main.command()
@click.option("--ack", "ack_id", default=None, help="Acknowledge an error by id.")
@click.option("--all", "show_all", is_flag=True, help="Include acknowledged errors.")
@click.option("--json", "as_json", is_flag=True)
def errors(ack_id: str | None, show_all: bool, as_json: bool) -> None:
    """The errors ledger."""
    s = _settings()
    from sqlalchemy import select

    from .ledger.db import session_scope
    from .ledger.models import ErrorRecord

    with session_scope(s.db_url) as session:
        if ack_id:
            row = session.get(ErrorRecord, ack_id)
            if row is None:
                raise click.ClickException(f"no error {ack_id}")
            row.acked = True
            click.echo(f"acknowledged {ack_id}")
            return
        q = select(ErrorRecord).order_by(ErrorRecord.last_at.desc())
        if not show_all:
            q = q.where(ErrorRecord.acked.is_(False))
        rows = [
            {
                "id": e.id,
                "severity": e.severity,
                "kind": e.kind,
                "count": e.count,
                "last_at": _iso(e.last_at),
                "message": e.message,
                "acked": e.acked,
            }
            for e in session.scalars(q)
        ]
    if as_json:
        _emit(rows)
    elif not rows:
        click.echo("no errors")
    else:
        click.echo(
            _table(
                [
                    [
                        r["id"],
                        r["severity"],
                        r["kind"],
                        r["count"],
                        r["last_at"][:19],
                        r["message"][:80],
                    ]
                    for r in rows
                ],
                ["id", "sev", "kind", "n", "last", "message"],
            )
        )


@main.group()
def db() -> None:
    """The ledger database."""


@db.command("upgrade")
def db_upgrade() -> None:
    """Apply Alembic migrations up to head."""
    s = _settings()
    from .config import redact_url
    from .ledger.db import get_engine, migration_status

    engine = get_engine(s.db_url)
    cur, head = migration_status(engine)
    click.echo(f"ledger {redact_url(s.db_url)} at revision {cur} (head {head})")


# --- install and backfill ------------------------------------------------------------------


@main.group()
def install() -> None:
    """Wire reflect-jobs into a harness (hooks) and the service manager (consumer)."""


@install.command("hooks")
@click.option("--harness", type=click.Choice(HARNESSES), required=True)
@click.option(
    "--settings",
    "settings_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="The settings file to edit (default: the harness's user-level file).",
)
@click.option("--uninstall", is_flag=True, help="Remove our entries (and nothing else).")
@click.option("--dry-run", is_flag=True, help="Show the edit as a diff; write nothing.")
def install_hooks(harness: str, settings_file: str | None, uninstall: bool, dry_run: bool) -> None:
    """Merge the reflect-jobs hook into a harness's settings, idempotently (backup first)."""
    from . import install as inst

    path = (
        Path(settings_file).expanduser() if settings_file else inst.default_settings_path(harness)
    )
    spec = inst.HARNESS_SPECS[harness]
    script = inst.hook_script()
    if not uninstall and not os.access(script, os.X_OK):
        raise click.ClickException(
            f"{script} not found or not executable: reinstall reflect-jobs (make install)"
        )
    try:
        change = inst.apply_hooks(
            path,
            harness,
            command=inst.hook_command(harness, script),
            uninstall=uninstall,
            dry_run=dry_run,
        )
    except inst.SettingsFileError as exc:
        raise click.ClickException(str(exc)) from None
    plan = change.plan
    if not change.changed:
        state = "not installed" if uninstall else "already installed"
        click.echo(f"{spec.label}: {state} in {path} (unchanged)")
        return
    if dry_run:
        click.echo(change.diff, nl=False)
        click.echo(f"{spec.label}: dry run, {path} not written")
        return
    parts = [
        f"{verb} {', '.join(events)}"
        for verb, events in (
            ("added", plan.added),
            ("updated", plan.updated),
            ("removed", plan.removed),
        )
        if events
    ]
    backup = f" (backup {change.backup})" if change.backup else ""
    gone = "; the file held nothing else and was deleted" if change.deleted else ""
    click.echo(f"{spec.label}: {'; '.join(parts)} in {path}{gone}{backup}")
    if harness == "codex" and not uninstall:
        click.echo("Codex asks you to review and trust new hooks the next time it starts.")


@install.command("service")
@click.option("--systemd", "manager", flag_value="systemd", help="A systemd user unit (Linux).")
@click.option("--launchd", "manager", flag_value="launchd", help="A LaunchAgent (macOS).")
@click.option("--output", type=click.Path(dir_okay=False), default=None, help="Write here instead.")
@click.option("--print", "to_stdout", is_flag=True, help="Print the unit; write nothing.")
def install_service(manager: str | None, output: str | None, to_stdout: bool) -> None:
    """Render the consumer's service unit with this installation's paths and write it."""
    s = _settings()
    from . import install as inst

    manager = manager or inst.default_manager()
    try:
        template = inst.template_text(manager)
    except inst.InstallError as exc:
        raise click.ClickException(str(exc)) from None
    text = inst.render_service(
        manager,
        template,
        inst.service_values(home=s.home, kb_path=s.kb_path, timeout_sec=s.timeout_sec),
    )
    path = Path(output).expanduser().absolute() if output else inst.default_service_path(manager)
    problems = inst.validate(manager, text)
    if problems:
        raise click.ClickException(f"rendered {manager} unit is invalid: {'; '.join(problems)}")
    checked = inst.external_check(manager, text, path.name)
    if checked is not None:
        tool, ok, out = checked
        if not ok:
            raise click.ClickException(
                f"{tool} rejected the unit: {out.splitlines()[0] if out else ''}"
            )
        for line in out.splitlines():
            click.secho(f"{tool}: {line}", fg="yellow", err=True)
    if to_stdout:
        click.echo(text, nl=False)
        return
    written = inst.write_unit(path, text, home=s.home)
    if not written.changed:
        click.echo(f"{path}: unchanged")
    else:
        backup = written.backup
        click.echo(f"wrote {path}" + (f" (backup {backup})" if backup else ""))
    if checked is not None:
        click.echo(f"{checked[0]}: ok")
    click.echo("enable it with:")
    for cmd in inst.enable_commands(manager, path):
        click.echo(f"  {cmd}")
    extra = inst.uncarried_env()
    if extra:
        click.echo(
            f"note: {', '.join(extra)} set in this shell are not in the unit; add them to it"
        )


@main.command()
@click.option("--since", default="7d", show_default=True, help="Nd, Nh, Nw or all")
@click.option(
    "--root",
    type=click.Path(file_okay=False),
    default=None,
    help="Sessions directory (default: the harness's, e.g. ~/.claude/projects).",
)
@click.option("--harness", type=click.Choice(HARNESSES), default="claude", show_default=True)
@click.option("--limit", type=click.IntRange(min=0), default=None, help="Enqueue at most N.")
@click.option("--settle", type=int, default=0, show_default=True)
@click.option("--dry-run", is_flag=True, help="Report what would be enqueued.")
@click.option("--json", "as_json", is_flag=True)
def backfill(
    since: str,
    root: str | None,
    harness: str,
    limit: int | None,
    settle: int,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Capture past sessions: each transcript changed since --since, newest first."""
    s = _settings()
    from .backfill import default_root, run_backfill
    from .ledger.costs import parse_since

    window = None if since.strip().lower() == "all" else parse_since(since)
    if window is None and since.strip().lower() != "all":
        raise click.UsageError(f"--since must be like 7d, 24h, 2w or all, got {since!r}")
    base = Path(root).expanduser() if root else default_root(harness)
    if not base.is_dir():
        raise click.ClickException(f"no sessions directory {base} (use --root)")
    bar: Any = None
    use_bar = sys.stderr.isatty() and not as_json

    def on_plan(n: int) -> None:
        nonlocal bar
        if use_bar:
            bar = click.progressbar(length=n, label="enqueue", file=sys.stderr)

    def progress(_c: Any) -> None:
        if bar is not None:
            bar.update(1)

    report = run_backfill(
        s,
        harness,
        base,
        window,
        dry_run=dry_run,
        limit=limit,
        settle_sec=settle,
        progress=progress,
        on_plan=on_plan,
    )
    if bar is not None:
        bar.render_finish()
    if as_json:
        _emit(report)
    else:
        verb = "would enqueue" if dry_run else "enqueued"
        skipped = ", ".join(f"{k[5:]} {v}" for k, v in sorted(report["skipped_by"].items()))
        click.echo(
            f"{report['found']} transcript(s) in {report['root']}: {verb} {report['enqueued']}, "
            f"skipped {report['skipped']}"
            + (f" ({skipped})" if skipped else "")
            + (
                f", not enqueued {report['not_enqueued']} (--limit)"
                if report["not_enqueued"] and not report["disabled"]
                else ""
            )
        )
    if report["disabled"]:
        click.echo("reflect-jobs is disabled (REFLECT_DISABLED=1): nothing enqueued", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
