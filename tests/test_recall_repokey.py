"""The repository key (``reflect_jobs/repo.py``): stable across clones and spellings, never
holding credentials; what recall, learnings and items all name a repository by."""

from __future__ import annotations

import os

import pytest
from recall_support import make_repo

from reflect_jobs.repo import normalise_remote, origin_url, repo_for


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:Acme/widgets.git",
        "https://github.com/Acme/widgets.git",
        "https://alice:ghp_s3cret@github.com/Acme/widgets",
        "ssh://git@GitHub.com:22/Acme/widgets.git/",
        "git+ssh://git@github.com/Acme/widgets",
        "https://github.com/Acme/widgets.git?access_token=ghp_s3cret#readme",
        "alice:ghp_s3cret@github.com:Acme/widgets.git",
    ],
)
def test_every_spelling_of_one_remote_is_one_key_without_credentials(url):
    key = normalise_remote(url)
    assert key == "github.com/Acme/widgets"
    assert "s3cret" not in key and "alice" not in key


def test_origin_is_read_from_the_config_text_not_another_remote():
    text = (
        '[remote "upstream"]\n\turl = git@github.com:other/x.git\n'
        '[remote "origin"]\n\turl = https://gitlab.com/me/proj.git\n[branch "main"]\n\tremote = origin\n'
    )
    assert origin_url(text) == "https://gitlab.com/me/proj.git"
    assert origin_url("[core]\n\tbare = false\n") is None


def test_repo_for_walks_up_to_the_git_root_and_keys_by_origin(tmp_path):
    root = make_repo(tmp_path / "w", "git@github.com:acme/w.git")
    (root / "src" / "pkg").mkdir(parents=True)
    ref = repo_for(str(root / "src" / "pkg"))
    assert ref is not None and ref.key == "github.com/acme/w"
    assert ref.root == os.path.realpath(root) and ref.in_git
    assert ref.display == ref.key, "people read the key itself"


def test_without_origin_the_root_path_is_the_key_and_outside_git_the_dir_itself(tmp_path):
    root = make_repo(tmp_path / "local")
    (root / "sub").mkdir()
    assert repo_for(str(root / "sub")).key == os.path.realpath(root)
    plain = tmp_path / "plain"
    plain.mkdir()
    outside = repo_for(str(plain))
    assert outside.key == os.path.realpath(plain) and not outside.in_git


def test_a_linked_worktree_shares_its_main_checkouts_origin(tmp_path):
    main = make_repo(tmp_path / "main", "https://github.com/acme/w")
    gitdir = main / ".git" / "worktrees" / "feature"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..\n")
    wt = tmp_path / "feature"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {gitdir}\n")
    assert repo_for(str(wt)).key == "github.com/acme/w"


def test_a_vanished_directory_keeps_its_repository_or_is_unusable(tmp_path):
    root = make_repo(tmp_path / "r", "git@host.example:team/r.git")
    assert repo_for(str(root / "gone" / "deeper")).key == "host.example/team/r"
    assert repo_for(str(tmp_path / "never" / "there")) is None
    assert repo_for("relative/path") is None
    assert repo_for("") is None and repo_for(None) is None
