"""``reflect-jobs init`` and ``reflect-jobs sync``: the knowledge base kept in git.

The work is :mod:`reflect_jobs.kb.gitrepo`; a refusal is one line, exit 1.
"""

from __future__ import annotations

import click

from .common import emit, get_settings, quiet_libraries


@click.command()
@click.option("--remote", default=None, help="Add this URL as the repository's origin.")
def init(remote: str | None) -> None:
    """Make the knowledge base a git repository (derived files kept out by .gitignore).

    \f
    Idempotent: re-running adds missing ``.gitignore`` lines and untracks derived files a
    repository already held (``index/``, databases, locks, temp files).

    Args:
        remote: A URL for ``origin`` (e.g. a private repository), when none is set.

    Raises:
        click.ClickException: Git is missing or failed (exit 1).
    """
    s = get_settings()
    from ..kb.gitrepo import GitError
    from ..kb.gitrepo import init as do_init

    try:
        done = do_init(s.kb_path, remote=remote)
    except GitError as exc:
        raise click.ClickException(str(exc)) from None
    for line in done or [f"{s.kb_path} is already a git repository with our .gitignore"]:
        click.echo(line)
    if not remote:
        click.echo(
            f"to share it: git -C {s.kb_path} remote add origin URL, then `reflect-jobs sync`"
        )


@click.command()
@click.option("--json", "as_json", is_flag=True)
def sync(as_json: bool) -> None:
    """Commit this machine's notes, pull --rebase, reindex what changed, push.

    \f
    Refuses (exit 1, one line) without a repository or a remote, with a rebase or merge in
    progress, conflicts, or uncommitted changes outside ``documents/`` and ``repos/``; a
    pull that conflicts is aborted and nothing is pushed.

    Args:
        as_json: Print ``{"committed", "pulled", "reindexed", "pushed", "branch", "remote"}``.

    Raises:
        click.ClickException: A refusal or a git failure (exit 1).
    """
    s = get_settings()
    from ..kb.gitrepo import GitError
    from ..kb.gitrepo import sync as do_sync

    def reindex() -> None:
        quiet_libraries(s)
        from ..index.maintenance import reindex as do_reindex

        do_reindex(s.kb_path, vectors=s.index_vectors, embed_model=s.embed_model)

    try:
        report = do_sync(s.kb_path, reindex=reindex)
    except GitError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        emit(report.__dict__)
        return
    click.echo(
        f"{s.kb_path} ({report.remote}/{report.branch}): committed {report.committed} file(s), "
        f"pulled {len(report.pulled)}"
        + (", reindexed" if report.reindexed else "")
        + (", pushed" if report.pushed else ", nothing to push")
    )


#: Registered on the top-level group by :mod:`reflect_jobs.cli`.
COMMANDS = (init, sync)
