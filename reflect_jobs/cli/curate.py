"""What a person curates by hand: ``add``, ``forget``, ``restore`` (learnings) and ``ignore`` /
``unignore`` (repositories) — issue 23, ARCHITECTURE §13.1.

The work is in :mod:`reflect_jobs.pipeline.curation` and the config file's writer
(:mod:`reflect_jobs.install.config_file`); these commands parse, call and print. Bad input or
an unknown id is one line on stderr and exit 1, nothing changed.
"""

from __future__ import annotations

import getpass
import os
from typing import TYPE_CHECKING

import click

from .common import emit, get_settings

if TYPE_CHECKING:
    from ..repo import Repo


def _by() -> str:
    return f"cli:{getpass.getuser()}"


def _reindex_later() -> None:
    """Ask the worker's coalesced reindex to bring the graph/vector index along (search and
    the context store already agree: ``index/immediate.py``)."""
    s = get_settings()
    if s.skip_reindex:
        return
    from .. import tasks

    try:
        tasks.HueyDispatcher().kb_changed()
    except Exception as exc:  # noqa: BLE001 - the change is made; the graph catches up later
        click.echo(f"note: the reindex could not be queued ({exc}); run `reflect-jobs reindex`")


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--cwd",
    "cwd",
    type=click.Path(file_okay=False),
    default=None,
    help="The directory whose repository the learning belongs to (default: the current one).",
)
@click.option("--json", "as_json", is_flag=True)
def add(file: str, cwd: str | None, as_json: bool) -> None:
    """Add a learning written by hand (frontmatter: title and rule); print its id.

    \f
    The file is markdown: a ``---`` frontmatter with ``title`` and ``rule`` (optionally
    ``scope: global``, ``category``, ``key_insight``, ``problem``, ``root_cause``, ``fix``,
    ``learning_type``, ``confidence``, ``tags``), then the body. It is active at once: the
    next session start in the repository tells it.

    Args:
        file: The learning file.
        cwd: The repository's directory (``scope: repo``, the default).
        as_json: Print ``{"id", "created", "scope", "repo", "note_path", "demoted"}``.
    """
    s = get_settings()
    from ..pipeline.curation import CurationError, add_learning

    try:
        done = add_learning(s.kb_path, s.db_url, file, cwd or os.getcwd())
    except CurationError as exc:
        raise click.ClickException(str(exc)) from None
    _reindex_later()
    for key in done.ignored_keys:
        click.echo(f"note: frontmatter key {key!r} ignored", err=True)
    for problem in done.problems:
        click.echo(f"warning: {problem}", err=True)
    if as_json:
        emit(
            {
                "id": done.id,
                "created": done.created,
                "scope": done.scope,
                "repo": done.repo,
                "note_path": done.note_path,
                "demoted": done.demoted,
            }
        )
        return
    click.echo(done.id)
    for old in done.demoted:
        click.echo(f"demoted {old}: its title is contradicted by {done.id}", err=True)


def _curate(verb: str, learning_id: str) -> None:
    s = get_settings()
    from ..pipeline import curation

    act = curation.forget if verb == "forget" else curation.restore
    try:
        state = act(s.kb_path, s.db_url, learning_id, by=_by())
    except curation.CurationError as exc:
        raise click.ClickException(str(exc)) from None
    _reindex_later()
    click.echo(f"{learning_id}: {state}")


@click.command()
@click.argument("learning_id", metavar="ID")
def forget(learning_id: str) -> None:
    """Take a learning out of circulation everywhere at once (undo: restore ID).

    \f
    The ledger says ``archived``; the note and its sidecar move to
    ``documents/.forgotten/``; search, the session-start context and MCP ``get`` stop
    returning it at once, with no reindex to run.

    Args:
        learning_id: The learning's id (``lrn-…``).
    """
    _curate("forget", learning_id)


@click.command()
@click.argument("learning_id", metavar="ID")
def restore(learning_id: str) -> None:
    """Bring a forgotten, superseded or otherwise withheld learning back into circulation.

    \f
    Args:
        learning_id: The learning's id (``lrn-…``).
    """
    _curate("restore", learning_id)


def _ignore_list() -> list[str]:
    from ..install.config_file import read_config

    try:
        value = read_config().get("ignore", [])
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"config file: {exc}") from None
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _write_ignore(entries: list[str]) -> str:
    from ..install.config_file import write_config

    try:
        return str(write_config({"ignore": entries}).path)
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"config file: {exc}") from None


def _repo_of(directory: str | None) -> Repo:
    from ..repo import repo_for

    ref = repo_for(os.path.abspath(directory or os.getcwd()))
    if ref is None:
        raise click.ClickException(f"{directory}: no such directory")
    return ref


@click.command()
@click.argument("directory", metavar="[DIR]", required=False)
@click.option("--list", "show", is_flag=True, help="List the ignored repositories.")
@click.option("--json", "as_json", is_flag=True)
def ignore(directory: str | None, show: bool, as_json: bool) -> None:
    """Never capture a repository's sessions nor tell them anything (default: this one).

    \f
    The list lives in the user config file (key ``ignore``), keyed by the repository's
    identity (``repo.py``: the origin remote, else the root's path), so every clone and
    worktree of it is ignored and nothing is written into the repository.

    Args:
        directory: A directory of the repository (default: the current one).
        show: Print the list instead.
        as_json: With ``--list``: a JSON list.
    """
    entries = _ignore_list()
    if show:
        if as_json:
            emit(entries)
        else:
            click.echo("\n".join(entries) if entries else "no ignored repositories")
        return
    ref = _repo_of(directory)
    from ..repo import listed

    if listed(ref, entries):
        click.echo(f"{ref.display}: already ignored")
        return
    where = _write_ignore([*entries, ref.key])
    click.echo(f"{ref.display}: ignored (in {where})")


@click.command()
@click.argument("directory", metavar="[DIR]", required=False)
def unignore(directory: str | None) -> None:
    """Capture and tell a repository again (a directory of it, or the key `ignore --list` shows).

    \f
    Args:
        directory: A directory of the repository (default: the current one), or its key.
    """
    entries = _ignore_list()
    from ..repo import Repo, as_key, listed

    if directory and not os.path.isdir(os.path.expanduser(directory)):
        key = as_key(directory) or directory
        ref = Repo(key)
    else:
        ref = _repo_of(directory)
    kept = [e for e in entries if not listed(ref, [e])]
    if kept == entries:
        raise click.ClickException(f"{ref.display}: not ignored")
    _write_ignore(kept)
    click.echo(f"{ref.display}: no longer ignored")


#: Registered on the top-level group by :mod:`reflect_jobs.cli`.
COMMANDS = (add, forget, restore, ignore, unignore)
