"""The dashboard's routes on a real ledger (a tmp SQLite file) through Starlette's TestClient.

The app is ours and real; the only stand-in is the ``schedule`` callable the app is built
with (dependency injection, as in test_ledger_admin): it records what would be handed to
Huey. The browser test (test_dashboard_browser.py) runs the real dispatcher.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import ROOT

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient  # noqa: E402

from reflect_jobs.dashboard.app import create_app  # noqa: E402
from reflect_jobs.ledger import control  # noqa: E402
from reflect_jobs.ledger.captures import record_capture  # noqa: E402
from reflect_jobs.ledger.db import session_scope  # noqa: E402
from reflect_jobs.ledger.jobs import transition  # noqa: E402
from reflect_jobs.ledger.models import CostRow, Job, utcnow  # noqa: E402
from reflect_jobs.status import collect_status  # noqa: E402

TOKEN = "test-token-123"
HOSTILE_TITLE = "<script>alert('title')</script>"
HOSTILE_BODY = "<img src=x onerror=alert('body')> & more"


class Recorder:
    """A ``schedule(stage, job_id)`` that records its calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, stage, job_id):
        self.calls.append((stage, job_id))


def _job(db, session_id, state):
    with session_scope(db) as s:
        res = record_capture(
            s,
            harness="claude",
            session_id=session_id,
            transcript_path=f"/t/{session_id}.jsonl",
            event="Stop",
            size=10,
            mtime=1.0,
            settle_sec=0,
            now=utcnow(),
        )
        job = s.get(Job, res.job_id)
        job.stage = "write"
        if state != "queued":
            transition(s, job, to_state="running")
            transition(s, job, to_state=state, outcome=f"test_{state}", detail=f"made {state}")
        return res.job_id


def _state(db, job_id):
    with session_scope(db, readonly=True) as s:
        return s.get(Job, job_id).state


@pytest.fixture
def dash(env):
    settings = env.settings()
    db = settings.db_url
    docs = settings.kb_path / "documents"
    docs.mkdir(parents=True)
    (docs / "hostile.md").write_text(
        "---\nid: hostile\n"
        f'title: "{HOSTILE_TITLE}"\ncategory: Testing\nkey_insight: "insight <b>bold</b>"\n'
        f"---\n{HOSTILE_BODY}\n",
        encoding="utf-8",
    )
    poisoned = _job(db, "p1", "poisoned")
    _job(db, "d1", "done")
    with session_scope(db) as s:
        s.add(CostRow(day=utcnow().strftime("%Y-%m-%d"), outcome="ok", entries=3, cost_usd=0.5))
    sched = Recorder()
    app = create_app(settings, token=TOKEN, schedule=sched)
    client = TestClient(app, base_url="http://127.0.0.1:8377", client=("127.0.0.1", 50000))
    return client, settings, poisoned, sched


def test_page_shows_counts_chart_stuck_job_and_escaped_notes(dash):
    client, settings, poisoned, _ = dash
    r = client.get("/")
    assert r.status_code == 200
    assert "content-security-policy" in r.headers and r.headers["x-frame-options"] == "DENY"
    page = r.text
    assert f'<meta name="reflect-token" content="{TOKEN}">' in page
    assert '<li data-state="poisoned"><span class="n">1</span> poisoned</li>' in page
    assert '<li data-state="done"><span class="n">1</span> done</li>' in page
    today = utcnow().strftime("%Y-%m-%d")
    assert f'data-day="{today}" data-calls="3"' in page
    assert 'class="cap" data-cap="20"' in page
    assert f'data-retry="{poisoned}"' in page and "made poisoned" in page
    assert HOSTILE_TITLE not in page and "<img src=x" not in page and "<b>bold" not in page
    assert "&lt;script&gt;alert(&#x27;title&#x27;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(&#x27;body&#x27;)&gt; &amp; more" in page
    assert "No open items." in page
    assert "1 job(s) poisoned in the last 24 h" in page, "status's warnings are shown"
    assert client.get("/fragment").text.startswith('<section id="counts">')
    assert client.get("/static/page.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/static/nope.js").status_code == 404


def test_api_status_is_the_status_json_document(dash, env):
    client, settings, _, _ = dash
    body = client.get("/api/status").json()
    assert set(body) == set(collect_status(settings))
    assert body["counts"] == collect_status(settings)["counts"]
    cli = json.loads(env.invoke("status", "--json").stdout)
    assert body["counts"] == cli["counts"] and body["budget"] == cli["budget"]


def test_retry_needs_the_token_then_requeues_and_schedules(dash):
    client, settings, poisoned, sched = dash
    for headers in ({}, {"X-Reflect-Token": "wrong"}, {"X-Reflect-Token": ""}):
        r = client.post(f"/api/retry/{poisoned}", headers=headers)
        assert r.status_code == 403, headers
    assert _state(settings.db_url, poisoned) == "poisoned" and sched.calls == []
    r = client.post(f"/api/retry/{poisoned}", headers={"X-Reflect-Token": TOKEN})
    assert r.status_code == 200 and r.json()["retried"][0]["id"] == poisoned
    assert _state(settings.db_url, poisoned) == "queued"
    assert len(sched.calls) == 1 and sched.calls[0][1] == poisoned
    again = client.post(f"/api/retry/{poisoned}", headers={"X-Reflect-Token": TOKEN})
    assert again.status_code == 409 and "only poisoned" in again.json()["error"]
    assert client.post("/api/retry/nope", headers={"X-Reflect-Token": TOKEN}).status_code == 404
    assert client.get(f"/api/retry/{poisoned}").status_code == 405


def test_resume_needs_the_token_then_clears_the_halt(dash):
    client, settings, _, sched = dash
    halted = _job(settings.db_url, "h1", "halted")
    with session_scope(settings.db_url) as s:
        control.set_flag(s, control.HALT_KEY, "test halt")
    assert 'id="resume"' in client.get("/").text
    assert client.post("/api/resume").status_code == 403
    with session_scope(settings.db_url, readonly=True) as s:
        assert control.halt_reason(s) == "test halt"
    r = client.post("/api/resume", headers={"X-Reflect-Token": TOKEN})
    assert r.status_code == 200 and r.json()["was_halted"] == "test halt"
    assert _state(settings.db_url, halted) == "queued" and sched.calls[-1][1] == halted
    with session_scope(settings.db_url, readonly=True) as s:
        assert not control.halt_reason(s)


def test_only_loopback_peers_and_loopback_host_names_are_served(dash):
    client, settings, poisoned, _ = dash
    app = client.app
    outsider = TestClient(app, base_url="http://127.0.0.1:8377", client=("10.1.2.3", 50000))
    assert outsider.get("/api/status").status_code == 403
    r = outsider.post(f"/api/retry/{poisoned}", headers={"X-Reflect-Token": TOKEN})
    assert r.status_code == 403 and _state(settings.db_url, poisoned) == "poisoned"
    for host in ("evil.example", "evil.example:8377", "127.0.0.1.evil.example", "[::1]:8377"):
        assert client.get("/", headers={"Host": host}).status_code == 403, host
    for host in ("localhost:8377", "127.0.0.1", "LOCALHOST"):
        assert client.get("/api/status", headers={"Host": host}).status_code == 200, host


def test_search_is_lexical_by_default_and_rejects_unknown_modes(dash):
    client, _, _, _ = dash
    body = client.get("/api/search", params={"q": "anything"}).json()
    assert body["hits"] == [] and body["error"] is None
    assert client.get("/api/search", params={"q": "x", "mode": "global"}).status_code == 400
    assert client.get("/api/open-items").json() == {"available": True, "repositories": []}


def test_the_cli_and_status_never_import_the_web_stack():
    code = (
        "import sys, reflect_jobs.cli, reflect_jobs.status, reflect_jobs.hook, "
        "reflect_jobs.dashboard.data, reflect_jobs.dashboard.render; "
        "print(sorted(m for m in ('starlette', 'uvicorn', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


def test_recent_notes_are_newest_first_and_an_edited_note_is_read_again(tmp_path):
    import os

    from reflect_jobs.dashboard.data import recent_notes

    docs = tmp_path / "kb" / "documents"
    docs.mkdir(parents=True)

    def write(name, title, body, mtime):
        path = docs / f"{name}.md"
        path.write_text(
            f"---\nid: {name}\ntitle: {title}\ncategory: C\nkey_insight: k\n---\n{body}\n"
        )
        os.utime(path, (mtime, mtime))

    write("old", "Old", "old body", 1_000_000)
    write("new", "New", "new body", 2_000_000)
    (docs / "broken.md").write_text("no frontmatter")
    assert [n["id"] for n in recent_notes(tmp_path / "kb")] == ["new", "old"]
    assert [n["id"] for n in recent_notes(tmp_path / "kb", limit=1)] == ["new"]
    write("old", "Old edited", "edited body", 3_000_000)
    first = recent_notes(tmp_path / "kb")[0]
    assert (first["id"], first["title"], first["text"]) == ("old", "Old edited", "edited body")


def test_ui_on_a_busy_port_is_a_one_line_error(env):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        proc = env.cli("ui", "--port", str(port), check=False, timeout=60)  # a hang guard
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert env.invoke("ui", "--port", "70000", check=False).returncode == 2
