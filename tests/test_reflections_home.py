"""Which repository a command means and where its memory lives (no git binary needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflect_jobs.reflections.home import (
    HomeError,
    git_root,
    memory_home,
    normalise_remote,
    repo_key,
    resolve_repo,
)


def make_repo(root: Path, origin: str | None = None) -> Path:
    (root / ".git").mkdir(parents=True)
    config = "[core]\n\tbare = false\n"
    if origin:
        config += (
            f'[remote "origin"]\n\turl = {origin}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n'
        )
    (root / ".git" / "config").write_text(config)
    return root


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
    assert git_root(main / "src" / "deep") == main.resolve()
    assert git_root(tmp_path) is None
    wt_gitdir = main / ".git" / "worktrees" / "wt"
    wt_gitdir.mkdir(parents=True)
    (wt_gitdir / "commondir").write_text("../..\n")
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {wt_gitdir}\n")
    assert git_root(wt) == wt.resolve()
    # the worktree reads the main repository's origin: both share one memory
    assert repo_key(wt) == repo_key(main)


def test_repo_key_is_the_remote_for_clones_anywhere_else_the_path(tmp_path: Path) -> None:
    a = make_repo(tmp_path / "a", "git@github.com:Owner/Repo.git")
    b = make_repo(tmp_path / "b", "https://github.com/Owner/Repo")
    c = make_repo(tmp_path / "c")
    key = repo_key(a)
    assert key == repo_key(b)
    assert key.startswith("github.com-owner-repo-") and len(key.rsplit("-", 1)[1]) == 8
    assert repo_key(c).startswith("c-") and repo_key(c) != repo_key(make_repo(tmp_path / "x" / "c"))


def test_memory_home_default_and_mapping_file(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "proj", "git@github.com:o/proj.git")
    key = repo_key(root)
    env = {"GLOBAL_LEARNINGS_PATH": str(tmp_path / "kb"), "REFLECT_HOME": str(tmp_path / "home")}
    assert memory_home(key, root, env) == tmp_path / "kb" / "repos" / key
    mapping = tmp_path / "home" / "memory-homes.conf"
    mapping.parent.mkdir()
    mapping.write_text(
        "# dotfiles keep my memory\n"
        f"* = {tmp_path}/dots/memory/{{key}}\n"
        f"github.com/o/proj = {tmp_path}/dots/proj-memory\n"
    )
    assert memory_home(key, root, env) == tmp_path / "dots" / "proj-memory"
    assert (
        memory_home("other-1234abcd", None, env) == tmp_path / "dots" / "memory" / "other-1234abcd"
    )
    mapping.write_text("no equals sign here\n")
    with pytest.raises(HomeError, match="memory-homes.conf:1"):
        memory_home(key, root, env)


def test_resolve_repo_from_cwd_dir_or_key(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "proj")
    env = {"GLOBAL_LEARNINGS_PATH": str(tmp_path / "kb"), "REFLECT_HOME": str(tmp_path / "home")}
    assert resolve_repo(None, root, env).key == repo_key(root)
    assert resolve_repo(str(root), tmp_path, env).root == root.resolve()
    by_key = resolve_repo("some-key", tmp_path, env)
    assert (
        by_key.root is None
        and by_key.log_dir == tmp_path / "kb" / "repos" / "some-key" / "reflections"
    )
    with pytest.raises(HomeError, match="not inside a git repository"):
        resolve_repo(None, tmp_path, env)
    with pytest.raises(HomeError, match="neither a directory nor a repo key"):
        resolve_repo("Not A Key!", tmp_path, env)
