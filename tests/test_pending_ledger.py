"""The ledger holds whether a learning is a pending global (migration 0012).

A new global learning is written ``scope: repo`` + ``proposed_scope: global`` until a second
session or a person confirms it (``pipeline/global_cap.py``). Only the note held that, so
``status`` read a flag copied into the context store and ``review`` read every
repository-scoped note. ``learnings.proposed_scope`` now mirrors it: set by the add, cleared
by a promotion, restored by ``db rebuild``, backfilled from the notes by the migration. The
sessions go through ``enqueue`` and ``drain`` with the stub ``claude``; the ledger, ``status``
and ``review`` are read back.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from recall_support import make_repo
from support import write_claude_transcript
from test_no_takeover import CORRECTION, GLOBALS, _global_answer, _transcript

from alembic import command
from reflect_jobs import kb
from reflect_jobs.ledger import db as ledger_db
from reflect_jobs.recall import store_schema

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def _ledger(env) -> dict[str, tuple]:  # type: ignore[no-untyped-def]
    conn = sqlite3.connect(env.home / "reflect.db")
    try:
        rows = conn.execute("SELECT title, status, scope, proposed_scope FROM learnings")
        return {t: (st, sc, ps) for t, st, sc, ps in rows}
    finally:
        conn.close()


def _counts(env) -> dict:  # type: ignore[no-untyped-def]
    return json.loads(env.invoke("status", "--json").stdout)["review"]


def _pending_listed(env) -> list[str]:  # type: ignore[no-untyped-def]
    listed = json.loads(env.invoke("review", "--json").stdout)
    return sorted(r["title"] for r in listed if r["proposed_scope"] == "global")


# --- the migration ---------------------------------------------------------------------------


def _migration_both_ways(url: str, note: Path) -> None:
    engine = ledger_db._make_engine(url)
    try:
        ledger_db.upgrade(engine, "0011")
        with engine.begin() as c:
            for lid, scope, path in (
                ("lrn-pending-000001", "repo", str(note)),
                ("lrn-plain-000002", "repo", None),
                ("lrn-global-000003", "global", None),
            ):
                c.execute(
                    sa.text(
                        "INSERT INTO learnings (id, title, category, learning_type,"
                        " confidence_num, status, proof_count, created_at, updated_at, scope,"
                        " is_latest, confirmations, note_path)"
                        " VALUES (:id, 'A', 'X', 'gotcha', 0.7, 'active', 1, '2025-01-01',"
                        " '2025-01-01', :scope, true, 0, :path)"
                    ),
                    {"id": lid, "scope": scope, "path": path},
                )
        ledger_db.upgrade(engine)
        assert ledger_db.current_revision(engine) == "0012"
        with engine.connect() as c:
            rows = dict(c.exec_driver_sql("SELECT id, proposed_scope FROM learnings").all())
        # Backfilled from the note (the one test, kb.is_pending_global); the others NULL.
        assert rows == {
            "lrn-pending-000001": "global",
            "lrn-plain-000002": None,
            "lrn-global-000003": None,
        }
        command.downgrade(ledger_db.alembic_config(engine), "0011")
        with engine.connect() as c:
            cols = {x["name"] for x in sa.inspect(c).get_columns("learnings")}
            assert "proposed_scope" not in cols and "confirmations" in cols
            assert c.exec_driver_sql("SELECT count(*) FROM learnings").scalar() == 3
        assert ledger_db.current_revision(engine) == "0011"
    finally:
        engine.dispose()


def _pending_note(kb_path: Path) -> Path:
    learning = {"title": "Pin the Python version", "rule": "Pin it.", "category": "Tools"}
    learning.update(scope="repo", repo="github.com/acme/shop")
    note = kb.write_learning(
        kb_path,
        learning,
        created="2025-01-01T00:00:00Z",
        updated="2025-01-01T00:00:00Z",
        source_path="/t.jsonl",
        session_id="s-a",
        extra={kb.PROPOSED_SCOPE: "global"},
    )
    return Path(note.path)


def test_migration_0012_backfills_from_the_notes_and_goes_both_ways_on_sqlite(tmp_path) -> None:
    _migration_both_ways(f"sqlite:///{tmp_path}/m.db", _pending_note(tmp_path / "kb"))


@pytest.mark.services
def test_migration_0012_backfills_and_goes_both_ways_on_postgresql(tmp_path) -> None:
    name = "rj_pend_" + uuid.uuid4().hex[:8]
    try:
        admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.exec_driver_sql(f"CREATE DATABASE {name}")
    except sa.exc.OperationalError:
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    try:
        url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
        _migration_both_ways(url, _pending_note(tmp_path / "kb"))
    finally:
        with admin.connect() as c:
            c.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_ledger_at_0011_with_a_pending_note_is_counted_after_the_upgrade(env, tmp_path) -> None:
    """An existing install: the pending global was written before 0012 (only its note says
    so). The first command migrates (get_engine upgrades to head) and the backfill reads the
    note: ``status`` and ``review`` count it at once, no ``db rebuild`` needed."""
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    _global_answer(env, GLOBALS[:1])
    env.invoke("enqueue", str(_transcript(tmp_path / "a.jsonl", repo, "s-a")))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")
    assert _counts(env) == {"pending": 1, "pending_global": 1}
    # Back to 0011, as the ledger was before this version: the column is gone.
    engine = ledger_db._make_engine(env.settings().db_url)
    command.downgrade(ledger_db.alembic_config(engine), "0011")
    engine.dispose()
    ledger_db.dispose_all()
    assert "proposed_scope" not in {
        r[1]
        for r in sqlite3.connect(env.home / "reflect.db").execute("PRAGMA table_info(learnings)")
    }
    assert _counts(env) == {"pending": 1, "pending_global": 1}
    assert _ledger(env)[GLOBALS[0][0]] == ("active", "repo", "global")
    assert _pending_listed(env) == [GLOBALS[0][0]]


# --- add, promote, reject, rebuild ----------------------------------------------------------


def test_add_sets_it_a_second_session_clears_it_and_rebuild_restores_it(env, tmp_path) -> None:
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    other = make_repo(tmp_path / "blog", "git@github.com:acme/blog.git")
    _global_answer(env, GLOBALS[:3])
    env.update(REFLECT_MAX_NEW_GLOBAL_PER_SESSION="2")
    env.invoke("enqueue", str(_transcript(tmp_path / "a.jsonl", repo, "s-a")))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")
    # The first two are pending globals; the third is plainly repository-scoped (the cap).
    assert _ledger(env) == {
        GLOBALS[0][0]: ("active", "repo", "global"),
        GLOBALS[1][0]: ("active", "repo", "global"),
        GLOBALS[2][0]: ("active", "repo", None),
    }
    assert _counts(env) == {"pending": 2, "pending_global": 2}
    assert _pending_listed(env) == sorted(t for t, _ in GLOBALS[:2])

    # ``db rebuild`` restores the column from the notes.
    before = _ledger(env)
    env.invoke("db", "rebuild", "--force")
    ledger_db.dispose_all()
    assert _ledger(env) == before
    assert _counts(env) == {"pending": 2, "pending_global": 2}

    # Another session UPDATEs the first with its person's words: promoted, cleared at once.
    first = kb.learning_id(*GLOBALS[0])
    again = "No, pin the Python version in every CI workflow, as we always do."
    _global_answer(env, [])
    answer = json.loads(env["STUB_CLAUDE_ACTIONS"])
    answer["actions"].append(
        {"action": "UPDATE", "target_id": first, "reason": "seen again", "evidence": again}
    )
    env.update(STUB_CLAUDE_ACTIONS=json.dumps(answer))
    second = tmp_path / "b.jsonl"
    write_claude_transcript(second, [CORRECTION, again], session="s-b")
    lines = [json.loads(x) for x in second.read_text().splitlines()]
    second.write_text("\n".join(json.dumps({**r, "cwd": str(other)}) for r in lines) + "\n")
    env.invoke("enqueue", str(second))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")
    assert _ledger(env)[GLOBALS[0][0]] == ("active", "global", None)
    assert _counts(env) == {"pending": 1, "pending_global": 1}

    # A person accepts the second (``review accept``, the dashboard's path too): cleared.
    second_id = kb.learning_id(*GLOBALS[1])
    env.invoke("review", "accept", second_id)
    assert _ledger(env)[GLOBALS[1][0]] == ("active", "global", None)
    assert _counts(env) == {"pending": 0, "pending_global": 0}
    assert _pending_listed(env) == []
    for path in (env.kb / "documents").glob("*.md"):
        fm = kb.parse_note(path).frontmatter
        assert (fm.get(kb.PROPOSED_SCOPE) == "global") == kb.is_pending_global(fm)
        assert not kb.is_pending_global(fm)


def test_a_rejected_pending_global_keeps_its_note_key_and_is_not_counted(env, tmp_path) -> None:
    """Rejection and ``forget`` leave ``proposed_scope`` in the note (the note edit only sets
    the status), so the ledger keeps it too — a ``restore`` brings back a pending global,
    as the note says — and only active ones are counted."""
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    _global_answer(env, GLOBALS[:2])
    env.invoke("enqueue", str(_transcript(tmp_path / "a.jsonl", repo, "s-a")))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")
    env.invoke("review", "reject", kb.learning_id(*GLOBALS[0]))
    env.invoke("forget", kb.learning_id(*GLOBALS[1]))
    ledger = _ledger(env)
    assert ledger[GLOBALS[0][0]] == ("rejected", "repo", "global")
    assert ledger[GLOBALS[1][0]] == ("archived", "repo", "global")
    assert _counts(env) == {"pending": 0, "pending_global": 0}
    assert _pending_listed(env) == []
    env.invoke("restore", kb.learning_id(*GLOBALS[1]))
    assert _counts(env) == {"pending": 1, "pending_global": 1}
    note = kb.parse_note(next(p for p in (env.kb / "documents").glob("*.md") if "quote" in p.name))
    assert kb.is_pending_global(note.frontmatter)


# --- the context store no longer keeps the flag ------------------------------------------------


def test_a_schema_5_store_loses_the_flag_and_keeps_its_rows(tmp_path) -> None:
    path = tmp_path / "store.db"
    conn = sqlite3.connect(path)
    conn.executescript(store_schema.SCHEMA)
    conn.execute("ALTER TABLE notes ADD COLUMN pending_global INTEGER NOT NULL DEFAULT 0")
    conn.execute("CREATE INDEX notes_pending ON notes (id) WHERE pending_global = 1")
    conn.execute("INSERT INTO meta VALUES ('schema', '5'), ('populated', '1')")
    conn.execute(
        "INSERT INTO notes (id, scope, title, pending_global) VALUES ('a', 'repo', 'A', 1)"
    )
    conn.commit()
    store_schema.upgrade(conn)
    cols = {r[1] for r in conn.execute("PRAGMA table_info(notes)")}
    assert "pending_global" not in cols
    indexes = {r[1] for r in conn.execute("PRAGMA index_list(notes)")}
    assert "notes_pending" not in indexes
    assert conn.execute("SELECT id, scope FROM notes").fetchall() == [("a", "repo")]
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    # nothing to refill (the columns of later schemas were there already)
    assert meta == {"schema": store_schema.SCHEMA_VERSION, "populated": "1"}
    conn.close()
