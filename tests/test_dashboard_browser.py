"""``reflect-jobs ui`` in a real browser: Debian's headless Chromium driven by Playwright.

A real drained pipeline (the stub ``claude``: one job written, one poisoned by a timeout
answer) behind the real server process, loaded in Chromium; the test reads the counts, the
chart and a note off the rendered page, presses Retry on the poisoned job and waits for the
ledger to show it queued again. Screenshots land in the test's tmp dir for a person to look
at (the path is printed). Skipped only when /usr/bin/chromium is missing (.ci/run installs it).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
from pathlib import Path

import pytest
from support import BIN, wait_for, write_claude_transcript

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="needs Debian's chromium (/usr/bin/chromium): apt-get install chromium",
    ),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="needs the dev extra (playwright)")


def launch_chromium(playwright):  # type: ignore[no-untyped-def]
    """The system Chromium, headless (root, as in CI, needs --no-sandbox)."""
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    return playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=args)


def start_ui(env) -> tuple[subprocess.Popen[str], str]:  # type: ignore[no-untyped-def]
    """Start ``reflect-jobs ui --port 0`` and return the process and the URL it printed."""
    proc = subprocess.Popen(
        [str(BIN / "reflect-jobs"), "ui", "--port", "0"],
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    line = proc.stdout.readline() if ready else ""
    if "http://127.0.0.1:" not in line:
        proc.kill()
        raise AssertionError(f"ui did not start: {line!r} {proc.stderr.read()}")
    return proc, line.split()[2]


def _jobs(env):
    """The ledger's jobs by id, read in-process (a CLI call per poll costs seconds here)."""
    from reflect_jobs.ledger import admin

    return {j["id"]: j for j in admin.list_jobs(env.settings().db_url)}


def _status(env):
    from reflect_jobs.status import collect_status

    return collect_status(env.settings())


def test_dashboard_in_chromium_shows_the_pipeline_and_retries_a_poisoned_job(env, tmp_path):
    # One drain, two jobs: the stub answers the first call ok and every later one with a
    # timeout (poison_timeout_exit_124), whichever job calls first.
    env.update(
        STUB_CLAUDE_MODE="sequence",
        STUB_CLAUDE_SEQUENCE="ok,exit124",
        STUB_CLAUDE_STATE=str(tmp_path / "stub-state"),
    )
    for name, text in (
        ("one", "No, use pnpm here, never npm: it breaks the lockfile."),
        ("two", "Stop: the rule is to never log the session token."),
    ):
        t = write_claude_transcript(tmp_path / f"{name}.jsonl", [text], session=name)
        env.invoke("enqueue", str(t), "--session-id", name)
    env.invoke("drain", "--until-idle", "--max-seconds", "90")
    env["STUB_CLAUDE_MODE"] = "ok"
    by_state = {j["state"]: j for j in _jobs(env).values()}
    assert set(by_state) == {"done", "poisoned"}, by_state
    poisoned = by_state["poisoned"]["id"]
    from reflect_jobs.ledger import admin

    status = _status(env)
    calls_today = admin.cost_report(env.settings().db_url, by="day", since=None)["rows"][
        status["budget"]["day"]
    ]["entries"]
    (note_file,) = (env.kb / "documents").glob("*.md")  # the note the pipeline wrote
    from reflect_jobs.kb.parse import parse_note

    note = parse_note(note_file)

    hostile_title = "<img src=x onerror=alert('title')>"
    (env.kb / "documents" / "hostile.md").write_text(
        f'---\nid: hostile\ntitle: "{hostile_title}"\ncategory: X\nkey_insight: k\n---\n'
        "<script>alert('body')</script>\n",
        encoding="utf-8",
    )

    proc, url = start_ui(env)
    try:
        with sync_api.sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            console_errors: list[str] = []
            page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(url)
            for state, n in status["counts"].items():
                shown_n = page.locator(f"#counts li[data-state='{state}'] .n").inner_text()
                assert shown_n == str(n), state
            assert page.locator("#counts li[data-state='done'] .n").inner_text() == "1"
            assert page.locator("#counts li[data-state='poisoned'] .n").inner_text() == "1"
            assert "poisoned in the last 24 h" in page.locator("#warnings").inner_text()
            bars = page.locator("svg.spend-chart rect.bar")
            assert bars.count() == 30
            today = page.locator(f"svg.spend-chart rect[data-day='{status['budget']['day']}']")
            assert today.get_attribute("data-calls") == str(calls_today) and calls_today >= 2
            box = today.bounding_box()
            assert box is not None and box["height"] > 0, "today's bar is drawn"
            assert page.locator("svg.spend-chart line.cap").get_attribute("data-cap") == "20"
            shown = page.locator(f"article.note[data-note='{note.id}']")
            assert shown.locator("h3").inner_text() == note.frontmatter["title"]
            assert "Use pnpm" in shown.locator(".note-text").inner_text()
            hostile = page.locator("article.note[data-note='hostile']")
            assert hostile.locator("h3").inner_text() == hostile_title, "shown as text"
            assert "<script>" in hostile.locator(".note-text").inner_text()
            page.fill("#q", "pnpm")
            page.click("#search button")
            hit = page.locator("#search-results li.hit").first
            hit.wait_for()
            assert note.frontmatter["title"] in hit.inner_text()
            page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)

            row = page.locator(f"#stuck tr[data-job='{poisoned}']")
            assert "poison_timeout_exit_124" in row.inner_text()
            row.locator("button.retry").click()
            wait_for(
                lambda: _jobs(env)[poisoned]["state"] == "queued", what="the retried job requeued"
            )
            page.locator(f"#stuck tr[data-job='{poisoned}']").wait_for(state="detached")
            assert "queued at" in page.locator("#flash").inner_text()
            assert page.locator("#counts li[data-state='queued'] .n").inner_text() == "1"
            page.screenshot(path=str(tmp_path / "dashboard-after-retry.png"), full_page=True)
            assert console_errors == [], console_errors
            assert dialogs == [], "a note's text ran as script"
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    after = _status(env)
    assert after["counts"]["poisoned"] == 0 and after["queue"]["pending"] >= 1, (
        "the retry handed the job to the queue"
    )
    print(f"screenshots: {tmp_path / 'dashboard.png'} {tmp_path / 'dashboard-after-retry.png'}")


def test_memory_view_in_chromium_accepts_a_learning_and_closes_an_item(env, tmp_path):
    """The memory browser as a person uses it: read a rule, accept, close with a note."""
    from test_dashboard_memory import ITEM, TRUSTED, WEAK, drain_memory_session

    from reflect_jobs.ledger.db import session_scope
    from reflect_jobs.ledger.models import Learning

    repo, ids = drain_memory_session(env, tmp_path)
    weak = ids[WEAK["title"]]
    proc, url = start_ui(env)
    shots = []
    try:
        with sync_api.sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            console_errors: list[str] = []
            page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(url)
            assert page.locator("#memory").is_hidden()
            page.click("#views button[data-view='memory']")
            page.locator("#memory[aria-busy='false'] #learnings").wait_for()
            assert page.locator("#live").is_hidden()
            told = page.locator(f"#learnings article[data-learning='{ids[TRUSTED['title']]}']")
            assert told.locator(".rule").inner_text() == TRUSTED["rule"]
            assert "confidence 0.90" in told.locator(".meta").inner_text()
            waiting = page.locator(f"#review article[data-learning='{weak}']")
            assert waiting.locator("h4").inner_text() == WEAK["title"], "hostile title as text"
            for section in ("review", "items", "learnings", "recall-log"):
                path = tmp_path / f"memory-{section}.png"
                page.locator(f"#{section}").screenshot(path=str(path))
                shots.append(path)
            waiting.locator("button[data-review='accept']").click()
            page.locator(f"#review article[data-learning='{weak}']").wait_for(state="detached")
            page.locator("#memory[aria-busy='false']").wait_for()
            assert "active" in page.locator("#flash").inner_text()
            with session_scope(env.settings().db_url, readonly=True) as s:
                assert s.get(Learning, weak).status == "active"
            form = page.locator("#items form.item-change").first
            form.locator("button[value='done']").click()  # no note: the browser refuses it
            assert page.locator("#items article.item").count() == 1
            form.locator("input[name='note']").fill("ported in 4f2a9c1")
            form.locator("button[value='done']").click()
            page.locator("#items article.item").wait_for(state="detached")
            page.locator("#memory[aria-busy='false']").wait_for()
            assert "done" in page.locator("#flash").inner_text()
            trusted = ids[TRUSTED["title"]]
            page.locator(f"#learnings button[data-forget='{trusted}']").click()
            page.locator(f"#withheld button[data-restore='{trusted}']").wait_for()
            page.locator("#memory[aria-busy='false']").wait_for()
            path = tmp_path / "memory-withheld.png"
            page.locator("#withheld").screenshot(path=str(path))
            shots.append(path)
            page.locator(f"#withheld button[data-restore='{trusted}']").click()
            page.locator(f"#learnings button[data-forget='{trusted}']").wait_for()
            page.locator("#memory[aria-busy='false']").wait_for()
            assert "restored" in page.locator("#flash").inner_text()
            path = tmp_path / "memory-after.png"
            page.screenshot(path=str(path), full_page=True)
            shots.append(path)
            page.click("#views button[data-view='live']")
            page.select_option("#job-filter select[name='state']", "done")
            page.locator("#jobs tr[data-state='done']").first.wait_for()
            assert (
                page.locator("#jobs tbody tr").count()
                == page.locator("#jobs tr[data-state='done']").count()
            )
            path = tmp_path / "queue-jobs.png"
            # the queue view is re-rendered every few seconds (a node may be replaced while
            # it is shot): the whole page, the jobs list at its end
            page.screenshot(path=str(path), full_page=True)
            shots.append(path)
            assert console_errors == [], console_errors
            assert dialogs == [], "a learning's text ran as script"
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    listed = env.run("reflections", "list", "--status", "all", "--repo", str(repo), "--json")
    (item,) = [i for i in json.loads(listed.stdout) if i["title"] == ITEM["title"]]
    assert item["status"] == "done"
    print("screenshots:", *shots)
