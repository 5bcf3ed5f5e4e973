"""Pending global learnings are counted where people look (issue 24 item 1, follow-up).

A new global learning waits as ``scope: repo`` + ``proposed_scope: global`` until a second
session or a person confirms it (``pipeline/global_cap.py``). ``review`` listed it; ``status``
and the dashboard's review queue did not. One session goes through ``enqueue`` and ``drain``
with the stub ``claude`` answering a global learning and a weak one (which waits for review);
what ``status`` prints and what the dashboard shows are read back.
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
from reflect_jobs.kb.parse import parse_note  # noqa: E402

TOKEN = "pending-token"
CORRECTION = "No, pin the Python version in every CI workflow; the runner image moves."
GLOBAL = {
    "title": "Pin the Python version in every CI workflow",
    "rule": "Pin python-version in CI workflows.",
    "category": "Tools",
    "confidence_num": 0.9,
    "evidence": CORRECTION,
}
WEAK = {**GLOBAL, "title": "Maybe cache the pip downloads in CI", "confidence_num": 0.2}


@pytest.fixture
def drained(env, tmp_path: Path):  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    answer = {
        "actions": [
            {"action": "CREATE", "scope": "global", "learning": GLOBAL},
            {"action": "CREATE", "learning": WEAK},
        ],
        "items": {},
        "summary": "",
    }
    env.update(STUB_CLAUDE_MODE="echo_actions", STUB_CLAUDE_ACTIONS=json.dumps(answer))
    path = tmp_path / "s-pending.jsonl"
    write_claude_transcript(path, [CORRECTION], session="s-pending")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text("\n".join(json.dumps({**r, "cwd": str(repo)}) for r in lines) + "\n")
    env.invoke("enqueue", str(path))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")
    return repo


def test_status_counts_the_pending_global_and_says_what_it_waits_for(env, drained) -> None:
    listed = json.loads(env.invoke("review", "--json").stdout)
    assert sorted((r["title"], r["proposed_scope"]) for r in listed) == [
        (WEAK["title"], None),
        (GLOBAL["title"], "global"),
    ]
    data = json.loads(env.invoke("status", "--json").stdout)
    assert data["review"] == {"pending": 2, "pending_global": 1}  # as many as review lists
    text = env.invoke("status").stdout
    assert (
        "review: 2 learning(s) waiting for review (1 global, awaiting a second session)" in text
    ), text


def test_status_counts_them_without_a_context_store(env, drained) -> None:
    """No context store yet: the ledger's ``proposed_scope`` (migration 0012) is what counts."""
    from reflect_jobs.recall import store

    Path(store.store_path(env.kb)).unlink()
    data = json.loads(env.invoke("status", "--json").stdout)
    assert data["review"] == {"pending": 2, "pending_global": 1}


def test_the_dashboard_review_queue_shows_it_and_accept_makes_it_global(env, drained) -> None:
    app = create_app(env.settings(), token=TOKEN, schedule=lambda stage, job: None)
    client = TestClient(app, base_url="http://127.0.0.1:8377", client=("127.0.0.1", 50000))
    queue = client.get("/api/memory").json()["review"]
    shown = {r["title"]: r for r in queue}
    assert set(shown) == {GLOBAL["title"], WEAK["title"]}
    pending = shown[GLOBAL["title"]]
    assert (pending["proposed_scope"], pending["status"]) == ("global", "active")
    assert pending["repository"] == "github.com/acme/shop"
    page = client.get("/fragment/memory").text
    review = page.split('<section id="review">', 1)[1].split("</section>", 1)[0]
    assert 'Review queue <span class="n">2</span>' in review
    assert "global, awaiting a second session (told only in github.com/acme/shop" in review

    r = client.post(f"/api/review/{pending['id']}/accept", headers={"X-Reflect-Token": TOKEN})
    assert r.status_code == 200, r.text
    assert [x["title"] for x in client.get("/api/memory").json()["review"]] == [WEAK["title"]]
    # At once: the promotion clears the ledger's proposed_scope in the same transaction.
    data = json.loads(env.invoke("status", "--json").stdout)
    assert data["review"] == {"pending": 1, "pending_global": 0}
    assert "proposed_scope" not in parse_note(Path(pending["note_path"])).frontmatter
