"""Commands about the knowledge base: search it, bring its indexes in line, repair its graph,
decide the retirements the daily retire cap held back and the learnings waiting for review.

``search``, ``reindex``, ``repair``, ``proposals`` and ``review``. They load the index stack
(embeddings, the graph), so library logging is routed to drain.log first: a model's load banner in the middle of
``--json`` output would make it unparseable.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click
import structlog

from ..config import Settings
from .common import emit, get_settings, quiet_libraries, table

if TYPE_CHECKING:
    from ..index.search import SearchResult


@click.command()
@click.argument("query")
@click.option(
    "--mode",
    type=click.Choice(["hybrid", "lexical", "naive", "local", "global"]),
    default="hybrid",
    show_default=True,
    help="hybrid (words + meaning), lexical (exact words), naive (meaning only); local and"
    " global (the graph) are explicit only: they find less (docs/BENCHMARKS.md).",
)
@click.option("-k", "k", type=int, default=5, show_default=True)
@click.option(
    "--repo",
    "repo_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Only this repository's learnings and the global ones.",
)
@click.option("--global", "only_global", is_flag=True, help="Only global learnings.")
@click.option("--json", "as_json", is_flag=True)
def search(
    query: str, mode: str, k: int, repo_dir: str | None, only_global: bool, as_json: bool
) -> None:
    """Search the knowledge base (retired notes never appear; proposed and dormant ones are
    marked).

    Run inside a repository, its own learnings come first at equal relevance (every
    repository's still show; --repo keeps only it and the global ones). Nothing is
    returned below a relevance floor. --json prints {"results": [...], "reason":
    ...}; reason says why results is empty. The graph modes (local, global) are explicit only.

    \f
    Args:
        query: Free text.
        mode: ``hybrid``, ``naive``, ``local``, ``global`` or ``lexical`` (see
            :func:`reflect_jobs.index.search.search`).
        k: At most this many hits.
        repo_dir: A directory whose repository scopes the search (ARCHITECTURE §13).
        only_global: Only learnings scoped ``global``.
        as_json: Print the hits as JSON. Warnings go to stderr either way.
    """
    s = get_settings()
    if repo_dir is not None and only_global:
        raise click.UsageError("--repo and --global exclude each other")
    import os

    from ..repo import repo_for

    repo_key = prefer = None
    if repo_dir is not None:
        ref = repo_for(os.path.abspath(repo_dir))
        if ref is None:
            raise click.UsageError(f"--repo {repo_dir}: no such directory")
        repo_key = ref.key
    elif not only_global:  # asked from inside a checkout: its own learnings first
        try:
            here = repo_for(os.getcwd())
        except OSError:  # the working directory was removed: no checkout to prefer
            here = None
        prefer = here.key if here is not None and here.in_git else None
    quiet_libraries(s)
    result = _search(
        s, query, mode, k, repo_key=repo_key, only_global=only_global, prefer_repo_key=prefer
    )
    from ..recall import fading

    dormant = fading.dormant_ids(str(s.kb_path), [str(h["id"]) for h in result.hits])
    for h in result.hits:
        if h["id"] in dormant:  # found, but not told at session start (issue 23)
            h["dormant"] = True
    if as_json:
        emit({"results": result.hits, "reason": result.reason})
    else:
        if not result.hits:
            click.echo(f"no matches: {result.reason}" if result.reason else "no matches")
        for i, h in enumerate(result.hits, 1):
            mark = "  (proposed: waiting for review)" if h.get("status") == "proposed" else ""
            if h.get("dormant"):
                mark += "  " + fading.mark(fading.unused_days())
            click.echo(
                f"{i}. {h['title']}  [{h['id']}]  score {h['score']:.3f}{mark}\n   {h['path']}"
            )
    for w in result.warnings:
        click.secho(f"warning: {w}", fg="yellow", err=True)


def _search(
    s: Settings,
    query: str,
    mode: str,
    k: int,
    *,
    repo_key: str | None = None,
    only_global: bool = False,
    prefer_repo_key: str | None = None,
) -> SearchResult:
    """The running worker's answer when one is up, else in-process (ARCHITECTURE §8.1).

    Lexical search is as fast in-process as through a worker, so only the modes that need
    the model ask the worker, scoped (``--repo``/``--global``) or not. A worker that is up
    but answers garbage, an error or nothing within ``REFLECT_SEARCH_WORKER_SEC`` is not
    waited for again: the answer is lexical, in-process (no model load), with a warning.
    A query with nothing to search (stop words, punctuation) never reaches the worker.
    Which path answered is logged (``search_answered``, ``via``) to drain.log.

    Args:
        s: The settings.
        query: The search text.
        mode: As ``search --mode``.
        k: How many hits.
        repo_key: Keep this repository's and the global learnings only.
        only_global: Keep the global learnings only.
        prefer_repo_key: Keep everything, this repository's learnings first at equal
            relevance (the checkout the search was run in).

    Returns:
        The search result.
    """
    from ..index.lexical import query_match
    from ..index.search import search as do_search
    from ..index.tokens import MAX_QUERY_CHARS
    from ..warm.client import WorkerFailed, search_via_worker

    log = structlog.get_logger("reflect_jobs.cli")
    query = query[:MAX_QUERY_CHARS]
    use_worker = mode != "lexical" and query_match(query)[0] is not None
    result = None
    fallback: str | None = None
    if use_worker:
        try:
            result = search_via_worker(
                query,
                k,
                mode,
                repo_key,
                only_global=only_global,
                prefer_repo=prefer_repo_key,
                settings=s,
            )
        except WorkerFailed as exc:
            fallback = str(exc)
            log.warning("search_worker_failed", error=fallback, mode=mode)
    via = "worker" if result is not None else "in_process"
    if result is None:
        result = do_search(
            s.kb_path,
            query,
            mode=mode,
            k=k,
            vectors=s.index_vectors and not fallback,  # no vectors: lexical, no model load
            embed_model=s.embed_model,
            repo_key=repo_key,
            only_global=only_global,
            prefer_repo_key=prefer_repo_key,
        )
        if fallback:
            via = "lexical_fallback"
            result.warnings.append(f"{fallback}; lexical results only")
    log.info("search_answered", via=via, mode=mode, hits=len(result.hits))
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
    from ..index.repair import repair as do_repair

    report = do_repair(
        s.kb_path, maintain=maintain, vectors=s.index_vectors, embed_model=s.embed_model
    )
    click.echo(
        f"graphml: {report.action}: {report.detail}"
        + (f"; maintain {report.maintained}" if report.maintained else "")
    )
    if report.action == "unrepairable" and not report.rebuilt:
        sys.exit(1)


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True)
@click.option("--all", "show_all", is_flag=True, help="Applied and rejected ones too.")
@click.pass_context
def proposals(ctx: click.Context, as_json: bool, show_all: bool) -> None:
    """Retirements held back by REFLECT_MAX_RETIRE_PER_DAY: list, apply ID, reject ID.

    \f
    Args:
        ctx: click's context (a subcommand, if one was given, runs instead of the list).
        as_json: Print the list as JSON (a list of proposal objects).
        show_all: List every proposal, not only the pending ones.
    """
    if ctx.invoked_subcommand is not None:
        return
    s = get_settings()
    from ..ledger import proposals as ledger_proposals
    from ..ledger.db import session_scope

    with session_scope(s.db_url, readonly=True) as session:
        rows = ledger_proposals.list_proposals(
            session, status=None if show_all else ledger_proposals.PENDING
        )
    if as_json:
        emit(rows)
        return
    if not rows:
        click.echo("no retire proposals" + ("" if show_all else " pending"))
        return
    click.echo(
        table(
            [
                [r["id"], r["status"], r["learning_id"], (r["title"] or "")[:50], r["reason"][:60]]
                for r in rows
            ],
            ["id", "status", "learning", "title", "reason"],
        )
    )


def _decide(verb: str, proposal_id: int) -> None:
    """Apply or reject one proposal; a bad id is one line and exit 1."""
    import getpass

    s = get_settings()
    from ..ledger.proposals import ProposalError
    from ..pipeline import note_edits

    decide = note_edits.apply_proposal if verb == "apply" else note_edits.reject_proposal
    try:
        shown = decide(s.db_url, proposal_id, by=f"cli:{getpass.getuser()}")
    except ProposalError as exc:
        raise click.ClickException(str(exc)) from None
    if verb == "apply" and not s.skip_reindex:
        from .. import tasks

        tasks.HueyDispatcher().kb_changed()  # the retired note leaves the indexes
    click.echo(f"retire proposal {proposal_id}: {shown['status']} ({shown['learning_id']})")


@proposals.command("apply")
@click.argument("proposal_id", type=int)
def proposals_apply(proposal_id: int) -> None:
    """Retire the learning a pending proposal names (not counted against the daily cap).

    \f
    Args:
        proposal_id: The proposal's id (from ``reflect-jobs proposals``).
    """
    _decide("apply", proposal_id)


@proposals.command("reject")
@click.argument("proposal_id", type=int)
def proposals_reject(proposal_id: int) -> None:
    """Keep the learning a pending proposal names; the proposal is closed.

    \f
    Args:
        proposal_id: The proposal's id (from ``reflect-jobs proposals``).
    """
    _decide("reject", proposal_id)


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def review(ctx: click.Context, as_json: bool) -> None:
    """Learnings waiting for review: list, accept ID, reject ID.

    Proposed ones are never told until accepted; a pending global one (``proposed_scope:
    global``) is told only in its repository until a second session or you accept it.

    \f
    Args:
        ctx: click's context (a subcommand, if one was given, runs instead of the list).
        as_json: Print the list as JSON (a list of learning objects with their evidence
            and ``applies_when``, the tasks accepting one lets it be told for).
    """
    if ctx.invoked_subcommand is not None:
        return
    s = get_settings()
    from ..ledger import review as ledger_review
    from ..ledger.db import session_scope
    from ..pipeline import global_cap

    with session_scope(s.db_url, readonly=True) as session:
        rows = ledger_review.list_proposed(session, review_below=s.review_below)
        rows = global_cap.with_pending(session, rows)
    for r in rows:  # what accepting it lets it be told for: the reviewer vets these too
        r["applies_when"] = _phrases_of(r.get("note_path"))
    if as_json:
        emit(rows)
        return
    if not rows:
        click.echo("no learnings waiting for review")
        return
    click.echo(f"{len(rows)} learning(s) waiting for review:")
    for r in rows:
        click.echo(f"\n{r['id']}  {r['title']}")
        click.echo(f"  why: {'; '.join(r['why']) or 'proposed'}  confidence {r['confidence']:.2f}")
        if r["evidence"]:
            click.echo(f"  evidence ({r['evidence_origin'] or 'unknown'}): {r['evidence']}")
        if r["applies_when"]:
            click.echo(f"  applies when: {'; '.join(r['applies_when'])}")
        if r["anchors"]:
            shown = ", ".join(
                a["path"] + (f" ({a['symbol']})" if a.get("symbol") else "") for a in r["anchors"]
            )
            click.echo(f"  anchors: {shown}")


def _phrases_of(note_path: object) -> list[str]:
    """A listed learning's ``applies_when`` phrases, read from its note (none when the note
    is gone or unreadable: the list still shows the rest)."""
    from pathlib import Path

    from .. import kb
    from ..kb.render import applies_when

    if not isinstance(note_path, str) or not note_path:
        return []
    try:
        return applies_when(kb.parse_note(Path(note_path)).frontmatter)
    except (OSError, kb.NoteError):
        return []


def _review_decide(verb: str, learning_id: str) -> None:
    """Accept or reject one learning; a bad id is one line and exit 1."""
    import getpass

    s = get_settings()
    from ..ledger.review import ReviewError
    from ..pipeline import note_edits

    try:
        shown = note_edits.review_decide(s.db_url, learning_id, verb, by=f"cli:{getpass.getuser()}")
    except ReviewError as exc:
        raise click.ClickException(str(exc)) from None
    if not s.skip_reindex:
        from .. import tasks

        tasks.HueyDispatcher().kb_changed()  # the context store learns of it at the reindex
    click.echo(f"{learning_id}: {shown['status']} ({shown['title']})")
    if not shown["note_synced"]:
        raise click.ClickException("the note could not be rewritten; run the command again")


@review.command("accept")
@click.argument("learning_id")
def review_accept(learning_id: str) -> None:
    """Accept a proposed learning (it becomes active and is told), or make a pending global one global.

    \f
    Args:
        learning_id: The learning's id (from ``reflect-jobs review``).
    """
    _review_decide("accept", learning_id)


@review.command("reject")
@click.argument("learning_id")
def review_reject(learning_id: str) -> None:
    """Reject a proposed learning: it is retired (status rejected) and never told.

    \f
    Args:
        learning_id: The learning's id (from ``reflect-jobs review``).
    """
    _review_decide("reject", learning_id)


#: Registered on the top-level group by :mod:`reflect_jobs.cli`.
COMMANDS = (search, reindex, repair, proposals, review)
