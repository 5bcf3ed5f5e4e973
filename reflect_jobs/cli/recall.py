"""Commands that bring learnings back to an agent: ``context`` and ``mcp`` (ARCHITECTURE §13)."""

from __future__ import annotations

import os
import sqlite3
import sys

import click

from .common import get_settings


@click.command()
@click.option(
    "--cwd",
    "cwd",
    type=click.Path(file_okay=False),
    default=None,
    help="The session's directory (default: the current one).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "claude", "codex", "copilot"]),
    default="text",
    show_default=True,
)
@click.option("--max-chars", "max_chars", type=click.IntRange(min=200), default=6000)
def context(cwd: str | None, fmt: str, max_chars: int) -> None:
    """Print what a new session in a directory is told (nothing when there is nothing).

    \f
    Args:
        cwd: The directory (its repository's learnings and the top global ones).
        fmt: ``text`` (the marked block), ``claude``/``codex`` (their SessionStart hook JSON)
            or ``copilot`` (the Copilot SDK's ``{"additionalContext": …}``).
        max_chars: The block's budget, markers included.
    """
    s = get_settings()
    from ..recall import block, store
    from ..recall.hook import session_context

    if not os.path.isfile(store.store_path(s.kb_path)):
        click.echo(
            "note: no context store yet; `reflect-jobs reindex` builds it from the notes",
            err=True,
        )

    where = os.path.abspath(cwd or os.getcwd())
    if not os.path.isdir(where):
        raise click.UsageError(f"--cwd {cwd}: no such directory")
    try:
        text = session_context(where, max_chars=max_chars, kb_root=str(s.kb_path))
    except sqlite3.Error as exc:
        click.echo(
            f"error: the context store cannot be read ({exc}): run `reflect-jobs reindex`",
            err=True,
        )
        sys.exit(1)
    out = block.formatted(text, fmt)
    if out:
        click.echo(out.rstrip("\n"))


@click.command()
@click.argument("note_id", metavar="ID")
@click.option("--path", "path_only", is_flag=True, help="Print the note's path only.")
def get(note_id: str, path_only: bool) -> None:
    """Print one learning in full by its id (as the context block and search name it).

    \f
    Args:
        note_id: A learning id (``lrn-…``).
        path_only: Print the file's path instead of its text.

    Raises:
        click.ClickException: The id is malformed or names no note (exit 1).
    """
    s = get_settings()
    from ..recall.tools import ToolError, load_note

    try:  # the same safe read as MCP `get`: a regular file in documents/, never a link
        note, text = load_note(s.kb_path, note_id)
    except ToolError as exc:
        raise click.ClickException(str(exc)) from None
    if path_only:
        click.echo(str(note.path))
        return
    click.echo(text.rstrip("\n"))


@click.command()
def mcp() -> None:
    """Serve learnings and open items as an MCP server on stdio, for this directory's repository.

    Tools: search, get, recent, context, list_items, search_items, add_item, close_item,
    update_items. Reads cover this repository and the global learnings
    (REFLECT_MCP_ALL_REPOS=1: any repository); writes only this repository.

    \f
    Exits 1 with one line when the ``mcp`` SDK is not installed.
    """
    s = get_settings()
    from .common import quiet_libraries

    quiet_libraries(s)
    try:
        from ..recall.mcp_server import serve
    except ImportError as exc:  # pragma: no cover - the module itself imports nothing heavy
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    try:
        serve(
            s.kb_path,
            vectors=s.index_vectors,
            embed_model=s.embed_model,
            all_repos=s.mcp_all_repos,
        )
    except ImportError as exc:
        click.echo(
            f"error: the MCP SDK is not installed ({exc}): pip install 'reflect-jobs[mcp]'",
            err=True,
        )
        sys.exit(1)


#: Registered on the top-level group by :mod:`reflect_jobs.cli`.
COMMANDS = (context, get, mcp)
