"""Anchors (kb/anchors.py): the code a learning names, found in a real git repository."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from reflect_jobs.kb.anchors import (
    MAX_ANCHORS,
    candidates,
    find_anchors,
    find_anchors_many,
    safe_relpath,
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / "src" / "shop").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "src" / "shop" / "config.py").write_text(
        "def load_config(path):\n    return read_settings(path)\n", encoding="utf-8"
    )
    (root / "src" / "shop" / "retry.py").write_text(
        "class RetryPolicy:\n    MAX_ATTEMPTS = 3\n", encoding="utf-8"
    )
    (root / "docs" / "notes.md").write_text("RetryPolicy is documented here.\n", encoding="utf-8")
    (root / "Makefile").write_text("test:\n\tpytest\n", encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    return root


def test_candidates_from_backticks_paths_modules_and_identifiers():
    c = candidates(
        [
            "Call `load_config` from src/shop/config.py:12 (see `shop.retry.RetryPolicy`)",
            "Set MAX_ATTEMPTS in Makefile, not in `drain`; read https://example.com/a/b.py",
        ]
    )
    assert ("src/shop/config.py", None) in c.paths and ("Makefile", None) in c.paths
    assert not any("example.com" in p for p, _ in c.paths)
    assert {"load_config", "RetryPolicy", "MAX_ATTEMPTS"} <= set(c.symbols)
    assert c.weak == ["drain"] and c.modules == ["shop.retry.RetryPolicy"]
    prose = candidates(["SQLite and JavaScript, not PostgreSQL"])
    assert prose.symbols == [] and prose.weak == ["JavaScript", "PostgreSQL"]


@pytest.mark.parametrize(
    "token",
    [
        "/etc/passwd",
        "../../etc/passwd",
        "a/../../b",
        "~/x.py",
        "~root/.ssh",
        ".git/config",
        "C:/x.py",
        "a\\b.py",
        "a\x00b.py",
        "",
    ],
)
def test_paths_that_must_never_be_touched_are_refused(token):
    assert safe_relpath(token) is None


def test_named_paths_and_symbols_that_exist_are_anchored(repo):
    learning = {
        "title": "Load settings with `load_config`",
        "rule": "Always call load_config() from src/shop/config.py; retry with `RetryPolicy`.",
        "fix": "Edit the Makefile test target",
        "evidence": "the crash came from src/shop/missing.py",
    }
    got = find_anchors(learning, str(repo))
    assert got == [
        {"path": "src/shop/config.py", "symbol": "load_config"},
        {"path": "Makefile"},
        {"path": "src/shop/retry.py", "symbol": "RetryPolicy"},  # code before docs/notes.md
    ]


def test_a_product_name_is_not_grepped_but_a_class_in_a_named_file_is_found(repo):
    (repo / "src" / "shop" / "db.py").write_text("# SQLite helpers\nclass ShopStore: ...\n")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    free = {"title": "SQLite locks under ShopStore", "rule": "Use PostgreSQL in production"}
    assert find_anchors(free, str(repo)) == []  # CamelCase prose: no repository-wide search
    named = {"title": "ShopStore in src/shop/db.py", "rule": "x"}
    assert find_anchors(named, str(repo)) == [{"path": "src/shop/db.py", "symbol": "ShopStore"}]


def test_a_name_found_only_in_prose_or_data_anchors_nothing(repo):
    (repo / "docs" / "data.jsonl").write_text('{"note": "use_frozen_lockfile"}\n')
    (repo / "docs" / "more.md").write_text("use_frozen_lockfile explained\n")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    assert find_anchors({"title": "Set use_frozen_lockfile"}, str(repo)) == []


def test_many_learnings_share_one_grep(repo):
    many = [
        {"title": f"learning {i}", "rule": "call load_config or `RetryPolicy`"} for i in range(12)
    ]
    got = find_anchors_many(many, str(repo))
    first = [
        {"path": "src/shop/retry.py", "symbol": "RetryPolicy"},  # backticked: named first
        {"path": "src/shop/config.py", "symbol": "load_config"},
    ]
    assert got == [first] * 12


def test_a_bare_file_name_and_a_dotted_module_resolve(repo):
    got = find_anchors(
        {"title": "retry.py caps attempts", "rule": "see shop.config.load_config"}, str(repo)
    )
    assert {"path": "src/shop/retry.py"} in got
    got = find_anchors({"title": "x", "rule": "use `src.shop.config.load_config`"}, str(repo))
    assert {"path": "src/shop/config.py", "symbol": "load_config"} in got


def test_anchors_outside_the_repository_are_never_followed_or_stored(repo, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("def load_config(): pass\n", encoding="utf-8")
    os.symlink(outside, repo / "linked")  # a symlink that leaves the repository
    os.symlink(outside / "secret.py", repo / "src" / "escape.py")
    os.mkfifo(repo / "src" / "pipe.py")  # never opened (a read would block forever)
    learning = {
        "title": "Read ../../etc/passwd and /etc/passwd",
        "rule": f"see {outside}/secret.py, linked/secret.py, src/escape.py and src/pipe.py",
        "fix": "`../../etc/passwd` `/etc/shadow` `~/.ssh/id_rsa`",
    }
    started = time.monotonic()
    got = find_anchors(learning, str(repo))
    assert time.monotonic() - started < 5  # hang guard: the FIFO was not opened
    assert got == []


def test_a_vanished_or_unknown_repository_gives_no_anchors(tmp_path):
    assert find_anchors({"title": "src/shop/config.py"}, str(tmp_path / "gone")) == []
    assert find_anchors({"title": "src/shop/config.py"}, None) == []


def test_at_most_ten_anchors(repo):
    for i in range(15):
        (repo / f"mod{i}.py").write_text(f"x{i} = 1\n", encoding="utf-8")
    text = " ".join(f"mod{i}.py" for i in range(15))
    assert len(find_anchors({"title": "t", "rule": text}, str(repo))) == MAX_ANCHORS


def test_a_spent_deadline_stops_before_any_git_process(repo):
    learning = {"title": "RetryPolicy and load_config", "rule": "retry.py"}
    assert find_anchors(learning, str(repo), deadline=time.monotonic() - 1) == []


def test_outside_git_only_stat_is_used(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "app.py").write_text("def handler(): pass\n", encoding="utf-8")
    got = find_anchors({"title": "app.py `handler`", "rule": "SomeClassName"}, str(plain))
    assert got == [{"path": "app.py", "symbol": "handler"}]
