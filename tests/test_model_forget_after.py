"""The model may set a learning's ``forget_after`` (seed 003; issue 23 item 2).

A stub ``claude`` answer goes through the real pipeline (``enqueue``, ``drain``: the writer's
plan, the add stage): a CREATE with a TTL gets it in its note and its ledger row, and the
hourly sweep forgets it once it has passed; unreadable, past and out-of-range values are
dropped with a counted warning and their learnings kept — the job never fails for them.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta

from recall_support import make_repo
from support import write_claude_transcript

from reflect_jobs.kb.parse import parse_note
from reflect_jobs.lifecycle import FORGOTTEN_DIR
from reflect_jobs.pipeline.expiry import forget_expired
from reflect_jobs.writer.actions import plan_actions
from reflect_jobs.writer.forget_after import model_forget_after

CORRECTION = "No, keep the release branch frozen until the audit ends; no merges this month."
TTLS = {
    "Keep the release branch frozen during the audit": "30d",
    "Merge nothing into release while audited": "2001-01-01",  # past
    "Route audit questions to the compliance channel": "when the audit ends",  # unreadable
    "Tag audit commits with the AUDIT prefix": "50y",  # beyond two years
    "Ask compliance before touching release": None,  # none: no TTL, nothing counted
}


def _answer() -> dict:
    actions = []
    for title, ttl in TTLS.items():
        learning = {
            "title": title,
            "rule": f"{title}.",
            "category": "Process",
            "confidence_num": 0.9,
            "evidence": CORRECTION,
        }
        if ttl is not None:
            learning["forget_after"] = ttl
        actions.append({"action": "CREATE", "learning": learning})
    return {"actions": actions, "items": {}, "summary": ""}


def test_a_model_forget_after_is_stored_honoured_and_a_bad_one_dropped(env, tmp_path) -> None:
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    env.update(STUB_CLAUDE_MODE="echo_actions", STUB_CLAUDE_ACTIONS=json.dumps(_answer()))
    path = tmp_path / "s-ttl.jsonl"
    write_claude_transcript(path, [CORRECTION], session="s-ttl")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text("\n".join(json.dumps({**r, "cwd": str(repo)}) for r in lines) + "\n")
    started = datetime.now(UTC)
    env.invoke("enqueue", str(path))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")

    notes = {
        (fm := parse_note(p).frontmatter)["title"]: (p, fm)
        for p in (env.kb / "documents").glob("*.md")
    }
    assert set(notes) == set(TTLS), "every learning is kept, whatever its forget_after"
    frozen_path, frozen = notes["Keep the release branch frozen during the audit"]
    expires = datetime.fromisoformat(frozen["forget_after"].replace("Z", "+00:00"))
    assert started + timedelta(days=30) - timedelta(seconds=5) <= expires
    assert expires <= datetime.now(UTC) + timedelta(days=30)
    assert [t for t, (_, fm) in notes.items() if "forget_after" in fm] == [frozen["title"]]

    db = sqlite3.connect(env.home / "reflect.db")
    rows = dict(db.execute("SELECT title, forget_after FROM learnings").fetchall())
    assert rows[frozen["title"]] is not None and sum(v is not None for v in rows.values()) == 1
    (job_id, state) = db.execute("SELECT id, state FROM jobs").fetchone()
    assert state == "done"
    shown = json.loads(env.invoke("show", job_id, "--json").stdout)
    assert shown["dropped_forget_after"] == 3
    assert any("dropped_forget_after=3" in (e["detail"] or "") for e in shown["events"])
    warned = [n for n in shown["actions"]["notes"] if "forget_after" in n]
    assert len(warned) == 3 and all("the learning is kept" in n for n in warned), warned
    assert frozen["title"] in env.invoke("context", "--cwd", str(repo)).stdout

    # The hourly sweep honours it once it has passed: forgotten everywhere, the rest kept.
    url = env.settings().db_url
    assert forget_expired(env.kb, url, now=expires - timedelta(seconds=1)) == []
    assert forget_expired(env.kb, url, now=expires + timedelta(seconds=1)) == [frozen["id"]]
    assert not frozen_path.exists()
    assert (env.kb / "documents" / FORGOTTEN_DIR / frozen_path.name).exists()
    told = env.invoke("context", "--cwd", str(repo)).stdout
    assert frozen["title"] not in told and "Ask compliance before touching release" in told


def test_the_bounds_of_a_model_forget_after() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    assert model_forget_after("12w", now) == ("2026-08-24T00:00:00Z", None)
    assert model_forget_after("2027-01-31", now) == ("2027-01-31T00:00:00Z", None)
    assert model_forget_after(None, now) == (None, None)
    assert model_forget_after("  ", now) == (None, None)
    for bad in ("2026-06-01T12:00:00Z", "3y", "2020-01-01", "soon", 30, ["30d"], "9" * 500):
        kept, why = model_forget_after(bad, now)
        assert kept is None and why, bad
    # An UPDATE carries no TTL; a CREATE's bad one is counted on the plan, never fatal.
    plan = plan_actions(
        [
            {"action": "CREATE", "learning": {"title": "a", "forget_after": "soon"}},
            {"action": "CREATE", "learning": {"title": "b", "forget_after": "6m"}},
        ],
        allowed_ids=set(),
        now=now,
    )
    assert plan.dropped_forget_after == 1
    assert [c.get("forget_after") for c in plan.creates] == [None, "2026-11-28T00:00:00Z"]


def test_a_model_never_moves_the_forget_after_of_a_learning_that_exists(env, tmp_path) -> None:
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    title = "Keep the release branch frozen during the audit"
    added = tmp_path / "freeze.md"
    added.write_text(f"---\ntitle: {title}\nrule: {title}.\nforget_after: 2031-01-31\n---\nx\n")
    lid = env.invoke("add", str(added), "--cwd", str(repo)).stdout.strip()
    answer = _answer()
    answer["actions"] = [a for a in answer["actions"] if a["learning"]["title"] == title]
    answer["actions"][0]["learning"]["forget_after"] = "2d"  # would forget it the day after
    env.update(STUB_CLAUDE_MODE="echo_actions", STUB_CLAUDE_ACTIONS=json.dumps(answer))
    path = tmp_path / "s-again.jsonl"
    write_claude_transcript(path, [CORRECTION], session="s-again")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text("\n".join(json.dumps({**r, "cwd": str(repo)}) for r in lines) + "\n")
    env.invoke("enqueue", str(path))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")

    (note,) = (env.kb / "documents").glob("*.md")
    fm = parse_note(note).frontmatter
    assert fm["id"] == lid and fm["forget_after"] == "2031-01-31T00:00:00Z"
    db = sqlite3.connect(env.home / "reflect.db")
    (stored,) = db.execute("SELECT forget_after FROM learnings").fetchone()
    assert str(stored).startswith("2031-01-31")
