"""``reflect-jobs uninstall``: leave the machine as it was before ``install``.

The work is :func:`reflect_jobs.install.uninstall.uninstall`; this asks before deleting data
(``--purge`` without ``--yes``), prints one line per thing removed, and says so when
nothing was installed (exit 0).
"""

from __future__ import annotations

from pathlib import Path

import click

from .. import harnesses
from .common import HARNESSES, get_settings


def _size(path: Path) -> str:
    total = 0.0
    for p in path.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            continue
    for unit in ("B", "KB", "MB", "GB"):
        if total < 1024 or unit == "GB":
            return f"{total:.0f} {unit}" if unit == "B" else f"{total:.1f} {unit}"
        total /= 1024
    return ""  # pragma: no cover


@click.command()
@click.option(
    "--harness",
    "selected",
    type=click.Choice(HARNESSES),
    multiple=True,
    help="Only this harness's hooks and MCP entry (repeatable; default: every harness and "
    "the service).",
)
@click.option(
    "--purge",
    is_flag=True,
    help="Also delete the data: $REFLECT_HOME, the knowledge base, the config file, backups.",
)
@click.option("--yes", is_flag=True, help="Do not ask before --purge deletes the data.")
def uninstall(selected: tuple[str, ...], purge: bool, yes: bool) -> None:
    """Remove hooks, MCP entries and the service; with --purge, the data too.

    \f
    Other tools' settings stay byte-identical; a settings file that held only our entries
    is deleted; our ``.bak-*`` copies are pruned to the newest (all of them with
    ``--purge``). A running service is stopped and disabled first. ``--purge`` lists what
    it deletes and asks (``--yes`` skips the question); it refuses a directory that does not
    look like ours and a home a worker still holds.

    Args:
        selected: Harnesses to unwire; none means all of them and the service.
        purge: Delete the data as well (only with every harness).
        yes: Skip the confirmation.

    Raises:
        click.UsageError: ``--purge`` with ``--harness`` (exit 2).
        click.ClickException: A settings file cannot be parsed, or purge refused (exit 1).
    """
    from ..install import SettingsFileError
    from ..install.uninstall import PurgeRefused, purge_targets
    from ..install.uninstall import uninstall as do_uninstall

    if purge and selected:
        raise click.UsageError("--purge deletes every harness's data: use it without --harness")
    if purge:
        s = get_settings()  # deleting data needs settings that are sound
        home, kb = s.home, s.kb_path
    else:  # a broken setting must not keep anyone from removing the hooks
        from ..envpaths import home_dir_str, kb_root_str

        home, kb = Path(home_dir_str()), Path(kb_root_str())
    names = list(selected) or list(harnesses.NAMES)
    if purge:
        try:
            targets = purge_targets(home, kb)
        except PurgeRefused as exc:
            raise click.ClickException(str(exc)) from None
        if targets and not yes:
            listing = "; ".join(f"{p} ({_size(p)})" for p in targets)
            click.echo(f"--purge deletes {listing}, the config file and our backups.")
            if not s.db_url.startswith("sqlite") or not s.queue_url.startswith("sqlite"):
                click.echo("(the shared ledger/queue servers are not touched)")
            click.confirm("Delete them?", abort=True)
    try:
        report = do_uninstall(names, home=home, kb=kb, purge=purge)
    except PurgeRefused as exc:
        raise click.ClickException(str(exc)) from None
    except SettingsFileError as exc:
        raise click.ClickException(str(exc)) from None
    if report.nothing:
        click.echo("nothing of reflect-jobs is installed here: nothing to remove")
        return
    for line in report.lines:
        click.echo(line)
    if not purge:
        click.echo(
            f"your data stays in {home} and {kb}; `reflect-jobs uninstall --purge` deletes it"
        )


#: Registered on the top-level group by :mod:`reflect_jobs.cli`.
COMMANDS = (uninstall,)
