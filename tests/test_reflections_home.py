"""Which repository a command means and where its memory lives (``reflect_jobs/repo.py``,
``repo_home.py``; no git binary needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflect_jobs.repo import RepoError, git_root, normalise_remote, repo_for
from reflect_jobs.repo_home import memory_home, resolve


def make_repo(root: Path, origin: str | None = None) -> Path:
    (root / ".git").mkdir(parents=True)
    config = "[core]\n\tbare = false\n"
    if origin:
        config += (
            f'[remote "origin"]\n\turl = {origin}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n'
        )
    (root / ".git" / "config").write_text(config)
    return root


def name_of(root: Path) -> str:
    found = repo_for(str(root))
    assert found is not None
    return found.name


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:Owner/Repo.git",
        "https://user:tok3n@GitHub.com/Owner/Repo.git",
        "ssh://git@github.com:22/Owner/Repo",
        "https://github.com/Owner/Repo/",
    ],
)
def test_remote_forms_normalise_alike(url: str) -> None:
    assert normalise_remote(url) == "github.com/Owner/Repo"


def test_git_root_walks_up_and_accepts_a_worktree_file(tmp_path: Path) -> None:
    main = make_repo(tmp_path / "main", "git@github.com:o/r.git")
    (main / "src" / "deep").mkdir(parents=True)
    assert git_root(main / "src" / "deep") == str(main.resolve())
    assert git_root(tmp_path) is None
    wt_gitdir = main / ".git" / "worktrees" / "wt"
    wt_gitdir.mkdir(parents=True)
    (wt_gitdir / "commondir").write_text("../..\n")
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {wt_gitdir}\n")
    assert git_root(wt) == str(wt.resolve())
    # the worktree reads the main repository's origin: both share one memory
    assert name_of(wt) == name_of(main)


def test_home_name_is_the_remote_for_clones_anywhere_else_the_path(tmp_path: Path) -> None:
    a = make_repo(tmp_path / "a", "git@github.com:Owner/Repo.git")
    b = make_repo(tmp_path / "b", "https://github.com/Owner/Repo")
    c = make_repo(tmp_path / "c")
    name = name_of(a)
    assert name == name_of(b)
    assert name.startswith("github.com-owner-repo-") and len(name.rsplit("-", 1)[1]) == 8
    assert name_of(c).startswith("c-") and name_of(c) != name_of(make_repo(tmp_path / "x" / "c"))


def test_memory_home_default_and_mapping_file(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "proj", "git@github.com:o/proj.git")
    found = repo_for(str(root))
    assert found is not None
    env = {"GLOBAL_LEARNINGS_PATH": str(tmp_path / "kb"), "REFLECT_HOME": str(tmp_path / "home")}
    assert memory_home(found, env) == str(tmp_path / "kb" / "repos" / found.name)
    mapping = tmp_path / "home" / "memory-homes.conf"
    mapping.parent.mkdir()
    mapping.write_text(
        "# dotfiles keep my memory\n"
        f"* = {tmp_path}/dots/memory/{{key}}\n"
        f"github.com/o/proj = {tmp_path}/dots/proj-memory\n"
    )
    assert memory_home(found, env) == str(tmp_path / "dots" / "proj-memory")
    by_name = resolve("other-1234abcd", tmp_path, env)
    assert by_name.home == str(tmp_path / "dots" / "memory" / "other-1234abcd")
    mapping.write_text("no equals sign here\n")
    with pytest.raises(RepoError, match="memory-homes.conf:1"):
        memory_home(found, env)


def test_resolve_from_cwd_dir_or_key(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "proj")
    env = {"GLOBAL_LEARNINGS_PATH": str(tmp_path / "kb"), "REFLECT_HOME": str(tmp_path / "home")}
    assert resolve(None, root, env).key == repo_for(str(root)).key == str(root.resolve())
    assert resolve(str(root), tmp_path, env).root == str(root.resolve())
    by_key = resolve("some-key", tmp_path, env)
    assert by_key.root is None
    assert by_key.log_dir == str(tmp_path / "kb" / "repos" / "some-key" / "reflections")
    with pytest.raises(RepoError, match="not inside a git repository"):
        resolve(None, tmp_path, env)
    with pytest.raises(RepoError, match="neither a directory nor a repo key"):
        resolve("Not A Key!", tmp_path, env)
