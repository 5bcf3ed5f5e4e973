"""``reflect-jobs nightly``: the nightly layer now or when due (docs/NIGHTLY.md)."""

from __future__ import annotations

import click

from .common import emit, get_settings, quiet_libraries


@click.command()
@click.option("--now", "force", is_flag=True, help="Run now whatever REFLECT_NIGHTLY_AT says.")
@click.option("--repo", "repo", default=None, metavar="DIR", help="Only this repository.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Find and print the report; write no file or item and make no model call.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def nightly(force: bool, repo: str | None, dry_run: bool, as_json: bool) -> None:
    """The session analyzer, revert demotion, MEMORY.md promotion and weekly synthesis.

    \f
    Args:
        force: ``--now``.
        repo: ``--repo DIR``.
        dry_run: ``--dry-run``.
        as_json: ``--json``.
    """
    from ..logging import configure_logging
    from ..nightly.run import run_nightly
    from ..queue import make_huey
    from ..repo import RepoError
    from ..write_lease import make_write_lease

    s = get_settings()
    quiet_libraries(s)
    configure_logging(s, console=False)
    storage = make_huey(s).storage
    lease = make_write_lease(s, storage)

    def kb_changed() -> None:
        if not s.skip_reindex:
            from .. import tasks

            tasks.HueyDispatcher().kb_changed()

    try:
        result = run_nightly(
            s,
            storage,
            force=force,
            repo_dir=repo,
            dry_run=dry_run,
            lease=lease,
            kb_changed=kb_changed,
        )
    except RepoError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        emit(result.to_json())
        return
    if dry_run:
        click.echo(result.report, nl=False)
    click.echo(f"nightly: {result.status}" + (f" — {result.detail}" if result.detail else ""))
    for r in result.repos:
        click.echo(
            f"  {r['repo']}: {r['sessions']} session(s), {r['repeated']} repeated, "
            f"{r['unfinished']} unfinished, MEMORY.md {r['memory'] or '-'}, "
            f"{len(r['demoted'])} demoted"
        )
    if result.report and not dry_run:
        click.echo(f"report: {result.report}")
    for d in result.deferred:
        click.echo(f"deferred: {d}", err=True)


COMMANDS = [nightly]
