"""Commands about jobs: capture one now, list and inspect them, and send them back.

``enqueue``, ``jobs``, ``show``, ``retry``, ``poison list|show|purge``, ``resume`` and
``errors``. The ledger work behind them is :mod:`reflect_jobs.ledger.admin`; this module
only parses options, calls it, and prints — so what ``--json`` prints is exactly what admin
returns, and the text form is one view of the same data.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import click

from ..lifecycle import JOB_STATES
from .common import HARNESSES, emit, get_settings, table


def _schedule() -> Callable[[str, str], None]:
    """Huey's ``schedule(stage, job_id)``, imported only by the commands that re-queue."""
    from .. import tasks

    return tasks.HueyDispatcher().schedule


@click.command()
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
    """Capture a transcript now; prints the job id.

    \f
    Args:
        path: The transcript file (must exist).
        harness: Which agent wrote it.
        session_id: The session id; defaults to the file's stem.
        event: The event recorded with the capture.
        settle: Seconds to wait for more captures before preparing.

    Raises:
        click.UsageError: Bad settings, or the file does not exist (exit 2).
    """
    get_settings()  # bad settings are a usage error (exit 2) before anything is captured
    p = Path(path).expanduser().resolve()
    if not p.is_file():
        raise click.UsageError(f"transcript not found: {p}")
    from .. import pipeline, tasks

    # A capture a person asks for is a deep pass whatever its --event (ARCHITECTURE §14.1).
    job_id = pipeline.run_capture(
        tasks.runtime(), harness, session_id or p.stem, str(p), event, settle, deep=True
    )
    if job_id is None:
        click.echo("reflect-jobs is disabled (REFLECT_DISABLED=1): nothing enqueued", err=True)
        sys.exit(1)
    click.echo(job_id)


@click.command()
@click.option(
    "--state",
    type=click.Choice(JOB_STATES),
    default=None,
)
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def jobs(state: str | None, limit: int, as_json: bool) -> None:
    """List jobs, newest first.

    \f
    Args:
        state: Only jobs in this state (any when ``None``).
        limit: At most this many jobs.
        as_json: Print :func:`reflect_jobs.ledger.admin.list_jobs`'s rows as JSON instead
            of a table.
    """
    s = get_settings()
    from ..ledger import admin

    rows = admin.list_jobs(s.db_url, state=state, limit=limit)
    if as_json:
        emit(rows)
        return
    if not rows:
        click.echo("no jobs")
        return
    click.echo(
        table(
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


@click.command()
@click.argument("job_id")
@click.option(
    "--slice", "show_slice", is_flag=True, help="Print the slice sent (or to be sent) to the model."
)
@click.option("--json", "as_json", is_flag=True)
def show(job_id: str, show_slice: bool, as_json: bool) -> None:
    """A job and its events.

    \f
    Args:
        job_id: The job.
        show_slice: Print the slice file instead (it exists only while the job is not
            finished).
        as_json: Print :func:`reflect_jobs.ledger.admin.job_detail` as JSON.

    Raises:
        click.ClickException: No such job, or ``--slice`` and no slice on disk (exit 1).
    """
    s = get_settings()
    from ..ledger import admin

    try:
        data = admin.job_detail(s.db_url, job_id)
    except admin.JobNotFound as exc:
        raise click.ClickException(str(exc)) from None
    if show_slice:
        path = data.get("slice_path")
        if not path or not os.path.exists(path):
            raise click.ClickException(
                f"job {job_id} has no slice on disk (slices are removed when a job finishes)"
            )
        click.echo(Path(path).read_text(encoding="utf-8"))
        return
    if as_json:
        emit(data)
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
        table(
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


@click.command()
@click.argument("job_ids", nargs=-1)
@click.option("--all-poisoned", is_flag=True)
@click.option("--all-quarantined", is_flag=True)
def retry(job_ids: tuple[str, ...], all_poisoned: bool, all_quarantined: bool) -> None:
    """Send poisoned/quarantined/halted jobs back to their stage.

    \f
    Args:
        job_ids: The jobs to retry (ignored when a ``--all-*`` flag is given).
        all_poisoned: Retry every poisoned job.
        all_quarantined: Retry every quarantined job.

    Raises:
        click.UsageError: Neither ids nor a ``--all-*`` flag (exit 2).
        click.ClickException: A job does not exist or cannot be retried; nothing was
            retried (exit 1).
    """
    states = tuple(
        st for st, on in (("poisoned", all_poisoned), ("quarantined", all_quarantined)) if on
    )
    if not job_ids and not states:
        raise click.UsageError("name job ids, or --all-poisoned / --all-quarantined")
    s = get_settings()
    from ..ledger import admin
    from ..ledger.jobs import IllegalTransition

    try:
        done = admin.retry_jobs(s.db_url, job_ids, states=states, schedule=_schedule())
    except (admin.JobNotFound, IllegalTransition) as exc:
        raise click.ClickException(str(exc)) from None
    for job_id, stage in done:
        click.echo(f"{job_id}: queued at {stage}")
    if not done:
        click.echo("nothing to retry")


@click.group()
def poison() -> None:
    """Poisoned jobs: list, show, purge."""


@poison.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def poison_list(ctx: click.Context, as_json: bool) -> None:
    """List poisoned jobs (as jobs --state poisoned).

    \f
    Args:
        ctx: click's context.
        as_json: Print JSON instead of a table.
    """
    ctx.invoke(jobs, state="poisoned", limit=1000, as_json=as_json)


@poison.command("show")
@click.argument("job_id")
@click.pass_context
def poison_show(ctx: click.Context, job_id: str) -> None:
    """Show one poisoned job's events and costs (as show JOB_ID).

    \f
    Args:
        ctx: click's context.
        job_id: The job to show.
    """
    ctx.invoke(show, job_id=job_id, show_slice=False, as_json=False)


@poison.command("purge")
@click.option("--yes", is_flag=True, help="Do not ask.")
def poison_purge(yes: bool) -> None:
    """Delete poisoned jobs (and their slices) from the ledger; cost rows stay.

    \f
    Args:
        yes: Do not ask for confirmation.
    """
    s = get_settings()
    from ..ledger import admin

    purged = admin.purge_poisoned(
        s.db_url, confirm=lambda n: yes or click.confirm(f"purge {n} poisoned job(s)?")
    )
    if purged is not None:
        click.echo(f"purged {purged} poisoned job(s)")


@click.command()
def resume() -> None:
    """Clear a write-stage halt and re-queue the halted jobs (run doctor first).

    \f
    Prints the halt's reason and how many jobs went back to the queue.
    """
    s = get_settings()
    from ..ledger import admin

    done = admin.resume(s.db_url, schedule=_schedule())
    click.echo(
        f"write stage resumed (was: {done.reason or 'not halted'}); {len(done.requeued)} job(s) re-queued"
    )


@click.command()
@click.option("--ack", "ack_id", default=None, help="Acknowledge an error by id.")
@click.option("--all", "show_all", is_flag=True, help="Include acknowledged errors.")
@click.option("--json", "as_json", is_flag=True)
def errors(ack_id: str | None, show_all: bool, as_json: bool) -> None:
    """The errors ledger, and the hook's failures of the last 24 hours.

    \f
    Hook errors (``source`` ``hook``, ids ``hook-…``) come from ``hook-errors.log`` and
    cannot be acknowledged: they leave the list a day after the last one.

    Args:
        ack_id: Acknowledge this error instead of listing.
        show_all: Include acknowledged errors.
        as_json: Print :func:`reflect_jobs.ledger.admin.list_errors`'s rows as JSON.

    Raises:
        click.ClickException: ``--ack`` names no error (exit 1).
    """
    s = get_settings()
    from ..ledger import admin

    if ack_id:
        if ack_id.startswith("hook-"):
            raise click.ClickException(
                f"{ack_id} is a hook error: it cannot be acknowledged and leaves the list "
                "24 h after it last happened (fix the cause; `reflect-jobs doctor`)"
            )
        try:
            admin.ack_error(s.db_url, ack_id)
        except admin.ErrorNotFound as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(f"acknowledged {ack_id}")
        return
    from ..hook_errors import as_error_rows

    rows = admin.list_errors(s.db_url, include_acked=show_all) + as_error_rows(s.home)
    rows.sort(key=lambda r: r["last_at"], reverse=True)
    if as_json:
        emit(rows)
    elif not rows:
        click.echo("no errors")
    else:
        click.echo(
            table(
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


#: Registered on the top-level group by :mod:`reflect_jobs.cli`.
COMMANDS = (enqueue, jobs, show, retry, poison, resume, errors)
