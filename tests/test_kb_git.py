"""``reflect-jobs init`` / ``sync``: the knowledge base in git, with real git and a bare remote.

Two machines share one private remote. What must hold: the derived index never reaches a
commit, a note written on one machine is found by the other's search after ``sync`` (it was
reindexed), and every refusal — no remote, foreign changes, a conflict — is one line that
leaves the repository as it was.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from support import write_note

from reflect_jobs.cli import main

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def _cli(kb: Path, tmp_path: Path, *args: str):  # type: ignore[no-untyped-def]
    env = {
        "GLOBAL_LEARNINGS_PATH": str(kb),
        "REFLECT_HOME": str(tmp_path / f"state-{kb.name}"),
        "REFLECT_INDEX_VECTORS": "0",
        "HOME": str(tmp_path),
        "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"),  # no identity: ours is used
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return CliRunner().invoke(main, list(args), env=env)


def _reindex(kb: Path) -> None:
    from reflect_jobs.index.maintenance import reindex

    reindex(kb, vectors=False)


def _search(kb: Path, query: str) -> list[str]:
    from reflect_jobs.index.search import search

    return [h["id"] for h in search(kb, query, mode="lexical", k=5, vectors=False).hits]


def test_init_keeps_derived_files_out_and_untracks_old_ones(tmp_path):
    kb = tmp_path / "kb"
    note = write_note(kb, "Pin the pnpm version", "corepack enable")
    _reindex(kb)
    # a hand-made repository that committed its index
    git(kb, "init", "-q")
    git(kb, "add", "-A")
    git(kb, "-c", "user.name=x", "-c", "user.email=x@y", "commit", "-qm", "by hand")
    assert any(p.startswith("index/") for p in git(kb, "ls-files").split())
    out = _cli(kb, tmp_path, "init")
    assert out.exit_code == 0, out.output
    assert "untracked" in out.output
    tracked = git(kb, "ls-files").split()
    assert not any(p.startswith("index/") or p.endswith(".db") for p in tracked), tracked
    assert f"documents/{note.id}.md" in tracked and ".gitignore" in tracked
    assert (kb / "index" / "lexical.db").exists(), "untracked, not deleted"
    assert git(kb, "status", "--porcelain") == ""
    again = _cli(kb, tmp_path, "init")
    assert again.exit_code == 0 and "already a git repository" in again.output


def test_sync_refuses_without_repository_or_remote(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    out = _cli(kb, tmp_path, "sync")
    assert out.exit_code == 1 and "is not a git repository: run `reflect-jobs init`" in out.output
    _cli(kb, tmp_path, "init")
    out = _cli(kb, tmp_path, "sync")
    assert out.exit_code == 1 and "has no git remote" in out.output
    assert out.output.count("\n") == 1


def test_two_machines_share_notes_through_a_bare_remote(tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a, b = tmp_path / "a", tmp_path / "b"
    assert _cli(a, tmp_path, "init", "--remote", str(remote)).exit_code == 0
    first = write_note(a, "Use WAL mode for the SQLite ledger", "journal_mode=wal")
    out = _cli(a, tmp_path, "sync")
    assert out.exit_code == 0, out.output
    assert "pushed" in out.output

    assert _cli(b, tmp_path, "init", "--remote", str(remote)).exit_code == 0
    out = _cli(b, tmp_path, "sync", "--json")
    assert out.exit_code == 0, out.output
    assert (b / "documents" / f"{first.id}.md").exists()
    assert _search(b, "WAL ledger") == [first.id], "pulled and reindexed"

    second = write_note(b, "Never commit the derived index", "reindex on each machine")
    _reindex(b)
    assert _cli(b, tmp_path, "sync").exit_code == 0
    out = _cli(a, tmp_path, "sync")
    assert out.exit_code == 0 and "reindexed" in out.output, out.output
    assert second.id in _search(a, "derived index")
    assert not any(
        p.startswith("index/") for p in git(remote, "ls-tree", "-r", "--name-only", "HEAD").split()
    )


def test_sync_refuses_foreign_changes_and_a_conflict_leaves_the_repository_as_it_was(tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    a, b = tmp_path / "a", tmp_path / "b"
    note = write_note(a, "Shared note", "v1")
    _cli(a, tmp_path, "init", "--remote", str(remote))
    assert _cli(a, tmp_path, "sync").exit_code == 0
    _cli(b, tmp_path, "init", "--remote", str(remote))
    assert _cli(b, tmp_path, "sync").exit_code == 0

    merge_head = Path(git(a, "rev-parse", "--absolute-git-dir").strip()) / "MERGE_HEAD"
    merge_head.write_text(git(a, "rev-parse", "HEAD"))
    out = _cli(a, tmp_path, "sync")
    assert out.exit_code == 1 and "a merge is in progress" in out.output
    merge_head.unlink()
    (a / "README.md").write_text("my notes about the notes\n")
    out = _cli(a, tmp_path, "sync")
    assert out.exit_code == 1
    assert (
        "uncommitted changes outside documents/ and repos/" in out.output
        and "README.md" in out.output
    )
    (a / "README.md").unlink()

    path = f"documents/{note.id}.md"
    (a / path).write_text((a / path).read_text() + "\nedited on a\n")
    (b / path).write_text((b / path).read_text() + "\nedited on b\n")
    assert _cli(a, tmp_path, "sync").exit_code == 0
    out = _cli(b, tmp_path, "sync")
    assert out.exit_code == 1, out.output
    assert f"conflicts in {path}" in out.output and "nothing was pushed" in out.output
    assert out.output.count("\n") == 1
    gitdir = Path(git(b, "rev-parse", "--absolute-git-dir").strip())
    assert not (gitdir / "rebase-merge").exists(), "the rebase was aborted"
    assert git(b, "status", "--porcelain") == "", "the repository is as it was"
    assert "edited on b" in git(b, "show", f"HEAD:{path}"), "b's edit is committed, not lost"
    assert "edited on b" not in git(remote, "show", f"HEAD:{path}"), "nothing pushed"
