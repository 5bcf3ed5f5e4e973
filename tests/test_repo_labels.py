"""The one repository identity's edges: a home's label (written once, whole, believed only in
its own home), keys given as text, and a remote's token never reaching a key, a file or a log."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from recall_support import make_repo

from reflect_jobs.reflections.store import open_store
from reflect_jobs.repo import Repo, as_key
from reflect_jobs.repo_home import KEY_FILE, read_key_file, record_key, resolve

TOKEN = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"


def test_a_label_is_written_once_whole_and_never_replaced(tmp_path: Path) -> None:
    home = tmp_path / "repos" / "github.com-acme-shop-c566806a"
    repo = Repo("github.com/acme/shop", None, home)
    assert record_key(repo) is False, "no home yet: nothing is created for a label"
    home.mkdir(parents=True)
    # a writer killed before its link left its temporary file: harmless, not a label
    (home / f".{KEY_FILE}.999999.tmp").write_text("github.com/acme/sh")
    assert read_key_file(home) is None
    assert record_key(repo) is True and record_key(repo) is False
    assert (home / KEY_FILE).read_text() == "github.com/acme/shop\n"
    assert oct((home / KEY_FILE).stat().st_mode & 0o777) == "0o600"
    assert record_key(Repo("github.com/other/x", None, home)) is False
    assert read_key_file(home, home.name) == "github.com/acme/shop"
    assert not [p for p in os.listdir(home) if p.startswith(f".{KEY_FILE}.{os.getpid()}")]


def test_a_label_is_believed_only_in_the_home_it_names(tmp_path: Path) -> None:
    home = tmp_path / "repos" / "github.com-acme-web-00000000"
    home.mkdir(parents=True)
    (home / KEY_FILE).write_text("github.com/acme/shop\n")  # copied from another home
    assert read_key_file(home, home.name) is None
    (home / KEY_FILE).write_text("github.com/acme/\x1b[31mshop\n")
    assert read_key_file(home) is None
    # a bare directory name is never written as a label
    assert record_key(Repo(home.name, None, home, style="name")) is False


def test_keys_given_as_text_are_normalised_or_refused() -> None:
    assert as_key(f"https://x-access-token:{TOKEN}@GitHub.com/acme/shop.git") == (
        "github.com/acme/shop"
    )
    assert as_key("git@github.com:acme/shop.git") == "github.com/acme/shop"
    assert as_key("github.com/acme/shop/") == "github.com/acme/shop"
    assert as_key("no-slash") is None and as_key("a/b\nc") is None and as_key("  ") is None


def test_a_remote_with_a_token_never_reaches_a_key_a_file_name_or_a_log(env, tmp_path) -> None:  # type: ignore[no-untyped-def]
    origin = f"https://x-access-token:{TOKEN}@github.com/acme/shop.git?access_token={TOKEN}"
    repo = make_repo(tmp_path / "shop", origin)
    e = {**dict(env), "REFLECT_HOST": "alpha"}
    store = open_store(None, repo, e)
    try:
        store.add("action", "Rotate the deploy key")
        assert store.repo.key == "github.com/acme/shop"
        assert "acme/shop" in store.context(4000)[0]
    finally:
        store.close()
    assert resolve(origin, tmp_path, e).key == "github.com/acme/shop"
    written = [Path(d) / f for d, _, fs in os.walk(tmp_path) for f in fs]
    written = [p for p in written if ".git" not in p.parts]
    assert written and not [p for p in written if TOKEN in str(p)]
    for path in written:
        data = path.read_bytes()
        if path.suffix == ".db":
            with sqlite3.connect(path) as conn:
                data = "\n".join(conn.iterdump()).encode()
        assert TOKEN.encode() not in data, path
