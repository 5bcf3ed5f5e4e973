"""One paid call keeps both stores true: a reflector pass through the real CLI and the stub."""

from __future__ import annotations

import json
from pathlib import Path

from recall_support import make_repo
from sqlalchemy import select
from support import write_claude_transcript

from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import JobEvent

SESSION = "s-refl"  # a Claude transcript's session is its file name


def _transcript(path: Path, repo: Path, corrections: list[str]) -> Path:
    write_claude_transcript(path, corrections, session=SESSION)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text("\n".join(json.dumps({**r, "cwd": str(repo)}) for r in lines) + "\n")
    return path


def _items(env, repo: Path) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    out = env.run("reflections", "list", "--status", "all", "--repo", str(repo), "--json")
    return {i["title"]: i for i in json.loads(out.stdout)}


def _add(env, repo: Path, kind: str, title: str) -> str:  # type: ignore[no-untyped-def]
    out = env.run("reflections", "add", "--kind", kind, "--title", title, "--repo", str(repo))
    return out.stdout.strip()


def test_a_reflector_pass_closes_offered_ignores_unoffered_adds_and_keeps_the_summary(
    env, tmp_path
):
    repo = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    login = _add(env, repo, "action", "Fix the flaky login test")
    # A knowledge item (status note) is never offered: naming it must change nothing.
    fact = _add(env, repo, "learning", "Redis runs on port 6379 here")
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    env.update(
        STUB_CLAUDE_MODE="close_offered",
        STUB_CLAUDE_PROMPTS=str(prompts),
        STUB_CLAUDE_CLOSE="flaky login",
        STUB_CLAUDE_UNOFFERED=fact,
        STUB_CLAUDE_NEW=json.dumps(
            [
                {"kind": "action", "title": "Add a retry to the deploy script", "body": "b"},
                {"kind": "action", "title": "fix the  FLAKY login test"},  # held already
                {"kind": "bogus", "title": "rejected kind"},
            ]
        ),
        STUB_CLAUDE_SUMMARY="Fixed the login test; a deploy retry is left to do.",
    )
    t = _transcript(
        tmp_path / f"{SESSION}.jsonl", repo, ["No, never retry the login test by hand."]
    )
    env.invoke("enqueue", str(t))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")

    first = (prompts / "1.txt").read_text()
    assert login in first and fact not in first and "Previous summary:" not in first
    items = _items(env, repo)
    closed = items["Fix the flaky login test"]
    assert closed["status"] == "done" and closed["notes"][-1]["by"] == "reflector"
    # The close carries its evidence: a verbatim quote of what the prompt showed.
    note = closed["notes"][-1]["text"]
    assert note.startswith('closed by the session [evidence: "') and note.endswith('"]')
    assert note.removeprefix('closed by the session [evidence: "')[:-2] in first
    assert items["Redis runs on port 6379 here"]["status"] == "note"
    assert items["Redis runs on port 6379 here"]["notes"] == []
    new = items["Add a retry to the deploy script"]
    assert (new["status"], new["by"], new["session"]) == ("open", "reflector", SESSION)
    assert "rejected kind" not in items
    summaries = [i for i in items.values() if i["kind"] == "summary"]
    assert len(summaries) == 1 and summaries[0]["body"].startswith("Fixed the login test")
    assert summaries[0]["session"] == SESSION and len(items) == 4
    with session_scope(env.settings().db_url) as s:
        detail = " ".join(e.detail or "" for e in s.scalars(select(JobEvent)))
    assert "updated=1 ignored=1" in detail and "added=1 duplicates=1" in detail

    # The next pass of the same session is shown the previous summary and replaces it.
    env.update(STUB_CLAUDE_SUMMARY="Second pass: the deploy retry is done too.", STUB_CLAUDE_NEW="")
    env.update(STUB_CLAUDE_UNOFFERED="", STUB_CLAUDE_CLOSE="deploy script")
    _transcript(
        t, repo, ["No, never retry the login test by hand.", "Always run the deploy dry first."]
    )
    env.invoke("enqueue", str(t))
    env.invoke("drain", "--until-idle", "--max-seconds", "120")
    second = (prompts / "2.txt").read_text()
    assert "Previous summary:" in second and "Fixed the login test" in second
    assert items["Add a retry to the deploy script"]["id"] in second
    items = _items(env, repo)
    summaries = [i for i in items.values() if i["kind"] == "summary"]
    assert len(summaries) == 1 and summaries[0]["body"].startswith("Second pass")
    assert items["Add a retry to the deploy script"]["status"] == "done"
