"""Commands about the knowledge base: search it, bring its indexes in line, repair its graph.

``search``, ``reindex`` and ``repair``. They load the index stack (embeddings, the graph),
so library logging is routed to drain.log first: a model's load banner in the middle of
``--json`` output would make it unparseable.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click
import structlog

from ..config import Settings
from .common import emit, get_settings, quiet_libraries

if TYPE_CHECKING:
    from ..index.search import SearchResult


@click.command()
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
    """Search the knowledge base (retired notes never appear).

    \f
    Args:
        query: Free text.
        mode: ``hybrid``, ``naive``, ``local``, ``global`` or ``lexical`` (see
            :func:`reflect_jobs.index.search.search`).
        k: At most this many hits.
        as_json: Print the hits as JSON. Warnings go to stderr either way.
    """
    s = get_settings()
    quiet_libraries(s)
    result = _search(s, query, mode, k)
    if as_json:
        emit(result.hits)
    else:
        if not result.hits:
            click.echo("no matches")
        for i, h in enumerate(result.hits, 1):
            click.echo(f"{i}. {h['title']}  [{h['id']}]  score {h['score']:.3f}\n   {h['path']}")
    for w in result.warnings:
        click.secho(f"warning: {w}", fg="yellow", err=True)


def _search(s: Settings, query: str, mode: str, k: int) -> SearchResult:
    """The running worker's answer when one is up, else in-process (ARCHITECTURE §8.1).

    Lexical search is as fast in-process as through a worker, so only the modes that need
    the model ask the worker. Which path answered is logged (``search_answered``, ``via``)
    to drain.log; the output is the same either way.
    """
    from ..index.search import search as do_search
    from ..warm.client import search_via_worker

    result = None if mode == "lexical" else search_via_worker(query, k, mode, settings=s)
    via = "worker" if result is not None else "in_process"
    if result is None:
        result = do_search(
            s.kb_path, query, mode=mode, k=k, vectors=s.index_vectors, embed_model=s.embed_model
        )
    structlog.get_logger("reflect_jobs.cli").info(
        "search_answered", via=via, mode=mode, hits=len(result.hits)
    )
    return result


@click.command()
@click.option("--force", is_flag=True, help="Rebuild every index from the notes.")
@click.option("--json", "as_json", is_flag=True)
def reindex(force: bool, as_json: bool) -> None:
    """Bring the indexes in line with the notes (incremental unless --force).

    \f
    A progress bar is drawn on stderr when it is a terminal and ``--json`` is off.

    Args:
        force: Rebuild every index from the notes.
        as_json: Print :meth:`reflect_jobs.index.maintenance.ReindexStats.to_dict` as JSON.
    """
    s = get_settings()
    quiet_libraries(s)
    from ..index.maintenance import reindex as do_reindex

    bar = None
    if sys.stderr.isatty() and not as_json:
        bar = click.progressbar(length=1, label="reindex", file=sys.stderr)

    def progress(i: int, n: int) -> None:
        if bar is not None:
            bar.length = n
            bar.update(1)

    stats = do_reindex(
        s.kb_path,
        force=force,
        vectors=s.index_vectors,
        embed_model=s.embed_model,
        progress=progress,
    )
    if bar is not None:
        bar.render_finish()
    if as_json:
        emit(stats.to_dict())
    else:
        click.echo(
            f"{stats.notes} notes: {stats.inserted} (re)indexed, {stats.removed} removed, {stats.unchanged} unchanged, graph {stats.graph}"
        )
        for e in stats.errors:
            click.secho(f"warning: {e}", fg="yellow", err=True)


@click.command()
@click.option("--maintain", is_flag=True, help="Also prune orphans and relink isolated nodes.")
def repair(maintain: bool) -> None:
    """Validate and repair the KB's graphml (rebuilt from the notes when beyond repair).

    \f
    Exits 1 when the graph is unrepairable and was not rebuilt.

    Args:
        maintain: Also prune orphans and relink isolated nodes.
    """
    s = get_settings()
    quiet_libraries(s)
    from ..index.maintenance import repair as do_repair

    report = do_repair(
        s.kb_path, maintain=maintain, vectors=s.index_vectors, embed_model=s.embed_model
    )
    click.echo(
        f"graphml: {report.action}: {report.detail}"
        + (f"; maintain {report.maintained}" if report.maintained else "")
    )
    if report.action == "unrepairable" and not report.rebuilt:
        sys.exit(1)


#: Registered on the top-level group by :mod:`reflect_jobs.cli`.
COMMANDS = (search, reindex, repair)
