"""``reflections``: add, list, search, close and show a repository's reflection items.

The same click group is the ``reflections`` console script and ``reflect-jobs items``. The
repository is the current directory's git root, or ``--repo`` (a directory, or the key people
see, ``github.com/acme/shop``; ``reflect_jobs/repo.py``).
Exit codes follow ARCHITECTURE §9: 0 success, 1 a handled failure (unknown id, a log that
cannot be written), 2 bad usage (malformed id, an empty title, not in a repository); errors
are one line on stderr. ``--json`` shapes are stable (docs/REFLECTIONS.md): keys are added,
never renamed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from reflect_jobs.envpaths import environ as merged_environ
from reflect_jobs.envpaths import home_dir_str, kb_root_str
from reflect_jobs.repo import RepoError

from .cli_doctor import doctor, refresh
from .events import AUTHORS, KINDS, EventError, host_name
from .fold import STATUSES, Item, now_utc
from .index import ReflectionIndex, index_path
from .kb_search import learnings_search
from .known import known_repos
from .store import (
    CONTEXT_BUDGET,
    BadIdError,
    Store,
    StoreError,
    open_store,
)

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["main"]


def _repo_option(func: F) -> F:
    return click.option(
        "--repo",
        "repo",
        default=None,
        metavar="DIR|KEY",
        help="The repository: a directory in it, or its key (default: the cwd's git root).",
    )(func)


def _json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")(func)


def _by_option(func: F) -> F:
    return click.option(
        "--by",
        type=click.Choice(AUTHORS),
        default="person",
        show_default=True,
        help="Who writes it (sets when an open item goes stale: 7 days reflector, else 30).",
    )(func)


def _emit(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


@contextmanager
def _store(repo: str | None) -> Iterator[Store]:
    """Open the store, turning every known failure into one line and the right exit code."""
    try:
        store = open_store(repo, Path.cwd())
    except RepoError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        yield store
    except (EventError, BadIdError) as exc:
        raise click.UsageError(str(exc)) from None
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        raise click.ClickException(f"cannot write the log{where}: {exc.strerror or exc}") from None
    finally:
        for warning in store.warnings:
            click.echo(f"warning: {warning}", err=True)
        store.close()


def _rows(items: list[tuple[Item, str]]) -> str:
    headers = ["ID", "KIND", "STATUS", "UPDATED", "TITLE"]
    cells = [[i.id, i.kind, status, i.updated_at[:10], i.title] for i, status in items]
    widths = [max(len(h), *(len(r[n]) for r in cells)) for n, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(out)


@click.group(name="reflections", context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """What the agents learned and left open in this repository: add, list, search, close."""


@main.command()
@click.option("--kind", type=click.Choice(KINDS), required=True)
@click.option("--title", required=True)
@click.option("--body", default=None)
@click.option("--session", default=None, help="The source session's id.")
@_by_option
@_repo_option
@_json_option
def add(
    kind: str,
    title: str,
    body: str | None,
    session: str | None,
    by: str,
    repo: str | None,
    as_json: bool,
) -> None:
    """Add an item and print its id (an open item with the same kind and title is reused).

    \f
    Args:
        kind: The item kind.
        title: One line.
        body: The text.
        session: The source session.
        by: The author.
        repo: ``--repo``.
        as_json: Print the item as JSON (with ``new``: whether it was created).
    """
    with _store(repo) as store:
        item, new = store.add(kind, title, body, by=by, session=session)
        if as_json:
            _emit({**item.to_json(now_utc()), "new": new})
        else:
            click.echo(item.id)


@main.command(name="list")
@click.option("--all", "all_repos", is_flag=True, help="Every repository this machine knows.")
@click.option("--status", type=click.Choice([*STATUSES, "all"]), default="open", show_default=True)
@_repo_option
@_json_option
def list_items(all_repos: bool, status: str, repo: str | None, as_json: bool) -> None:
    """List items (default: the open ones; stale ones are listed with --status stale).

    \f
    Args:
        all_repos: List every repository known to this machine, not only this one.
        status: The derived status to list, or ``all``.
        repo: ``--repo``.
        as_json: Print a JSON list of items (each with ``repo`` when ``--all``).
    """
    now = now_utc()
    if not all_repos:
        with _store(repo) as store:
            found = store.items(status, now)
            if as_json:
                _emit([i.to_json(now) for i in found])
            elif found:
                click.echo(_rows([(i, i.to_json(now)["status"]) for i in found]))
        return
    out: list[dict[str, Any]] = []
    env = merged_environ()
    index = ReflectionIndex(index_path(Path(home_dir_str(env))))
    try:
        for known in known_repos(index, Path(kb_root_str(env))):
            other = Store(known, host_name(env), index)
            out += [i.to_json(now, repo=known.display) for i in other.items(status, now)]
    finally:
        index.close()
    if as_json:
        _emit(out)
    else:
        for row in out:
            click.echo(
                f"{row['repo']}  {row['id']}  {row['kind']}  {row['status']}  {row['title']}"
            )


@main.command()
@click.argument("query")
@click.option("-k", "k", type=int, default=20, show_default=True)
@_repo_option
@_json_option
def search(query: str, k: int, repo: str | None, as_json: bool) -> None:
    """Search this repository's items (any status), the knowledge base's learnings, the
    nightly reports, and Claude Code's and Codex's memory files.

    \f
    Args:
        query: Free text.
        k: At most this many items (and at most 5 learnings).
        repo: ``--repo``.
        as_json: Print ``{"items": [...], "learnings": [...], "reports": [...]}`` (the
            nightly reports' matching sections, docs/NIGHTLY.md).
    """
    now = now_utc()
    with _store(repo) as store:
        found = store.search(query, k)
        # Claude Code's memory for this project and Codex's memories (read-only, by stat).
        remembered = store.memory_search(query, 5)
    learnings, warnings = learnings_search(query, 5)
    from reflect_jobs.nightly.report import search_reports

    reports = search_reports(Path(kb_root_str(merged_environ())), query, 5)
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    if as_json:
        _emit(
            {
                "items": [{**i.to_json(now), "score": s} for i, s in found],
                "learnings": learnings,
                "reports": reports,
                "memories": remembered,
            }
        )
        return
    if found:
        click.echo(_rows([(i, i.to_json(now)["status"]) for i, _ in found]))
    if learnings:
        click.echo("learnings:")
        for hit in learnings:
            click.echo(f"  {hit['id']}  {hit['title']}")
    if reports:
        click.echo("nightly reports:")
        for hit in reports:
            click.echo(f"  {hit['date']}  {hit['repo']}  {hit['snippet']}")
    if remembered:
        click.echo("memories:")
        for mem in remembered:
            click.echo(f"  {mem['file']}  {mem['title']}")


@main.command()
@click.argument("ident", metavar="ID")
@_repo_option
@_json_option
def show(ident: str, repo: str | None, as_json: bool) -> None:
    """One item in full: kind, status, title, body and every note.

    \f
    Args:
        ident: The id (``#a1b2`` or ``a1b2``, any unique prefix).
        repo: ``--repo``.
        as_json: Print the item as ``list --json`` prints each one.
    """
    with _store(repo) as store:
        now = now_utc()
        data = store.find(ident).to_json(now)
        if as_json:
            _emit(data)
            return
        click.echo(f"{data['id']}  {data['kind']}  {data['status']}  by {data['by']}")
        click.echo(f"title: {data['title']}")
        click.echo(f"created {data['created_at']}, updated {data['updated_at']}")
        if data["body"]:
            click.echo("")
            click.echo(data["body"])
        for n in data["notes"]:
            click.echo(f"- {n['at']} {n['op']} by {n['by']}: {n['text']}")


def _change(op: str, ident: str, repo: str | None, as_json: bool, **kw: Any) -> None:
    with _store(repo) as store:
        item = store.change(op, ident, **kw)
        if as_json:
            _emit(item.to_json(now_utc()))
        else:
            click.echo(f"{item.id} {item.to_json(now_utc())['status']}")


@main.command()
@click.argument("ident", metavar="ID")
@click.option("--note", required=True, help="The evidence: what shows it is done.")
@_by_option
@_repo_option
@_json_option
def done(ident: str, note: str, by: str, repo: str | None, as_json: bool) -> None:
    """Mark an item done, with the evidence.

    \f
    Args:
        ident: The id (``#a1b2`` or ``a1b2``).
        note: The evidence.
        by: The author.
        repo: ``--repo``.
        as_json: Print the item as JSON.
    """
    _change("done", ident, repo, as_json, note=note, by=by)


@main.command()
@click.argument("ident", metavar="ID")
@click.option("--note", required=True, help="Why it is dropped.")
@_by_option
@_repo_option
@_json_option
def drop(ident: str, note: str, by: str, repo: str | None, as_json: bool) -> None:
    """Drop an item (not worth doing, a duplicate…), with the reason.

    \f
    Args:
        ident: The id.
        note: The reason.
        by: The author.
        repo: ``--repo``.
        as_json: Print the item as JSON.
    """
    _change("drop", ident, repo, as_json, note=note, by=by)


@main.command()
@click.argument("ident", metavar="ID")
@click.option("--note", default=None)
@_by_option
@_repo_option
@_json_option
def reopen(ident: str, note: str | None, by: str, repo: str | None, as_json: bool) -> None:
    """Reopen a done, dropped or stale item.

    \f
    Args:
        ident: The id.
        note: Why (optional).
        by: The author.
        repo: ``--repo``.
        as_json: Print the item as JSON.
    """
    _change("reopen", ident, repo, as_json, note=note, by=by)


@main.command()
@click.argument("ident", metavar="ID")
@click.option("--title", default=None)
@click.option("--body", default=None)
@_by_option
@_repo_option
@_json_option
def edit(
    ident: str, title: str | None, body: str | None, by: str, repo: str | None, as_json: bool
) -> None:
    """Change an item's title or body (an edit also makes a stale item fresh again).

    \f
    Args:
        ident: The id.
        title: The new title.
        body: The new body.
        by: The author.
        repo: ``--repo``.
        as_json: Print the item as JSON.
    """
    if title is None and body is None:
        raise click.UsageError("edit needs --title or --body")
    _change("edit", ident, repo, as_json, title=title, body=body, by=by)


@main.command()
@click.option(
    "--budget",
    type=click.IntRange(min=200),
    default=CONTEXT_BUDGET,
    show_default=True,
    help="At most this many characters.",
)
@_repo_option
@_json_option
def context(budget: int, repo: str | None, as_json: bool) -> None:
    """What a new session is shown: open items with ids, people's handoffs first, then newest.

    \f
    Args:
        budget: The character budget.
        repo: ``--repo``.
        as_json: Print ``{"repo", "text", "items", "open"}``.
    """
    now = now_utc()
    with _store(repo) as store:
        text, shown, total = store.context(budget, now)
        key = store.repo.display
    if as_json:
        _emit({"repo": key, "text": text, "items": [i.to_json(now) for i in shown], "open": total})
    elif text:
        click.echo(text)


def _print_dedupe(report: Any, dry_run: bool) -> None:
    verb = "would drop" if dry_run else "dropped"
    line = f"{report.repo}: {report.status}"
    if report.detail:
        line += f" ({report.detail})"
    click.echo(line)
    for group in report.groups:
        keep = group["keep"]
        click.echo(f"  keep {keep['id']} {keep['title']}")
        for item in group["drop"]:
            click.echo(f"    {verb} {item['id']} {item['title']} (duplicate of {keep['id']})")
    for item in report.held:
        click.echo(
            f"  held {item['id']} {item['title']} (a person's item; to confirm:"
            f' reflections drop {item["id"]} --note "duplicate of {item["keep"]}")'
        )


@main.command()
@click.option(
    "--dry-run",
    is_flag=True,
    help="Ask the model and print the groups, but drop nothing (the call is still paid).",
)
@click.option(
    "--due",
    is_flag=True,
    help="The periodic pass now: every repository this machine knows, each only if due.",
)
@_repo_option
@_json_option
def dedupe(dry_run: bool, due: bool, repo: str | None, as_json: bool) -> None:
    """Drop open items that duplicate an older one (a cheap model groups them).

    Runs now for the repository whatever the daily interval says (a person asked),
    but within REFLECT_DEDUPE_DAILY_MAX calls a day; ``reopen`` undoes a drop.

    \f
    Args:
        dry_run: Print what would be dropped without writing.
        due: Go over every known repository the way the periodic task does.
        repo: ``--repo``.
        as_json: Print the report(s) as JSON.
    """
    from reflect_jobs.config import SettingsError, load_settings
    from reflect_jobs.logging import configure_logging
    from reflect_jobs.queue import make_huey
    from reflect_jobs.write_lease import make_write_lease

    from .dedupe_run import run_dedupe, run_due

    try:
        settings = load_settings()
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None
    configure_logging(settings, console=False)
    storage = make_huey(settings).storage
    lease = make_write_lease(settings, storage)
    if due:
        reports = run_due(settings, storage, lease=lease)
    else:
        with _store(repo) as store:
            reports = [
                run_dedupe(store, settings, storage, force=True, dry_run=dry_run, lease=lease)
            ]
    if as_json:
        _emit([r.to_json() for r in reports] if due else reports[0].to_json())
    else:
        for report in reports:
            _print_dedupe(report, dry_run)
    failed = [r for r in reports if r.status == "failed"]
    if failed:
        raise click.ClickException(f"dedupe failed: {failed[0].repo}: {failed[0].detail}")


main.add_command(doctor)
main.add_command(refresh)
