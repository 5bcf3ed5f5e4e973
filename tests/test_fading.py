"""Usage and fading (issue 23 item 2): confirmations, dormancy, forget_after, the ranking.

Real commands, a real SQLite ledger, real notes and indexes, the SessionStart hook in its
own interpreter, real drains through the stub ``claude``. What is checked is what people
and agents see: the told block, ``search`` (text and ``--json``), ``context --all``, the
note's frontmatter, the ledger row and its confirmations.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from recall_support import add_note, learning, make_repo, reindex, session_start_in_process
from sqlalchemy import select
from test_evidence_e2e import CORRECTION, _answer, _drain, _learning, _rows, _transcript

from alembic import command
from reflect_jobs import kb
from reflect_jobs.ledger import confirmations
from reflect_jobs.ledger import db as ledger_db
from reflect_jobs.ledger import learnings as ledger_learnings
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Learning, LearningConfirmation
from reflect_jobs.lifecycle import FORGOTTEN_DIR
from reflect_jobs.pipeline.expiry import forget_expired
from reflect_jobs.recall import block, fading
from reflect_jobs.recall.mcp_scope import ServerScope
from reflect_jobs.recall.tools import get_tool, search_tool

KEY = "github.com/acme/shop"
OLD = "2025-01-02T03:04:05Z"  # far more than 180 days before any run of these tests


@pytest.fixture
def shop(tmp_path):  # type: ignore[no-untyped-def]
    return make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")


def _told(env, repo: Path) -> str:  # type: ignore[no-untyped-def]
    try:
        text, heavy = session_start_in_process(env, repo)
    except json.JSONDecodeError:
        return ""
    assert heavy == [], "the hook path stays stdlib-only"
    return text


def _old_note(env, title: str, *, status: str = "active", session: str = "s0") -> kb.NoteFile:  # type: ignore[no-untyped-def]
    """A repository learning written long ago, with its ledger row."""
    item = learning(title, f"{title}: the rule.", repo=KEY)
    nf = kb.write_learning(
        env.kb, item, created=OLD, updated=OLD, source_path="/t.jsonl", session_id=session,
        status=status,
    )  # fmt: skip
    with session_scope(env.settings().db_url) as s:
        ledger_learnings.upsert_learning(
            s, learning_id=nf.id, title=title, category="Tools", learning_type="gotcha",
            confidence_num=0.7, note_path=str(nf.path), content_hash=nf.content_hash,
            source="/t.jsonl", session_id=session, signal_hash=None, job_id=None,
            scope="repo", repo_key=KEY, status=status,
        )  # fmt: skip
    return nf


def _confirmations(env, lid: str) -> list[tuple[str, str | None]]:  # type: ignore[no-untyped-def]
    with session_scope(env.settings().db_url, readonly=True) as s:
        rows = s.scalars(
            select(LearningConfirmation).where(LearningConfirmation.learning_id == lid)
        )
        return [(r.by, r.session_id) for r in rows]


def _queued(env) -> int:  # type: ignore[no-untyped-def]
    import sqlite3

    conn = sqlite3.connect(env.home / "queue.db")
    try:
        return int(conn.execute("SELECT count(*) FROM task").fetchone()[0])
    finally:
        conn.close()


# --- the migration ---------------------------------------------------------------------------


def test_migration_0011_keeps_rows_and_goes_both_ways_on_sqlite(tmp_path):
    engine = ledger_db._make_engine(f"sqlite:///{tmp_path}/m.db")
    ledger_db.upgrade(engine, "0010")
    with engine.begin() as c:
        c.exec_driver_sql(
            "INSERT INTO learnings (id, title, category, learning_type, confidence_num, status,"
            " proof_count, created_at, updated_at, scope, is_latest)"
            " VALUES ('lrn-a-000001', 'A', 'X', 'gotcha', 0.7, 'active', 2,"
            " '2025-01-01', '2025-01-01', 'global', 1)"
        )
    ledger_db.upgrade(engine, "0011")
    assert ledger_db.current_revision(engine) == "0011"
    with engine.connect() as c:
        row = c.exec_driver_sql(
            "SELECT proof_count, confirmations, last_confirmed_at, forget_after FROM learnings"
        ).one()
        assert tuple(row) == (2, 0, None, None)
        assert "learning_confirmations" in sa.inspect(c).get_table_names()
    command.downgrade(ledger_db.alembic_config(engine), "0010")
    with engine.connect() as c:
        cols = {x["name"] for x in sa.inspect(c).get_columns("learnings")}
        assert "confirmations" not in cols and "forget_after" not in cols
        assert "learning_confirmations" not in sa.inspect(c).get_table_names()
        assert c.exec_driver_sql("SELECT id FROM learnings").scalar() == "lrn-a-000001"
    engine.dispose()


# --- record_confirmation ----------------------------------------------------------------------


def test_a_confirmation_counts_once_per_session_and_never_from_the_creating_session(env):
    nf = _old_note(env, "Counted confirmations", session="s0")
    db = env.settings().db_url
    with session_scope(db) as s:
        by_update = confirmations.BY_UPDATE
        assert confirmations.record_confirmation(s, nf.id, by=by_update, session_id="s0") is None
        assert confirmations.record_confirmation(s, nf.id, by=by_update, session_id=None) is None
        assert confirmations.record_confirmation(s, nf.id, by=by_update, session_id="s1")
        assert confirmations.record_confirmation(s, nf.id, by=by_update, session_id="s1") is None
        assert confirmations.record_confirmation(s, nf.id, by="get", session_id=None)
        assert confirmations.record_confirmation(s, nf.id, by="get", session_id=None) is None
        assert (
            confirmations.record_confirmation(s, "lrn-nope-000000", by="get", session_id=None)
            is None
        )
        with pytest.raises(ValueError):
            confirmations.record_confirmation(s, nf.id, by="guess", session_id=None)
    with session_scope(db, readonly=True) as s:
        row = s.get(Learning, nf.id)
        assert row.confirmations == 2 and row.last_confirmed_at is not None
        assert [c["by"] for c in confirmations.history(s, nf.id)] == ["get", "update"]
    env.invoke("forget", nf.id)
    with session_scope(db) as s:  # forgotten: nothing confirms it until restored
        assert confirmations.record_confirmation(s, nf.id, by="person", session_id=None) is None


# --- dormancy ---------------------------------------------------------------------------------


def test_a_dormant_learning_is_not_told_is_found_marked_and_an_mcp_get_revives_it(
    env, shop, monkeypatch
):
    for name in ("REFLECT_HOME", "GLOBAL_LEARNINGS_PATH", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, env[name])  # the MCP server's process: this one
    scope = ServerScope.here(str(shop))
    fresh = add_note(
        env.kb, learning("Fresh rule about caching", "Cache the tokens.", repo=KEY),
        updated=f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}",
    )  # fmt: skip
    old = _old_note(env, "Sleepy rule about lockfiles")
    reindex(env.kb)

    told = _told(env, shop)
    assert f"[{fresh.id}]" in told and old.id not in told, "dormant: not told at session start"
    assert "nothing more qualifies" in told, "a dormant one is not counted as left out"

    hits = json.loads(
        env.invoke("search", "sleepy lockfiles", "--mode", "lexical", "--json").stdout
    )
    (hit,) = [h for h in hits["results"] if h["id"] == old.id]
    assert hit["dormant"] is True, "search still finds it, marked"
    assert all("dormant" not in h for h in hits["results"] if h["id"] != old.id)
    text = env.invoke("search", "sleepy lockfiles", "--mode", "lexical").stdout
    assert "(dormant: not confirmed for 180+ days; a confirmation revives it)" in text

    answer = search_tool(env.kb, "sleepy lockfiles", mode="lexical", scope=scope)
    (mcp_hit,) = [json.loads(x) for x in answer.splitlines() if old.id in x]
    assert mcp_hit["dormant"] is True, "MCP search marks it too"
    every = env.invoke("context", "--all", "--cwd", str(shop)).stdout
    line = next(x for x in every.splitlines() if old.id in x)
    assert "(dormant: not confirmed for 180+ days" in line, "context --all shows it, marked"
    checked = json.loads(env.invoke("verify", "--cwd", str(shop), "--json").stdout)
    assert {r["id"]: r["dormant"] for r in checked} == {fresh.id: False, old.id: True}

    env["REFLECT_FORGET_UNUSED_DAYS"] = "0"  # fading off: told again
    assert old.id in _told(env, shop)
    del env["REFLECT_FORGET_UNUSED_DAYS"]

    # An agent fetches it through MCP `get`: the worker records a confirmation.
    assert old.id in get_tool(env.kb, old.id, scope=scope)
    assert _queued(env) == 1
    _drain(env)
    assert _confirmations(env, old.id) == [("get", None)]
    fm = kb.parse_note(old.path).frontmatter
    assert fm["confirmations"] == 1 and fm["last_confirmed"].startswith(f"{datetime.now(UTC):%Y}")
    assert fm["updated"] == OLD, "a use is not a change"
    told = _told(env, shop)
    assert f"[{old.id}]" in told, "revived by the confirmation"
    hits = json.loads(
        env.invoke("search", "sleepy lockfiles", "--mode", "lexical", "--json").stdout
    )
    assert all("dormant" not in h for h in hits["results"])

    get_tool(env.kb, old.id, scope=scope)  # again the same day: one use
    _drain(env)
    assert len(_confirmations(env, old.id)) == 1


def test_a_person_accepting_a_proposed_learning_confirms_it(env, shop):
    nf = _old_note(env, "Proposed long ago", status="proposed")
    reindex(env.kb)
    assert nf.id not in _told(env, shop)
    out = env.invoke("review", "accept", nf.id)
    assert "active" in out.stdout
    assert _confirmations(env, nf.id) == [("person", None)]
    assert kb.parse_note(nf.path).frontmatter["confirmations"] == 1
    reindex(env.kb)
    assert f"[{nf.id}]" in _told(env, shop), "accepted: confirmed now, so not dormant"


def test_another_sessions_evidenced_update_confirms_and_wakes_it(env, tmp_path):
    (tmp_path / "package.json").write_text('{"packageManager": "pnpm@9"}')
    item = _learning(
        "Run pnpm install from the repository root",
        "Use pnpm, never npm, in the web workspace.",
        "always run pnpm install from the repository root",
    )
    lid = kb.learning_id(item["title"], item["rule"])
    t1 = _transcript(tmp_path / "a.jsonl", [CORRECTION], session="a")
    _answer(env, tmp_path, [{"action": "CREATE", "learning": item}], "a.json")
    env.invoke("enqueue", str(t1), "--session-id", "a")
    _drain(env)
    note = kb.parse_note(env.kb / "documents" / f"{lid}.md")
    # Age it: written long ago and never confirmed since, so dormant.
    text = note.path.read_text()
    text = re.sub(r"(?m)^created: .*$", f"created: '{OLD}'", text)
    note.path.write_text(text)
    env.invoke("reindex")
    assert item["title"] not in env.invoke("context", "--cwd", str(tmp_path)).stdout

    again = "No, run pnpm install from the repository root again, never npm install."
    update = {
        "action": "UPDATE",
        "target_id": lid,
        "reason": "said again",
        "evidence": "run pnpm install from the repository root again",
    }
    t1b = _transcript(tmp_path / "a.jsonl", [CORRECTION, again], session="a")
    _answer(env, tmp_path, [update], "a2.json")
    env.invoke("enqueue", str(t1b), "--session-id", "a")
    _drain(env)
    assert _confirmations(env, lid) == [], "a session does not confirm its own learning"

    t2 = _transcript(tmp_path / "b.jsonl", [again], session="b")
    _answer(env, tmp_path, [update], "b.json")
    env.invoke("enqueue", str(t2), "--session-id", "b")
    _drain(env)
    assert _confirmations(env, lid) == [("update", "b")]
    row = _rows(env)[item["title"]]
    assert row.confirmations == 1 and row.last_confirmed_at is not None
    fm = kb.parse_note(env.kb / "documents" / f"{lid}.md").frontmatter
    assert fm["confirmations"] == 1 and fm["created"] == OLD
    told = env.invoke("context", "--cwd", str(tmp_path)).stdout
    assert item["title"] in told, "the confirmation woke it"


# --- forget_after ----------------------------------------------------------------------------


def _add(env, tmp_path: Path, shop: Path, extra: str, title: str = "Temporary freeze"):  # type: ignore[no-untyped-def]
    path = tmp_path / f"{title.replace(' ', '-')}.md"
    path.write_text(f"---\ntitle: {title}\nrule: No deploys this week.\n{extra}---\nbody\n")
    return env.invoke("add", str(path), "--cwd", str(shop), check=False)


def test_forget_after_is_stored_and_the_sweep_forgets_then_restore_keeps_it(env, tmp_path, shop):
    out = _add(env, tmp_path, shop, "forget_after: 30d\n")
    assert out.returncode == 0, out.stderr
    lid = out.stdout.strip().splitlines()[0]
    note = env.kb / "documents" / f"{lid}.md"
    stamp = kb.parse_note(note).frontmatter["forget_after"]
    expires = fading.parse_forget_after(stamp)
    assert expires is not None
    assert timedelta(days=29) < expires - datetime.now(UTC) <= timedelta(days=30)
    db = env.settings().db_url
    assert _row_status(db, lid)[1] is not None
    assert forget_expired(env.kb, db) == [], "not yet"
    assert lid in _told(env, shop)

    later = datetime.now(UTC) + timedelta(days=31)
    assert forget_expired(env.kb, db, now=later) == [lid]
    assert not note.exists()
    away = env.kb / "documents" / FORGOTTEN_DIR
    assert (away / note.name).is_file() and (away / f"{lid}.entities.yaml").is_file()
    assert _row_status(db, lid)[0] == "archived"
    assert lid not in _told(env, shop)
    hits = json.loads(
        env.invoke("search", "deploys this week", "--mode", "lexical", "--json").stdout
    )
    assert all(h["id"] != lid for h in hits["results"])

    assert "restored" in env.invoke("restore", lid).stdout
    assert _row_status(db, lid) == ("active", None)
    assert "forget_after" not in kb.parse_note(note).frontmatter
    assert forget_expired(env.kb, db, now=later) == [], "a person brought it back: it stays"
    assert lid in _told(env, shop)


def _row_status(db: str, lid: str) -> tuple[str, datetime | None]:
    with session_scope(db, readonly=True) as s:
        row = s.get(Learning, lid)
        return row.status, row.forget_after


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("soon", "forget_after 'soon': a date (2027-01-31), an ISO date-time or a TTL"),
        ("2020-01-01", "forget_after 2020-01-01T00:00:00Z is already past"),
        ("99999d", "between 1 day and 36500 days"),
    ],
)
def test_a_bad_forget_after_is_one_line_and_nothing_is_written(env, tmp_path, shop, value, message):
    out = _add(env, tmp_path, shop, f"forget_after: {value}\n")
    assert out.returncode == 1 and message in out.stderr
    assert out.stderr.strip().count("\n") == 0
    assert (
        not list((env.kb / "documents").glob("*.md")) if (env.kb / "documents").exists() else True
    )


def test_forget_after_accepts_a_date_and_an_iso_time():
    now = datetime(2026, 12, 4, tzinfo=UTC)
    assert fading.parse_forget_after("2027-01-31") == datetime(2027, 1, 31, tzinfo=UTC)
    assert fading.parse_forget_after(datetime(2027, 1, 31).date()) == datetime(
        2027, 1, 31, tzinfo=UTC
    )
    assert fading.parse_forget_after("2027-01-31T10:00:00+02:00") == datetime(
        2027, 1, 31, 8, tzinfo=UTC
    )
    assert fading.parse_forget_after("2w", now) == now + timedelta(days=14)
    assert fading.parse_forget_after("", now) is None and fading.parse_forget_after(None) is None


# --- the ranking -----------------------------------------------------------------------------


def test_the_ranking_weighs_proof_confirmations_recency_and_the_verdict():
    now = 1_800_000_000.0
    day = 86400.0
    base = {"proof_count": 1, "confidence": 0.7, "confirmations": 0, "awake_ts": now - 10 * day}
    used = {**base, "confirmations": 3}
    proven = {**base, "proof_count": 3}
    recent = {**base, "awake_ts": now - day, "updated_ts": now - 400 * day}
    partial = {**proven, "verdict": "partial"}
    assert block.rank_score(used, now) > block.rank_score(base, now)
    assert block.rank_score(proven, now) > block.rank_score(used, now), "proof still leads"
    assert block.rank_score(recent, now) > block.rank_score(base, now), "recency of confirmation"
    assert block.rank_score(partial, now) < block.rank_score({**proven, "verdict": "ok"}, now)
    assert block.rank_score(partial, now) < block.rank_score(base, now) + 1.5
    # An old store's row (no fading columns) ranks by its update as before.
    legacy = {"proof_count": 1, "confidence": 0.7, "updated_ts": now - 10 * day}
    assert block.rank_score(legacy, now) == pytest.approx(block.rank_score(base, now))


def test_the_block_puts_a_partly_verified_learning_below_an_intact_one(env, shop):
    (shop / "src").mkdir()
    (shop / "src" / "a.py").write_text("def kept_symbol():\n    pass\n")
    (shop / "src" / "b.py").write_text("def other():\n    pass\n")
    now = f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}"
    strong = learning(
        "Strong but partly gone", "Call gone_symbol in b.py.", repo=KEY, confidence_num=0.9,
        anchors=[{"path": "src/b.py", "symbol": "gone_symbol"}], evidence="x",
    )  # fmt: skip
    weak = learning(
        "Weaker but intact", "Call kept_symbol in a.py.", repo=KEY, confidence_num=0.6,
        anchors=[{"path": "src/a.py", "symbol": "kept_symbol"}], evidence="x",
    )  # fmt: skip
    a = add_note(env.kb, strong, updated=now)
    b = add_note(env.kb, weak, updated=now)
    reindex(env.kb)
    told = _told(env, shop)
    lines = [x for x in told.splitlines() if x.startswith("- [")]
    assert [x[3 : x.index("]")] for x in lines] == [b.id, a.id], told
    assert "(unverified: gone_symbol in src/b.py gone)" in lines[1] or "unverified" in lines[1]


def test_a_persons_restore_wakes_a_dormant_learning(env, shop):
    nf = _old_note(env, "Dormant until restored")
    reindex(env.kb)
    assert nf.id not in _told(env, shop)
    out = env.invoke("restore", nf.id)
    assert "woken (was dormant)" in out.stdout
    assert _confirmations(env, nf.id) == [("person", None)]
    assert f"[{nf.id}]" in _told(env, shop), "told again, with no reindex in between"
    assert "already active" in env.invoke("restore", nf.id).stdout


def test_hostile_confirmation_messages_are_skipped(env):
    from reflect_jobs.pipeline.confirm import apply_confirmations

    nf = _old_note(env, "Only well formed confirmations")
    db = env.settings().db_url
    junk = [None, "x", [nf.id], [nf.id, "guess", None], [1, "get", None], ["a" * 500, "get", None]]
    assert apply_confirmations(env.kb, db, junk) == []
    assert apply_confirmations(env.kb, db, "not a list") == []
    assert apply_confirmations(env.kb, db, [[nf.id, "get", 7]]) == [nf.id], "a bad session: none"
    assert _confirmations(env, nf.id) == [("get", None)]


def test_a_queue_that_cannot_be_reached_never_fails_an_mcp_get(env, shop, monkeypatch):
    for name in ("REFLECT_HOME", "GLOBAL_LEARNINGS_PATH", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.setenv("REFLECT_QUEUE_URL", "unix:///nowhere")
    nf = _old_note(env, "Fetched while the queue is down")
    assert nf.id in get_tool(env.kb, nf.id, scope=ServerScope.here(str(shop)))
    assert "confirmation not queued" in (env.home / "hook-errors.log").read_text()


def test_a_note_from_before_confirmations_counts_its_last_proof_as_one():
    from reflect_jobs.recall.refresh import awake_of

    created, updated = "2025-01-01T00:00:00Z", "2026-11-01T00:00:00Z"
    ts = datetime.fromisoformat(updated.replace("Z", "+00:00")).timestamp()
    base = {"created": created, "updated": updated}
    assert awake_of({**base, "proof_count": 1}) < ts, "seen once: its creation"
    assert awake_of({**base, "proof_count": 2}) == ts, "proof from a second source, before 0011"
    assert awake_of({**base, "proof_count": 2, "confirmations": 0}) < ts, "recorded: the record"
    last = {**base, "confirmations": 1, "last_confirmed": "2026-12-01T00:00:00Z"}
    assert awake_of(last) > ts
