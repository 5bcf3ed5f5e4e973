"""The knowledge base as a git repository: ``reflect-jobs init`` and ``reflect-jobs sync``.

Seed 003's KB is "a plain git repo of notes; the index is not committed". The notes
(``documents/``) and the reflection logs (``repos/<key>/reflections/<host>.jsonl``, one file
per machine so a sync never merges one) are the knowledge; ``index/`` and every database,
lock and temp file are derived, rebuilt by ``reflect-jobs reindex``, and would only make
conflicts. So :func:`init` writes a ``.gitignore`` that keeps them out (and untracks any a
hand-made repository already holds), and :func:`sync` commits the notes this machine wrote,
pulls with rebase, reindexes what the pull changed, and pushes.

``sync`` refuses, with one line saying why, whenever it could lose or tangle something: no
repository, no remote, a rebase or merge in progress, unmerged paths, uncommitted changes
outside the files the worker writes, or a pull that conflicts (the rebase is aborted: the
repository is left as it was before the pull). Git runs with ``GIT_TERMINAL_PROMPT=0`` so
a remote that wants a password fails instead of waiting for one.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

#: What ``.gitignore`` keeps out: everything derived (ARCHITECTURE §2.3).
GITIGNORE_LINES = (
    "# reflect-jobs: derived files, rebuilt by `reflect-jobs reindex`; never commit them",
    "/index/",
    "*.db",
    "*.db-journal",
    "*-wal",
    "*-shm",
    "*.lock",
    "*.tmp",
    ".doctor-probe",
)
#: What the worker writes; ``sync`` commits changes here by itself.
OURS = ("documents/", "repos/", ".gitignore")


class GitError(Exception):
    """A refusal or a git failure; the message is the one line a person reads."""


@dataclass
class SyncReport:
    """What :func:`sync` did."""

    committed: int = 0
    pulled: list[str] = field(default_factory=list)
    reindexed: bool = False
    pushed: bool = False
    branch: str = ""
    remote: str = ""


def git(kb: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``git -C kb ARGS`` without a terminal prompt.

    Args:
        kb: The repository.
        *args: Git's arguments.
        check: Raise :class:`GitError` on a non-zero exit.

    Returns:
        The finished process (text output).

    Raises:
        GitError: Git is missing, or it failed and ``check`` is set (its first error line).
    """
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        proc = subprocess.run(
            ["git", "-C", str(kb), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    except FileNotFoundError:
        raise GitError("git is not installed (it is needed for init and sync)") from None
    except subprocess.TimeoutExpired:
        raise GitError(
            f"git {' '.join(args[:2])} took over 120 s (a remote not answering?)"
        ) from None
    if check and proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        raise GitError(f"git {args[0]} failed: {lines[-1] if lines else f'exit {proc.returncode}'}")
    return proc


def _identity(kb: Path) -> list[str]:
    """``-c user.name/-c user.email`` when git has no identity configured, else nothing."""
    if git(kb, "config", "user.email", check=False).stdout.strip():
        return []
    host = socket.gethostname().split(".")[0] or "localhost"
    return ["-c", "user.name=reflect-jobs", "-c", f"user.email=reflect-jobs@{host}"]


def is_repo(kb: Path) -> bool:
    """Whether ``kb`` is the top of a git work tree.

    Args:
        kb: The directory.

    Returns:
        True when it has its own ``.git`` and git agrees it is the top.
    """
    if not (kb / ".git").exists():
        return False
    top = git(kb, "rev-parse", "--show-toplevel", check=False).stdout.strip()
    return bool(top) and Path(top).resolve() == kb.resolve()


def merged_gitignore(text: str) -> str:
    """``.gitignore`` text with every line of :data:`GITIGNORE_LINES` present once.

    Args:
        text: The current file (``""`` when there is none).

    Returns:
        The text with the missing lines appended (a person's lines kept in place).
    """
    have = {ln.strip() for ln in text.splitlines()}
    missing = [ln for ln in GITIGNORE_LINES if ln not in have]
    if not missing:
        return text
    head = text if not text or text.endswith("\n") else text + "\n"
    return head + ("\n" if head.strip() else "") + "\n".join(missing) + "\n"


def init(kb: Path, *, remote: str | None = None) -> list[str]:
    """Make the KB a git repository whose commits hold only knowledge.

    Idempotent: an existing repository gets the missing ``.gitignore`` lines, its tracked
    derived files are untracked (the files stay on disk), and a commit is made only when
    something changed.

    Args:
        kb: ``$GLOBAL_LEARNINGS_PATH`` (created 0700 when missing).
        remote: A URL to add as ``origin`` (when no ``origin`` exists yet).

    Returns:
        One line per thing done.

    Raises:
        GitError: Git is missing or failed.
    """
    done = []
    kb.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not is_repo(kb):
        git(kb, "init", "-q")
        done.append(f"initialised a git repository in {kb}")
    ignore = kb / ".gitignore"
    old = ignore.read_text(encoding="utf-8") if ignore.exists() else ""
    new = merged_gitignore(old)
    if new != old:
        ignore.write_text(new, encoding="utf-8")
        done.append(f"{'updated' if old else 'wrote'} {ignore} (index/, databases, locks kept out)")
    tracked = git(kb, "ls-files", "-ci", "--exclude-standard").stdout.split()
    if tracked:
        git(kb, "rm", "-q", "--cached", "--", *tracked)
        done.append(f"untracked {len(tracked)} derived file(s) (kept on disk)")
    git(kb, "add", "-A")
    if git(kb, "diff", "--cached", "--quiet", check=False).returncode != 0:
        git(kb, *_identity(kb), "commit", "-q", "-m", "reflect-jobs init: the knowledge base")
        done.append("committed the notes")
    if remote:
        if git(kb, "remote", "get-url", "origin", check=False).returncode == 0:
            done.append("origin already set: left as it is")
        else:
            git(kb, "remote", "add", "origin", remote)
            done.append(f"added remote origin {remote}")
    return done


def _state_problem(kb: Path) -> str | None:
    """A rebase or merge in progress, or unmerged paths: why sync must not start."""
    gitdir = Path(git(kb, "rev-parse", "--absolute-git-dir").stdout.strip())
    for name, what in (
        ("rebase-merge", "a rebase"),
        ("rebase-apply", "a rebase"),
        ("MERGE_HEAD", "a merge"),
    ):
        if (gitdir / name).exists():
            return f"{what} is in progress in {kb}: finish or abort it first (git -C {kb} status)"
    unmerged = git(kb, "diff", "--name-only", "--diff-filter=U").stdout.split()
    if unmerged:
        return f"unresolved conflicts in {kb}: {', '.join(unmerged[:5])} (git -C {kb} status)"
    return None


def _dirty(kb: Path) -> tuple[list[str], list[str]]:
    """Uncommitted paths, split into the worker's (:data:`OURS`) and anything else."""
    ours: list[str] = []
    other: list[str] = []
    for line in git(kb, "status", "--porcelain", "--untracked-files=all").stdout.splitlines():
        path = line[3:].split(" -> ")[-1].strip('"')
        (ours if path.startswith(OURS) else other).append(path)
    return ours, other


def sync(kb: Path, *, reindex: Callable[[], object] | None = None) -> SyncReport:
    """Commit this machine's notes, pull with rebase, reindex what changed, push.

    Args:
        kb: The repository (``$GLOBAL_LEARNINGS_PATH``).
        reindex: Called once when the pull changed notes (the incremental reindex).

    Returns:
        What was done.

    Raises:
        GitError: A refusal (not a repository, no remote, a rebase/merge in progress,
            conflicts, changes outside the worker's files, a pull that conflicts — its rebase
            aborted) or a git failure; nothing was pushed then.
    """
    if not is_repo(kb):
        raise GitError(f"{kb} is not a git repository: run `reflect-jobs init` first")
    remotes = git(kb, "remote").stdout.split()
    if not remotes:
        raise GitError(
            f"{kb} has no git remote: add one with `git -C {kb} remote add origin URL` "
            "(or `reflect-jobs init --remote URL`)"
        )
    problem = _state_problem(kb)
    if problem:
        raise GitError(problem)
    ours, other = _dirty(kb)
    if other:
        raise GitError(
            f"uncommitted changes outside documents/ and repos/ in {kb}: "
            f"{', '.join(other[:5])}; commit or stash them first"
        )
    report = SyncReport(remote="origin" if "origin" in remotes else remotes[0])
    branch = git(kb, "symbolic-ref", "--short", "-q", "HEAD", check=False).stdout.strip()
    if not branch:
        raise GitError(f"{kb} is on a detached HEAD: check out a branch first")
    report.branch = branch
    if ours:
        git(kb, "add", "-A", "--", *ours)
        host = socket.gethostname().split(".")[0]
        git(
            kb,
            *_identity(kb),
            "commit",
            "-q",
            "-m",
            f"reflect-jobs sync: {len(ours)} file(s) from {host}",
        )
        report.committed = len(ours)
    has_head = git(kb, "rev-parse", "-q", "--verify", "HEAD", check=False).returncode == 0
    before = git(kb, "rev-parse", "HEAD").stdout.strip() if has_head else ""
    remote_has = git(kb, "ls-remote", "--heads", report.remote, branch).stdout.strip()
    if remote_has:
        pull = git(kb, *_identity(kb), "pull", "--rebase", "-q", report.remote, branch, check=False)
        if pull.returncode != 0:
            conflicted = git(
                kb, "diff", "--name-only", "--diff-filter=U", check=False
            ).stdout.split()
            git(kb, "rebase", "--abort", check=False)
            what = (
                f"conflicts in {', '.join(conflicted[:5])}"
                if conflicted
                else ((pull.stderr.strip().splitlines() or ["the pull failed"])[-1])
            )
            raise GitError(
                f"pull --rebase from {report.remote}/{branch} stopped ({what}); the rebase was "
                f"aborted and nothing was pushed: resolve it by hand (git -C {kb} pull --rebase)"
            )
        after = git(kb, "rev-parse", "HEAD").stdout.strip()
        if before and after != before:
            report.pulled = git(kb, "diff", "--name-only", before, after).stdout.split()
        elif not before:
            report.pulled = git(kb, "ls-files").stdout.split()
    if reindex is not None and any(p.startswith(("documents/", "repos/")) for p in report.pulled):
        reindex()
        report.reindexed = True
    if has_head or remote_has:
        git(kb, "push", "-q", "-u", report.remote, f"HEAD:{branch}")
        report.pushed = True
    return report
