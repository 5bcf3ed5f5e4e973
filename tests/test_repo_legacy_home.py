"""A memory home written before ``reflect_jobs/repo.py`` (ISSUE 22 item 2) is read under the one
identity: its items, the learnings of its repository, the context block, the CLI, MCP and the
dashboard all say ``github.com/acme/shop``, and nothing is moved or rewritten.

The old layout is built explicitly, as ``reflections add``/``done`` at main (97dbfa1) left it:
``$GLOBAL_LEARNINGS_PATH/repos/<old home key>/reflections/alpha.jsonl`` (directories 0700, the
log 0600, one sorted-key JSON line per event) and ``$REFLECT_HOME/reflections-index.db`` keyed
by the old home key at schema 1. The old home key is computed by a frozen copy of that code's
formula (slug of the normalised remote + 8 hex digits of its sha256), not by the code under test.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from recall_support import add_note, learning, make_repo, reindex

from reflect_jobs.recall import items
from reflect_jobs.recall.item_tools import list_items_tool
from reflect_jobs.recall.mcp_scope import ServerScope
from reflect_jobs.recall.session_start import session_context
from reflect_jobs.reflections.cli import main as reflections
from reflect_jobs.reflections.events import format_ts
from reflect_jobs.reflections.index import ReflectionIndex
from reflect_jobs.reflections.store import open_store
from reflect_jobs.repo_home import resolve

ORIGIN = "https://github.com/acme/shop.git"
KEY = "github.com/acme/shop"


# -- frozen copy of reflections/home.py at main (97dbfa1): how a home was named ----------------
_OLD_SLUG_UNSAFE = re.compile(r"[^a-z0-9._-]+")
_OLD_SCP = re.compile(r"^(?:[^@/\s]+@)?(?P<host>[^:/\s]+):(?P<path>(?!//).+)$")


def _old_normalise_remote(url: str) -> str:
    url = url.strip()
    if "://" in url:
        rest = url.split("://", 1)[1]
        hostpart, _, path = rest.partition("/")
        hostpart = hostpart.rsplit("@", 1)[-1].split(":", 1)[0].lower()
    elif (m := _OLD_SCP.match(url)) and not url.startswith(("/", ".")):
        hostpart, path = m.group("host").lower(), m.group("path")
    else:
        hostpart, path = "", url
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    return f"{hostpart}/{path}" if hostpart else path.rstrip("/")


def _old_slug(text: str, hashed: str) -> str:
    slug = _OLD_SLUG_UNSAFE.sub("-", text.lower()).strip(".-")[:80] or "repo"
    return f"{slug}-{hashlib.sha256(hashed.encode('utf-8')).hexdigest()[:8]}"


def old_home_key(origin: str) -> str:
    """``home.repo_key(root)`` for a repository whose origin is ``origin``."""
    norm = _old_normalise_remote(origin)
    return _old_slug(norm, norm)


# ------------------------------------------------------------------------------------------------

OLD_KEY = old_home_key(ORIGIN)
#: The lines ``reflections add`` ×3 and ``done`` wrote at main (times set relative to now).
OLD_LINES = [
    '{"body":"token=[REDACTED:github_token] left","by":"person","eid":"75f520a91d4381ca",'
    '"host":"alpha","kind":"action","op":"add","title":"Finish the port","ts":"T0",'
    '"uid":"01f29c1091fd2c6f","v":1}',
    '{"by":"person","eid":"bb11481b4fa3e284","host":"alpha","kind":"handoff","op":"add",'
    '"title":"Hand over the deploy","ts":"T1","uid":"591190d740bc6393","v":1}',
    '{"by":"person","eid":"68035b3c23cdde8f","host":"alpha","kind":"action","op":"add",'
    '"title":"Closed one","ts":"T2","uid":"f6e5f202bd59d006","v":1}',
    '{"by":"person","eid":"fbf4312c286aff3a","host":"alpha","note":"shipped","op":"done",'
    '"ts":"T3","uid":"f6e5f202bd59d006","v":1}',
]


def write_old_home(kb: Path, reflect_home: Path) -> Path:
    """Today's layout: the home, its log, and an index of schema 1 keyed by the home's name."""
    home = kb / "repos" / OLD_KEY
    (home / "reflections").mkdir(parents=True)
    for d in (kb, kb / "repos", home, home / "reflections"):
        d.chmod(0o700)
    t0 = datetime.now(UTC) - timedelta(hours=2)
    text = "".join(
        line.replace(f'"T{n}"', json.dumps(format_ts(t0 + timedelta(minutes=n)))) + "\n"
        for n, line in enumerate(OLD_LINES)
    )
    log = home / "reflections" / "alpha.jsonl"
    log.write_text(text, encoding="utf-8")
    log.chmod(0o600)
    db = reflect_home / "reflections-index.db"
    with ReflectionIndex(db) as index:
        index.refresh(OLD_KEY, home / "reflections")  # the tables are unchanged since schema 1
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 1")
    return home


@pytest.fixture
def old(env, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("REFLECT_HOME", env["REFLECT_HOME"])
    monkeypatch.setenv("GLOBAL_LEARNINGS_PATH", env["GLOBAL_LEARNINGS_PATH"])
    monkeypatch.setenv("REFLECT_HOST", "alpha")
    env["REFLECT_HOST"] = "alpha"
    repo = make_repo(tmp_path / "shop", ORIGIN)
    (repo / "src").mkdir()
    env.home.mkdir(parents=True)
    home = write_old_home(env.kb, env.home)
    return repo, home


def open_items_api(env) -> list[dict]:  # type: ignore[no-untyped-def,type-arg]
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    from starlette.testclient import TestClient

    from reflect_jobs.dashboard.app import create_app

    app = create_app(env.settings(), token="t", schedule=lambda stage, job: None)
    client = TestClient(app, base_url="http://127.0.0.1:8377", client=("127.0.0.1", 50000))
    body = client.get("/api/open-items").json()
    assert body["available"] is True
    return body["repositories"]


def cli(*args: str) -> str:
    result = CliRunner().invoke(reflections, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_frozen_formula_is_what_main_named_this_home():
    # recorded from `reflections add` at main in a clone of github.com/acme/shop
    assert OLD_KEY == "github.com-acme-shop-c566806a"


def test_a_home_written_by_todays_code_is_read_under_the_one_identity(env, old, monkeypatch):  # type: ignore[no-untyped-def]
    repo, home = old
    log = home / "reflections" / "alpha.jsonl"
    before = log.read_bytes()
    # a learning of the repository, keyed as today's recall keys it
    add_note(env.kb, learning("Shop is a pnpm workspace", "Run pnpm -w install", repo=KEY))
    reindex(env.kb)

    # The dashboard first, as a person opening it after the upgrade: the home has no label
    # yet; the learning's key names it, and the home is labelled.
    [shown] = open_items_api(env)
    assert shown["repository"] == KEY and shown["open"] == 2
    assert [i["title"] for i in shown["items"]] == ["Hand over the deploy", "Finish the port"]
    assert (home / "repo-key").read_text() == KEY + "\n"
    assert oct((home / "repo-key").stat().st_mode & 0o777) == "0o600"

    # The session-start block: the repository's learnings and its open items, one name.
    block = session_context(str(repo / "src"), max_chars=6000)
    assert f"## This repository ({KEY})" in block and "Shop is a pnpm workspace" in block
    assert (
        "#5911 [handoff] Hand over the deploy" in block
        and "#01f2 [action] Finish the port" in block
    )
    assert OLD_KEY not in block

    # The CLI in the checkout: same items, same ids, the key people see; a new item goes
    # into the same log, and no second home appears.
    monkeypatch.chdir(repo / "src")
    assert [i["id"] for i in json.loads(cli("list", "--json"))] == ["#5911", "#01f2"]
    context = json.loads(cli("context", "--json"))
    assert context["repo"] == KEY and context["open"] == 2 and OLD_KEY not in context["text"]
    new_id = cli("add", "--kind", "action", "--title", "Written after the upgrade").strip()
    assert log.read_bytes().startswith(before), "a log is never rewritten"
    assert len(log.read_text().splitlines()) == len(OLD_LINES) + 1
    assert sorted(p.name for p in (env.kb / "repos").iterdir()) == [OLD_KEY]
    listed = json.loads(cli("list", "--all", "--json"))
    assert {i["repo"] for i in listed} == {KEY} and new_id in {i["id"] for i in listed}
    assert [r["repository"] for r in open_items_api(env)] == [KEY]

    # MCP answers and the status line count the same items.
    assert f"open items of {KEY}: 3" in list_items_tool(
        repo=str(repo), scope=ServerScope.here(str(repo))
    )
    assert items.open_items(str(repo), dict(env))[0::2] == (KEY, 3)


def test_a_home_no_one_can_name_yet_is_still_listed_then_named_by_a_session_start(env, old):  # type: ignore[no-untyped-def]
    repo, home = old
    # no learning names it and the old index is dropped: listed by its directory, still read
    [shown] = open_items_api(env)
    assert shown["repository"] == OLD_KEY and shown["open"] == 2
    assert not (home / "repo-key").exists()

    # the first session start in the checkout labels it
    key, found, total = items.open_items(str(repo / "src"), dict(env))
    assert (key, total) == (KEY, 2) and found[0]["title"] == "Hand over the deploy"
    assert (home / "repo-key").read_text() == KEY + "\n"

    # one repository, one name: the rows the dashboard kept under the directory name go
    [shown] = open_items_api(env)
    assert shown["repository"] == KEY and shown["open"] == 2
    with sqlite3.connect(env.home / "reflections-index.db") as conn:
        assert conn.execute("SELECT count(*) FROM items WHERE repo = ?", (OLD_KEY,)).fetchone() == (
            0,
        )


def test_mapping_files_and_names_of_todays_homes_still_resolve(env, old, tmp_path):  # type: ignore[no-untyped-def]
    repo, home = old
    e = dict(env)
    # the directory name people typed as --repo before: the same home, under the key
    by_name = resolve(OLD_KEY, tmp_path, e)
    assert Path(by_name.home) == home and by_name.key == OLD_KEY  # no label yet
    open_store(str(repo), tmp_path, e).close()  # a store opened from the checkout labels it
    assert resolve(OLD_KEY, tmp_path, e).key == KEY
    assert Path(resolve(KEY, tmp_path, e).home) == home

    mapping = env.home / "memory-homes.conf"
    for line, where in (
        (f"{OLD_KEY} = {tmp_path}/dots/shop", tmp_path / "dots" / "shop"),  # today's key
        (f"{KEY} = {tmp_path}/dots/shop", tmp_path / "dots" / "shop"),  # the remote
        (f"* = {tmp_path}/dots/{{key}}", tmp_path / "dots" / OLD_KEY),  # {key}: the name
    ):
        mapping.write_text(line + "\n")
        assert Path(resolve(None, repo / "src", e).home) == where, line

    # a local-path remote's home had another name before: found under it (an alias)
    mapping.unlink()
    bare = str(tmp_path / "srv" / "proj.git")
    local = make_repo(tmp_path / "local", bare)
    legacy = env.kb / "repos" / old_home_key(bare)
    (legacy / "reflections").mkdir(parents=True)
    assert Path(resolve(str(local), tmp_path, e).home) == legacy
    assert Path(resolve(bare, tmp_path, e).home) == legacy, "by key too"
