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
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="Everything that would qualify: no budget, no per-section cap (stale still withheld).",
)
def context(cwd: str | None, fmt: str, max_chars: int, everything: bool) -> None:
    """Print what a new session in a directory is told (nothing when there is nothing).

    The block's size goes to stderr: characters (the budget's unit) and an estimate in
    tokens. Anchored learnings are checked against the directory's working tree as at a
    session start (a preview: no stale streak is counted).

    \f
    Args:
        cwd: The directory (its repository's learnings and the top global ones).
        fmt: ``text`` (the marked block), ``claude``/``codex`` (their SessionStart hook JSON)
            or ``copilot`` (the Copilot SDK's ``{"additionalContext": …}``).
        max_chars: The block's budget, markers included.
        everything: Print every learning that qualifies (``--all``).
    """
    s = get_settings()
    from ..recall import block, store
    from ..recall.session_start import session_block

    if not os.path.isfile(store.store_path(s.kb_path)):
        click.echo(
            "note: no context store yet; `reflect-jobs reindex` builds it from the notes",
            err=True,
        )

    where = os.path.abspath(cwd or os.getcwd())
    if not os.path.isdir(where):
        raise click.UsageError(f"--cwd {cwd}: no such directory")
    try:
        told = session_block(  # as a fresh start is told: ranked by its branch or handoff
            where,
            max_chars=10**9 if everything else max_chars,
            kb_root=str(s.kb_path),
            everything=everything,
        )
    except sqlite3.Error as exc:
        click.echo(
            f"error: the context store cannot be read ({exc}): run `reflect-jobs reindex`",
            err=True,
        )
        sys.exit(1)
    text = told.text
    out = block.formatted(text, fmt)
    if out:
        click.echo(out.rstrip("\n"))
        click.echo(
            f"block: {len(text)} characters, ~{block.estimate_tokens(text)} tokens (estimate)",
            err=True,
        )
        if told.task:  # why the order differs from another checkout's
            click.echo(f"ranked for {told.task_from}: {told.task[:120]}", err=True)


@click.command()
@click.option(
    "--cwd",
    "cwd",
    type=click.Path(file_okay=False),
    default=None,
    help="The working tree to check against (default: the current directory).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def verify(cwd: str | None, as_json: bool) -> None:
    """Check every learning a session here could be told against the working tree.

    Each learning's verdict: ok (its anchors hold), partial (some file or symbol gone:
    told, marked), stale (every anchored file gone: withheld), unanchored (nothing to
    check; global learnings name other repositories' files). A dormant learning (nobody
    confirmed it for REFLECT_FORGET_UNUSED_DAYS: not told at session start) says so. A
    report: no streak is counted, nothing is changed.

    \f
    Args:
        cwd: The directory (its repository and working tree).
        as_json: ``[{"id", "scope", "title", "verdict", "missing", "unchecked", "anchors",
            "dormant"}]``.
    """
    s = get_settings()
    import time

    from ..recall import block, fading, store
    from ..recall import verify as verifier
    from ..repo import repo_for
    from .common import emit

    where = os.path.abspath(cwd or os.getcwd())
    if not os.path.isdir(where):
        raise click.UsageError(f"--cwd {cwd}: no such directory")
    ref = repo_for(where)
    try:
        conn = store.open_for_read(store.store_path(s.kb_path))
        rows: list[dict] = []
        if conn is not None:
            try:
                if ref is not None:
                    rows += block.ranked(store.repo_rows(conn, ref.key, 1_000_000))
                rows += block.ranked(store.global_rows(conn, 1_000_000))
            finally:
                conn.close()
    except sqlite3.Error as exc:
        click.echo(
            f"error: the context store cannot be read ({exc}): run `reflect-jobs reindex`",
            err=True,
        )
        sys.exit(1)
    cache = verifier.MemoryCache()
    days, now = fading.unused_days(), time.time()
    out = []
    for row in rows:
        root = ref.root if ref is not None and row.get("scope") == "repo" else None
        v = verifier.verdict(root, row.get("anchors"), cache)
        out.append(
            {
                "id": row["id"],
                "scope": row.get("scope"),
                "title": row.get("title"),
                **v.as_dict(),
                "anchors": [
                    {"path": p, **({"symbol": x} if x else {})}
                    for p, x in verifier.parse_anchors(row.get("anchors"))
                ],
                "dormant": fading.is_dormant(row.get("awake_ts"), days, now),
            }
        )
    if as_json:
        emit(out)
        return
    if not out:
        click.echo("no learnings for this directory")
        return
    counts = {k: sum(1 for r in out if r["verdict"] == k) for k in verifier.VERDICTS}
    for r in out:
        gone = f"  gone: {', '.join(r['missing'])}" if r["missing"] else ""
        sleep = f"  {fading.mark(days)}" if r["dormant"] else ""
        click.echo(f"{r['verdict']:<10} {r['id']}  {block.inert(r['title'], 100)}{gone}{sleep}")
    click.echo(", ".join(f"{n} {k}" for k, n in counts.items()))


@click.command("recall-log")
@click.option("--session", "session", default=None, help="Only this session's records.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
def recall_log(session: str | None, as_json: bool) -> None:
    """What each session was told at its start (and per prompt), oldest first.

    One record per answered recall event, written by the hook: session, harness, event,
    cwd, time, the learning and item ids told, the ids withheld as stale, characters and
    estimated tokens.

    \f
    Args:
        session: A session id to show alone.
        as_json: ``[{"ts", "time", "session", "harness", "event", "cwd", "learnings",
            "items", "withheld", "chars", "tokens"}]``.
    """
    s = get_settings()
    from datetime import UTC, datetime

    from ..recall import told_log
    from .common import emit

    rows = told_log.read(str(s.home), session=session)
    for r in rows:
        try:
            r["time"] = datetime.fromtimestamp(float(r.get("ts") or 0), UTC).isoformat()
        except (TypeError, ValueError, OverflowError):
            r["time"] = None
    if as_json:
        emit(rows)
        return
    if not rows:
        click.echo("nothing told yet" + (f" to session {session}" if session else ""))
        return
    for r in rows:
        told = ", ".join(r.get("learnings") or []) or "-"
        items = ", ".join(r.get("items") or [])
        click.echo(
            f"{r['time']}  {r.get('harness')}  {r.get('event')}  session {r.get('session') or '-'}"
            f"  {r.get('cwd')}\n  {r.get('chars')} chars ~{r.get('tokens')} tokens; "
            f"learnings: {told}"
            + (f"; items: {items}" if items else "")
            + (f"; withheld: {', '.join(r['withheld'])}" if r.get("withheld") else "")
        )


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
COMMANDS = (context, verify, recall_log, get, mcp)
