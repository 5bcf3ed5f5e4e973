"""``reflections doctor`` and ``reflections refresh``: what the logs hold that is not folded.

A host log arrives by git sync and is not trusted to speak for anyone but its host (docs/
REFLECTIONS.md): the refresh ignores and counts events claiming another host or reusing an
event id, skips and counts invalid lines and lines over 64 KiB, and clamps times from the
future. ``doctor`` refreshes the repository (or every repository this machine knows) and
lists those counts per log, so a person can see that a log tried to speak for someone else;
``refresh`` brings the index up to date now (what the worker does every minute).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from reflect_jobs.envpaths import home_dir_str, kb_root_str
from reflect_jobs.repo import RepoError
from reflect_jobs.repo_home import resolve

from .background import known_log_dirs
from .events import MAX_LINE_BYTES, host_name
from .index import ReflectionIndex, index_path

__all__ = ["IGNORED", "describe", "doctor", "refresh"]

#: The counters of lines that were not folded (``future`` times are clamped, not ignored).
IGNORED = ("other_host", "reused", "bad", "oversize")


def _kb(env: dict[str, str]) -> Path:
    return Path(kb_root_str(env))


def _targets(
    index: ReflectionIndex, repo: str | None, all_repos: bool, env: dict[str, str]
) -> dict[str, Path]:
    if all_repos:
        return known_log_dirs(index, _kb(env))
    try:
        resolved = resolve(repo, Path.cwd(), env)
    except RepoError as exc:
        raise click.UsageError(str(exc)) from None
    return {resolved.key: Path(resolved.log_dir)}


def describe(row: dict[str, Any]) -> str:
    """One log's line: its events and what it held that was ignored, skipped or clamped.

    Args:
        row: A :meth:`~.index.ReflectionIndex.log_report` row.

    Returns:
        E.g. ``beta.jsonl: 12 events; ignored 3 claiming another host, 1 reusing an event
        id; 2 future times clamped``.
    """
    count = row["events"]
    parts = [f"{Path(row['log']).name}: {count} event{'' if count == 1 else 's'}"]
    ignored = [
        f"{row['other_host']} claiming another host" if row["other_host"] else "",
        f"{row['reused']} reusing an event id" if row["reused"] else "",
    ]
    skipped = [
        f"{row['bad']} invalid" if row["bad"] else "",
        f"{row['oversize']} over {MAX_LINE_BYTES // 1024} KiB" if row["oversize"] else "",
    ]
    if any(ignored):
        parts.append("ignored " + ", ".join(x for x in ignored if x))
    if any(skipped):
        parts.append("skipped " + ", ".join(x for x in skipped if x) + " line(s)")
    if row["future"]:
        parts.append(f"{row['future']} future time(s) clamped")
    return "; ".join(parts)


@click.command()
@click.option("--all", "all_repos", is_flag=True, help="Every repository this machine knows.")
@click.option("--repo", default=None, metavar="DIR|KEY", help="The repository (default: cwd's).")
@click.option("--json", "as_json", is_flag=True, help="Print stable JSON.")
def doctor(all_repos: bool, repo: str | None, as_json: bool) -> None:
    """List, per host log, the events ignored (another host, a reused id) and lines skipped.

    Exits 1 when any log held something that was not folded.

    \f
    Args:
        all_repos: Every repository with logs this machine knows.
        repo: ``--repo``.
        as_json: Print a list of ``{"repo", "log", "events", "bad", "other_host", "reused",
            "oversize", "future"}``.
    """
    env = dict(os.environ)
    index = ReflectionIndex(index_path(Path(home_dir_str(env))))
    rows: list[dict[str, Any]] = []
    try:
        for key, log_dir in _targets(index, repo, all_repos, env).items():
            index.refresh(key, log_dir, own=host_name(env))
            rows += index.log_report(key)
    finally:
        index.close()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        for key in dict.fromkeys(r["repo"] for r in rows):
            click.echo(key)
            for row in rows:
                if row["repo"] == key:
                    click.echo("  " + describe(row))
        if not rows:
            click.echo("no reflection logs")
    if any(row[k] for row in rows for k in IGNORED):
        raise SystemExit(1)


@click.command()
@click.option("--all", "all_repos", is_flag=True, help="Every repository this machine knows.")
@click.option("--repo", default=None, metavar="DIR|KEY", help="The repository (default: cwd's).")
def refresh(all_repos: bool, repo: str | None) -> None:
    """Bring the reflection index up to date now (the worker does it every minute).

    \f
    Args:
        all_repos: Every repository with logs this machine knows.
        repo: ``--repo``.
    """
    env = dict(os.environ)
    index = ReflectionIndex(index_path(Path(home_dir_str(env))))
    try:
        for key, log_dir in _targets(index, repo, all_repos, env).items():
            stats = index.refresh(key, log_dir, own=host_name(env))
            for warning in stats.warnings:
                click.echo(f"warning: {warning}", err=True)
            click.echo(f"{key}: {stats.events} event(s) read, {stats.items} item(s) folded")
    finally:
        index.close()
