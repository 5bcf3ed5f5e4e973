"""``reflect-jobs backfill``: past sessions in, newest first, nothing paid for twice."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import time
from pathlib import Path

from support import BIN, write_claude_transcript

from reflect_jobs import harnesses
from reflect_jobs.backfill import default_root, find_transcripts, session_id_of
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Job, Transcript

DAY = 86400


def make_root(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    """~/.claude/projects-like tree: 3 recent sessions, 1 old, plus files that are not sessions."""
    root = tmp_path / "projects"
    now = time.time()
    files = {}
    for name, project, age in [
        ("s-new", "-home-u-app", 60),
        ("s-mid", "-home-u-app", 3 * 3600),
        ("s-old3d", "-home-u-lib", 3 * DAY),
        ("s-ancient", "-home-u-lib", 30 * DAY),
    ]:
        p = root / project / f"{name}.jsonl"
        p.parent.mkdir(parents=True, exist_ok=True)
        write_claude_transcript(p, [f"No, never hardcode the {name} port; read it from config."])
        os.utime(p, (now - age, now - age))
        files[name] = p
    (root / "-home-u-app" / "notes.txt").write_text("not a transcript")
    (root / "-home-u-app" / "empty.jsonl").write_text("")
    nested = root / "-home-u-app" / "s-new" / "subagents" / "agent-1.jsonl"
    nested.parent.mkdir(parents=True)
    nested.write_text('{"type": "user"}\n')
    return root, files


def backfill(env, *args: str, check: bool = True) -> dict:  # type: ignore[no-untyped-def]
    proc = env.invoke("backfill", "--json", *args, check=check)
    return json.loads(proc.stdout) if proc.stdout else {"rc": proc.returncode}


def jobs(env) -> list[dict]:  # type: ignore[no-untyped-def]
    """The ledger's jobs, newest first (read in-process: a CLI start costs ~0.7 s)."""
    with session_scope(env.settings().db_url) as s:
        rows = s.query(Job).order_by(Job.created_at.desc()).all()
        return [
            {k: getattr(j, k) for k in ("session_id", "transcript_path", "harness", "state")}
            for j in rows
        ]


def test_enqueues_recent_transcripts_newest_first_then_skips_them(env, tmp_path):
    root, files = make_root(tmp_path)
    report = backfill(env, "--root", str(root))
    assert (report["found"], report["enqueued"], report["skipped"]) == (3, 3, 0)
    paths = [t["path"] for t in report["transcripts"]]
    assert paths == [str(files[n]) for n in ("s-new", "s-mid", "s-old3d")], "newest first"
    listed = {j["session_id"]: j for j in jobs(env)}
    assert set(listed) == {"s-new", "s-mid", "s-old3d"}
    assert listed["s-new"]["transcript_path"] == str(files["s-new"])
    assert listed["s-new"]["harness"] == "claude" and listed["s-new"]["state"] == "queued"
    with session_scope(env.settings().db_url) as s:
        assert {j.event for j in s.query(Job)} == {"backfill"}

    again = backfill(env, "--root", str(root))
    assert (again["found"], again["enqueued"], again["skipped"]) == (3, 0, 3)
    assert again["skipped_by"] == {"skip_pending": 3}
    assert len(jobs(env)) == 3, "no duplicate jobs"

    text = env.invoke("backfill", "--root", str(root), "--since", "all").stdout
    assert text.strip() == f"4 transcript(s) in {root}: enqueued 1, skipped 3 (pending 3)"


def test_processed_and_unchanged_is_skipped_until_it_grows(env, tmp_path):
    """End to end: backfill, drain through the real pipeline (stub claude), backfill again."""
    root, files = make_root(tmp_path)
    backfill(env, "--root", str(root), "--since", "1h")
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    assert all(j["state"] == "done" for j in jobs(env))
    with session_scope(env.settings().db_url) as s:
        assert s.get(Transcript, str(files["s-new"])) is not None
    report = backfill(env, "--root", str(root), "--since", "1h")
    assert (report["enqueued"], report["skipped_by"]) == (0, {"skip_unchanged": 1})

    with files["s-new"].open("a") as fh:  # the session went on: a changed transcript
        fh.write(json.dumps({"type": "user", "message": {"role": "user", "content": "ok"}}) + "\n")
    report = backfill(env, "--root", str(root), "--since", "1h")
    assert (report["enqueued"], report["skipped"]) == (1, 0)


def test_failed_jobs_are_left_to_retry_not_requeued(env, tmp_path):
    root, files = make_root(tmp_path)
    backfill(env, "--root", str(root), "--since", "1h")
    with session_scope(env.settings().db_url) as s:
        for job in s.query(Job):
            job.state, job.accepting = "poisoned", False
    report = backfill(env, "--root", str(root), "--since", "1h")
    assert report["skipped_by"] == {"skip_failed": 1} and report["enqueued"] == 0


def test_a_transcripts_row_at_the_same_size_and_mtime_means_unchanged(env, tmp_path):
    root, files = make_root(tmp_path)
    st = files["s-mid"].stat()
    with session_scope(env.settings().db_url) as s:
        s.add(Transcript(path=str(files["s-mid"]), size=st.st_size, mtime=st.st_mtime))
        s.add(Transcript(path=str(files["s-new"]), size=1, mtime=st.st_mtime))  # it grew since
    report = backfill(env, "--root", str(root), "--dry-run")
    actions = {Path(t["path"]).stem: t["action"] for t in report["transcripts"]}
    assert actions == {"s-new": "enqueue", "s-mid": "skip_unchanged", "s-old3d": "enqueue"}
    assert report["dry_run"] and report["enqueued"] == 2 and jobs(env) == []
    text = env.invoke("backfill", "--root", str(root), "--dry-run").stdout
    assert "would enqueue 2, skipped 1 (unchanged 1)" in text and jobs(env) == []


def test_limit_takes_the_newest(env, tmp_path):
    root, _ = make_root(tmp_path)
    report = backfill(env, "--root", str(root), "--limit", "1")
    assert (report["enqueued"], report["not_enqueued"]) == (1, 2)
    assert [j["session_id"] for j in jobs(env)] == ["s-new"]


def test_bad_usage_and_missing_root_and_disabled(env, tmp_path):
    root, _ = make_root(tmp_path)
    proc = env.invoke("backfill", "--root", str(root), "--since", "soon", check=False)
    assert proc.returncode == 2 and "--since must be like 7d" in proc.stderr
    proc = env.invoke("backfill", "--root", str(tmp_path / "nope"), check=False)
    assert proc.returncode == 1 and proc.stderr.strip().count("\n") == 0
    env["REFLECT_DISABLED"] = "1"
    proc = env.invoke("backfill", "--root", str(root), check=False)
    assert proc.returncode == 1 and "REFLECT_DISABLED=1" in proc.stderr and jobs(env) == []


def test_layouts_name_sessions_as_the_hooks_do(tmp_path):
    uuid = "0198a2b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b"
    codex = (
        tmp_path / "sessions" / "2026" / "11" / "30" / f"rollout-2026-11-30T09-00-00-{uuid}.jsonl"
    )
    copilot = tmp_path / "session-state" / "abc-123" / "events.jsonl"
    for p in (codex, copilot):
        p.parent.mkdir(parents=True)
        p.write_text("{}\n")
    (found,) = find_transcripts(tmp_path / "sessions", "codex", None)
    assert found.session_id == uuid
    (found,) = find_transcripts(tmp_path / "session-state", "copilot", None)
    assert found.session_id == "abc-123"
    assert session_id_of(harnesses.CLAUDE.transcripts, Path("/p/x/abc.jsonl")) == "abc"
    assert default_root("claude", {"CLAUDE_CONFIG_DIR": "/c"}) == Path("/c/projects")
    assert default_root("codex", {"CODEX_HOME": "/x"}) == Path("/x/sessions")


def test_progress_bar_on_a_tty_and_logs_stay_in_the_file(env, tmp_path):
    root, _ = make_root(tmp_path)
    master, slave = pty.openpty()
    try:
        proc = subprocess.run(
            [str(BIN / "reflect-jobs"), "backfill", "--root", str(root)],
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=slave,
            text=True,
            timeout=60,
        )
        os.close(slave)
        tty = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the other end is closed
                break
            if not chunk:
                break
            tty += chunk
    finally:
        os.close(master)
    assert proc.returncode == 0 and "enqueued 3, skipped 0" in proc.stdout
    assert b"enqueue  [" in tty and b"100%" in tty
    assert b"captured" not in tty, "per-transcript log lines go to drain.log only"
    assert (env.home / "drain.log").read_text().count('"captured"') == 3
