"""The dashboard as the memory browser (issue 28 item 6), on what the real pipeline stored.

One session goes through ``enqueue`` and ``drain`` with the stub ``claude`` answering two
learnings (a trusted one, and a low-confidence one with a hostile title that waits for
review) and an open item. The memory view must show what went in — the rule verbatim, the
evidence, scope and confidence, per repository — with every hostile value escaped; Accept
and Done need the run's token, Done needs a note, and each changes the ledger or the store
exactly as the CLI would.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from recall_support import make_repo
from support import write_claude_transcript

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from reflect_jobs.dashboard.app import create_app  # noqa: E402
from reflect_jobs.ledger.db import session_scope  # noqa: E402
from reflect_jobs.ledger.models import Learning  # noqa: E402

TOKEN = "memory-token"
SESSION = "s-dash-memory"
CORRECTION = "No, run the migrations with alembic upgrade head before the tests, never create_all."
HOSTILE = "<img src=x onerror=alert('review')>"
TRUSTED = {
    "title": "Run alembic upgrade head before the test suite",
    "category": "Testing",
    "key_insight": "create_all skips the migrations' data fixes",
    "rule": "Run alembic upgrade head before the tests; never create_all.",
    "confidence_num": 0.9,
    "tags": ["alembic"],
    "entities": ["alembic"],
    "evidence": CORRECTION,
}
WEAK = {
    **TRUSTED,
    "title": f"Maybe the fixtures are stale {HOSTILE}",
    "rule": "Perhaps rebuild the fixtures when the migrations change.",
    "confidence_num": 0.2,
}
# A new item carries its evidence, a quote of the session (docs/REFLECTIONS.md).
ITEM = {
    "kind": "action",
    "title": "Port the seed script to alembic",
    "body": "Two tables left.",
    "evidence": CORRECTION,
}


def drain_memory_session(env, tmp_path: Path) -> tuple[Path, dict[str, str]]:  # type: ignore[no-untyped-def]
    """One session through ``enqueue`` and ``drain``: two learnings and an open item.

    Returns:
        The repository and ``title -> learning id``.
    """
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    answer = {
        "actions": [
            {"action": "CREATE", "learning": TRUSTED},
            {"action": "CREATE", "learning": WEAK},
        ],
        "items": {"update": [], "new": [ITEM]},
        "summary": "Moved the suite onto migrations.",
    }
    env.update(STUB_CLAUDE_MODE="echo_actions", STUB_CLAUDE_ACTIONS=json.dumps(answer))
    path = tmp_path / f"{SESSION}.jsonl"
    write_claude_transcript(path, [CORRECTION], session=SESSION)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text("\n".join(json.dumps({**r, "cwd": str(repo)}) for r in lines) + "\n")
    env.invoke("enqueue", str(path))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")
    with session_scope(env.settings().db_url, readonly=True) as s:
        rows = {r.title: (r.id, r.status) for r in s.query(Learning)}
    assert rows[TRUSTED["title"]][1] == "active" and rows[WEAK["title"]][1] == "proposed", rows
    return repo, {t: i for t, (i, _) in rows.items()}


@pytest.fixture
def stored(env, tmp_path: Path):
    repo, ids = drain_memory_session(env, tmp_path)
    settings = env.settings()
    app = create_app(settings, token=TOKEN, schedule=lambda stage, job: None)
    client = TestClient(app, base_url="http://127.0.0.1:8377", client=("127.0.0.1", 50000))
    return client, settings, repo, ids


def test_memory_view_shows_what_was_learned_per_repository(stored) -> None:
    client, settings, repo, ids = stored
    body = client.get("/api/memory").json()
    (group,) = body["learnings"]["repositories"]
    assert group["repository"] == "github.com/acme/shop" and group["total"] == 1
    (told,) = group["learnings"]
    assert told["id"] == ids[TRUSTED["title"]]
    assert (told["title"], told["rule"], told["scope"]) == (
        TRUSTED["title"],
        TRUSTED["rule"],
        "repo",
    )
    assert told["confidence"] == pytest.approx(0.9) and told["evidence"] == CORRECTION
    (waiting,) = body["review"]
    assert waiting["id"] == ids[WEAK["title"]] and waiting["rule"] == WEAK["rule"]
    assert any("confidence" in why for why in waiting["why"])
    (items,) = body["items"]["repositories"]
    assert [(i["title"], i["body"]) for i in items["items"]] == [(ITEM["title"], ITEM["body"])]

    assert '<main id="memory" aria-busy="false" hidden></main>' in client.get("/").text
    page = client.get("/fragment/memory").text
    assert f'<p class="rule">{TRUSTED["rule"]}</p>' in page
    assert HOSTILE not in page and "&lt;img src=x onerror=alert(&#x27;review&#x27;)&gt;" in page
    assert f'data-review="accept" data-id="{ids[WEAK["title"]]}"' in page
    assert client.get("/fragment/memory").text.startswith('<section id="review">')


def test_accept_needs_the_token_and_makes_the_learning_active(stored) -> None:
    client, settings, _, ids = stored
    lid = ids[WEAK["title"]]
    assert client.post(f"/api/review/{lid}/accept").status_code == 403
    assert (
        client.post(f"/api/review/{lid}/keep", headers={"X-Reflect-Token": TOKEN}).status_code
        == 404
    )
    r = client.post(f"/api/review/{lid}/accept", headers={"X-Reflect-Token": TOKEN})
    assert r.status_code == 200 and r.json()["status"] == "active", r.text
    with session_scope(settings.db_url, readonly=True) as s:
        assert s.get(Learning, lid).status == "active"
    assert client.get("/api/memory").json()["review"] == []
    again = client.post(f"/api/review/{lid}/reject", headers={"X-Reflect-Token": TOKEN})
    assert again.status_code == 409 and "not waiting for review" in again.json()["error"]


def test_done_needs_the_token_and_a_note_and_closes_the_item(stored, env) -> None:
    client, _, repo, _ = stored
    (group,) = client.get("/api/memory").json()["items"]["repositories"]
    item_id = group["items"][0]["id"]
    change = {"repository": group["repository"], "id": item_id, "op": "done", "note": ""}
    assert client.post("/api/items/change", json=change).status_code == 403
    headers = {"X-Reflect-Token": TOKEN}
    r = client.post("/api/items/change", json=change, headers=headers)
    assert r.status_code == 400 and "note is required" in r.json()["error"]
    r = client.post(
        "/api/items/change", json={**change, "op": "burn", "note": "x"}, headers=headers
    )
    assert r.status_code == 400
    r = client.post(
        "/api/items/change", json={**change, "note": "ported in 4f2a9c1"}, headers=headers
    )
    assert r.status_code == 200 and r.json()["status"] == "done", r.text
    listed = env.run("reflections", "show", item_id, "--repo", str(repo), "--json")
    shown = json.loads(listed.stdout)
    assert shown["status"] == "done" and shown["notes"][-1]["text"] == "ported in 4f2a9c1"
    assert client.get("/api/memory").json()["items"]["repositories"] == []


def test_jobs_list_filters_by_state_and_stage(stored) -> None:
    client, *_ = stored
    every = client.get("/api/jobs").json()
    assert every["jobs"] and "done" in every["states"]
    done = client.get("/api/jobs?state=done").json()["jobs"]
    assert done and all(j["state"] == "done" for j in done)
    assert client.get("/api/jobs?state=nonsense").status_code == 400
    assert client.get("/api/jobs?stage=no-such-stage").json()["jobs"] == []
    page = client.get("/fragment?state=done").text
    assert '<option value="done" selected>done</option>' in page


def test_forget_and_restore_from_the_page_take_it_out_of_circulation_and_back(stored, env) -> None:
    client, settings, repo, ids = stored
    lid = ids[TRUSTED["title"]]
    headers = {"X-Reflect-Token": TOKEN}
    assert client.post(f"/api/learnings/{lid}/forget").status_code == 403
    page = client.get("/fragment/memory").text
    assert f'data-forget="{lid}"' in page
    r = client.post(f"/api/learnings/{lid}/forget", headers=headers)
    assert r.status_code == 200 and r.json()["status"] == "forgotten", r.text
    body = client.get("/api/memory").json()
    assert body["learnings"]["repositories"] == []
    (gone,) = body["withheld"]["repositories"][0]["learnings"]
    assert (gone["id"], gone["status"], gone["rule"]) == (lid, "archived", TRUSTED["rule"])
    assert TRUSTED["title"] not in env.invoke("context", "--cwd", str(repo)).stdout
    assert f'data-restore="{lid}"' in client.get("/fragment/memory").text
    r = client.post(f"/api/learnings/{lid}/restore", headers=headers)
    assert r.status_code == 200 and "restored" in r.json()["status"], r.text
    (group,) = client.get("/api/memory").json()["learnings"]["repositories"]
    assert [x["id"] for x in group["learnings"]] == [lid]
    assert TRUSTED["rule"] in env.invoke("context", "--cwd", str(repo)).stdout
    assert client.post("/api/learnings/lrn-nope-000000/forget", headers=headers).status_code == 409


def test_memory_view_shows_what_each_session_was_told_and_the_verdicts(stored, env) -> None:
    import subprocess

    from support import BIN

    client, settings, repo, ids = stored
    lid = ids[TRUSTED["title"]]
    payload = {
        "session_id": "sess-<b>told</b>",
        "hook_event_name": "SessionStart",
        "cwd": str(repo),
    }
    proc = subprocess.run(
        [str(BIN / "reflect-jobs-hook"), "claude"],
        input=json.dumps(payload).encode(),
        env=dict(env),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    told = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    body = client.get("/api/memory").json()
    (rec,) = body["recall_log"]
    assert rec["session"] == "sess-<b>told</b>" and rec["learnings"] == [lid]
    assert rec["chars"] == len(told) and rec["at"].startswith(rec["at"][:4])
    (learning,) = body["learnings"]["repositories"][0]["learnings"]
    assert learning["verdict"] == "unanchored"  # its rule names no file of the repository
    page = client.get("/fragment/memory").text
    assert "sess-&lt;b&gt;told&lt;/b&gt;" in page and "<b>told</b>" not in page
    assert f"<td>{lid}</td>" in page
