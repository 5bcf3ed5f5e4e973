"""Faults end cleanly (issue 24, item 5): each scenario failed on the main of its day.

A garbled ``queue.db`` made the worker exit within two seconds (a crash loop under the
service unit); a garbled ``reflect.db`` gave tracebacks and no fix; a transcript (or spool
entry) that is a FIFO hung prepare for ever; ``REFLECT_DRAIN_MAX=0``, documented as "no
per-window cap", deferred every write for ever without a word. (Stops that were counted as
crashes, and model calls with no cost row: ``tests/chaos/test_drain_signals.py``.)
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select
from support import BIN, wait_for, write_claude_transcript

from reflect_jobs import spool
from reflect_jobs.fsio import NotRegularFile, open_regular
from reflect_jobs.ledger import admin
from reflect_jobs.ledger.db import dispose_all, session_scope
from reflect_jobs.ledger.jobs import claim, transition
from reflect_jobs.ledger.models import Job, Learning, utcnow
from reflect_jobs.transcripts import UnreadableTranscript, read_transcript
from reflect_jobs.transcripts.cwd import transcript_cwd
from reflect_jobs.transcripts.usage import context_tokens

GARBAGE = os.urandom(1) + b"\x00not a database at all\x00" * 200


def _jobs(env) -> list[dict]:
    return json.loads(env.invoke("jobs", "--json").stdout)


def _calls(env) -> int:
    """Model calls the stub answered (``doctor``'s ``--version`` probe sends no prompt)."""
    log = Path(env["STUB_CLAUDE_LOG"])
    lines = log.read_text().splitlines() if log.exists() else []
    return sum(1 for line in lines if json.loads(line)["prompt_chars"] > 0)


# --- REFLECT_DRAIN_MAX=0 --------------------------------------------------------------------


def test_drain_max_zero_means_no_per_window_cap_as_the_readme_says(env, tmp_path):
    env["REFLECT_DRAIN_MAX"] = "0"
    t = write_claude_transcript(tmp_path / "m.jsonl", ["No, always quote shell variables."])
    env.invoke("enqueue", str(t))
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    (job,) = _jobs(env)
    assert (job["state"], job["outcome"]) == ("done", "ok"), "not deferred for ever"
    window = json.loads(env.invoke("status", "--json").stdout)["run_window"]
    assert window["limit"] is None and window["resets_at"] is None


# --- status: writes deferred for more than an hour -------------------------------------------


def _deferred_write(db: str, *, since: timedelta, reason: str) -> str:
    """A job at the write stage whose claims and deferrals began ``since`` ago."""
    from reflect_jobs.ledger.captures import record_capture

    start = utcnow() - since
    with session_scope(db) as s:
        job_id = record_capture(
            s,
            harness="claude",
            session_id=f"held-{since.total_seconds()}",
            transcript_path="/t.jsonl",
            event="Stop",
            size=1,
            mtime=1.0,
            settle_sec=0,
        ).job_id
    with session_scope(db) as s:
        job = claim(s, job_id, "prepare", worker="w", lease_sec=60)
        transition(s, job, to_state="queued", to_stage="write", next_run_at=start, now=start)
    for n in range(3):  # claimed and deferred again as its gate stays shut
        at = start + timedelta(seconds=n)
        with session_scope(db) as s:
            job = claim(s, job_id, "write", worker="w", lease_sec=60, now=at)
            transition(s, job, to_state="deferred", detail=reason, next_run_at=at, now=at)
    return job_id


def test_status_warns_when_writes_have_been_deferred_for_more_than_an_hour(env):
    from reflect_jobs.status import collect_status

    settings = env.settings()
    _deferred_write(settings.db_url, since=timedelta(minutes=10), reason="quota gate closed")
    assert not [w for w in collect_status(settings)["warnings"] if "deferred" in w]
    _deferred_write(settings.db_url, since=timedelta(hours=3), reason="run cap 0 per 600s reached")
    (warning,) = [w for w in collect_status(settings)["warnings"] if "deferred" in w]
    assert warning.startswith("1 write(s) deferred for more than an hour")
    assert "run cap 0 per 600s reached" in warning, "the warning names the cause"


# --- FIFOs: a transcript or a spool entry that would block a read ----------------------------


def _returns_quickly(fn, *args):  # type: ignore[no-untyped-def]
    """Run ``fn(*args)`` in a thread; fail (instead of hanging the suite) if it blocks."""
    out: dict = {}

    def run() -> None:
        try:
            out["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the assertion
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():
        for arg in args:  # unblock the open() so the daemon thread can end
            if isinstance(arg, str | Path) and Path(arg).exists():
                fd = os.open(arg, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
        pytest.fail(f"{fn.__name__} blocked on a FIFO")
    return out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_no_reader_blocks_on_a_fifo(tmp_path):
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    assert isinstance(_returns_quickly(open_regular, str(fifo))["error"], NotRegularFile)
    assert isinstance(_returns_quickly(context_tokens, str(fifo))["error"], NotRegularFile)
    assert isinstance(_returns_quickly(read_transcript, str(fifo))["error"], UnreadableTranscript)
    assert _returns_quickly(transcript_cwd, str(fifo))["value"] is None
    assert isinstance(_returns_quickly(open_regular, str(tmp_path))["error"], NotRegularFile)
    regular = tmp_path / "ok.jsonl"
    regular.write_text("{}\n")
    with open_regular(regular) as fh:
        assert fh.read() == b"{}\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_transcript_ends_its_job_unreadable_instead_of_hanging_prepare(env, tmp_path):
    """The hook saw a transcript; by the time prepare reads it, the path is a FIFO."""
    env.pop("REFLECT_CHECKPOINTS")  # the default: the context fill is read (where it hung)
    fifo = write_claude_transcript(tmp_path / "fifo.jsonl", ["No, never echo secrets."])
    payload = {"session_id": "f", "transcript_path": str(fifo), "hook_event_name": "Stop"}
    assert env.run("reflect-jobs-hook", "claude", input=json.dumps(payload)).returncode == 0
    fifo.unlink()
    os.mkfifo(fifo)
    # A hang guard: on the old main this drain never returned.
    env.invoke("drain", "--until-idle", "--max-seconds", "60", timeout=90)
    (job,) = _jobs(env)
    assert (job["state"], job["outcome"]) == ("done", "skip_unreadable")
    assert _calls(env) == 0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_in_the_spool_is_set_aside_not_read(env):
    env.home.mkdir(parents=True)
    entry_id = spool.new_id()
    os.makedirs(spool.spool_dir(str(env.home)), mode=0o700, exist_ok=True)
    os.mkfifo(spool.entry_path(str(env.home), entry_id))
    env.invoke("drain", "--until-idle", "--max-seconds", "30", timeout=90)
    assert (env.home / "spool" / f"{entry_id}.bad").exists()
    errors = json.loads(env.invoke("errors", "--json").stdout)
    assert [e["kind"] for e in errors] == ["spool_bad"]


# --- a garbled queue.db: transport only, moved aside and rebuilt -----------------------------


@pytest.mark.chaos
def test_a_garbled_queue_is_moved_aside_and_rebuilt_at_start_and_nothing_is_lost(env, tmp_path):
    env["REFLECT_DRAIN_DAILY_MAX"] = "1"
    first = write_claude_transcript(tmp_path / "a.jsonl", ["No, never push to main."], session="a")
    env.invoke("enqueue", str(first))
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    assert _calls(env) == 1  # today's one budget unit is spent
    queue = env.home / "queue.db"
    for extra in ("-wal", "-shm"):
        Path(f"{queue}{extra}").unlink(missing_ok=True)
    queue.write_bytes(GARBAGE)
    # A capture made while the queue is garbled: the hook's push fails, the spool keeps it.
    second = write_claude_transcript(tmp_path / "b.jsonl", ["No, always sign tags."], session="b")
    payload = {"session_id": "b", "transcript_path": str(second), "hook_event_name": "Stop"}
    hook = env.run("reflect-jobs-hook", "claude", input=json.dumps(payload))
    assert hook.returncode == 0 and hook.stdout == ""
    doctor = env.cli("doctor", "--json", check=False)
    (queue_check,) = [c for c in json.loads(doctor.stdout) if c["name"] == "queue"]
    assert not queue_check["ok"] and "moves it aside" in queue_check["fix"]

    drain = env.cli("drain", "--until-idle", "--max-seconds", "60")  # was: a traceback
    assert "Traceback" not in drain.stderr
    kept = sorted(env.home.glob("queue.db.garbled-*"))
    assert [p for p in kept if not p.name.endswith(("-wal", "-shm"))], "moved aside, kept"
    jobs = {Path(j["transcript_path"]).name: j for j in _jobs(env)}
    assert set(jobs) == {"a.jsonl", "b.jsonl"}, "the spooled capture was recorded: nothing lost"
    assert jobs["b.jsonl"]["state"] == "deferred", "the caps were reseeded from the ledger"
    assert _calls(env) == 1, "today's spent unit was not spent twice"
    errors = json.loads(env.cli("errors", "--json").stdout)
    assert "queue_rebuilt" in [e["kind"] for e in errors]
    doctor = env.cli("doctor", "--json", check=False)
    (queue_check,) = [c for c in json.loads(doctor.stdout) if c["name"] == "queue"]
    assert queue_check["ok"] and "garbled" in queue_check["detail"]


@pytest.mark.chaos
def test_a_worker_with_a_garbled_queue_stays_up_and_works(env, tmp_path):
    env.home.mkdir(parents=True)
    (env.home / "queue.db").write_bytes(GARBAGE)
    t = write_claude_transcript(tmp_path / "w.jsonl", ["No, always pin the digest."])
    spool.append(
        str(env.home),
        harness="claude",
        session_id="w",
        transcript_path=str(t),
        event="Stop",
        hook_ts=0.0,
    )
    worker = subprocess.Popen(
        [str(BIN / "reflect-jobs"), "worker", "-w", "1"],
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        db = env.settings().db_url
        wait_for(
            lambda: (
                worker.poll() is not None or any(j["outcome"] == "ok" for j in admin.list_jobs(db))
            ),
            timeout=90,
            what="the spooled capture written by the worker",
        )
        assert worker.poll() is None, "the worker did not exit (was: exit within 2 s)"
    finally:
        worker.terminate()
        worker.wait(30)


# --- a garbled reflect.db: one line, `db check`, `db rebuild`, a worker that waits -----------


def _garble(path: Path) -> None:
    dispose_all()
    for extra in ("-wal", "-shm"):
        Path(f"{path}{extra}").unlink(missing_ok=True)
    path.write_bytes(GARBAGE)


@pytest.mark.chaos
def test_a_garbled_ledger_gives_one_line_and_db_rebuild_brings_the_learnings_back(
    env, tmp_path, monkeypatch
):
    from click.testing import CliRunner

    from reflect_jobs.cli import main

    t = write_claude_transcript(tmp_path / "l.jsonl", ["No, never store tokens in logs."])
    env.invoke("enqueue", str(t))
    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    ledger = env.home / "reflect.db"
    with session_scope(f"sqlite:///{ledger}") as s:
        (before,) = [(r.id, r.title, r.proof_count, r.scope) for r in s.scalars(select(Learning))]
    _garble(ledger)

    proc = env.cli("drain", "--until-idle", check=False)  # the process a person runs
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()  # one line, no traceback
    assert str(ledger) in line and "db check" in line and "db rebuild" in line
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    def cli(*argv: str):  # type: ignore[no-untyped-def]
        dispose_all()
        return CliRunner().invoke(main, list(argv))

    status = cli("status")
    assert status.exit_code == 1 and status.stderr.strip() == line.strip()
    check = cli("db", "check", "--json")
    assert check.exit_code == 1 and not json.loads(check.stdout)["ok"]
    rebuilt = cli("db", "rebuild")
    assert rebuilt.exit_code == 0
    assert "1 learning(s)" in rebuilt.stdout and "kept as" in rebuilt.stdout
    assert list(env.home.glob("reflect.db.damaged-*")), "the damaged file is kept"
    assert cli("db", "check").exit_code == 0
    dispose_all()
    with session_scope(f"sqlite:///{ledger}") as s:
        after = [(r.id, r.title, r.proof_count, r.scope) for r in s.scalars(select(Learning))]
    assert after == [before]
    assert cli("status", "--json").exit_code == 0
    refused = cli("db", "rebuild")
    assert refused.exit_code == 1 and "not damaged" in refused.stderr


def test_the_worker_waits_while_the_ledger_is_damaged_and_starts_once_it_is_mended(tmp_path):
    """In-process, with a recorder for the waits (no fixed sleep)."""
    from reflect_jobs.config import load_settings
    from workers.run import wait_for_usable_ledger

    ledger = tmp_path / "reflect.db"
    settings = load_settings(
        {"REFLECT_HOME": str(tmp_path), "GLOBAL_LEARNINGS_PATH": str(tmp_path / "kb")}
    )
    assert wait_for_usable_ledger(settings, sleep=pytest.fail) == 0, "a missing file is fine"
    ledger.write_bytes(GARBAGE)
    waited: list[float] = []

    def sleep(seconds: float) -> None:
        waited.append(seconds)
        if len(waited) == 3:  # a person restores the file meanwhile
            ledger.unlink()

    assert wait_for_usable_ledger(settings, sleep=sleep) == 3
    assert waited == [1.0, 2.0, 4.0], "backing off, never spinning"


@pytest.mark.chaos
def test_a_worker_on_a_garbled_ledger_waits_and_resumes_after_db_rebuild(env, tmp_path):
    env.home.mkdir(parents=True)
    ledger = env.home / "reflect.db"
    ledger.write_bytes(GARBAGE)
    t = write_claude_transcript(tmp_path / "r.jsonl", ["No, never force-push shared branches."])
    payload = {"session_id": "r", "transcript_path": str(t), "hook_event_name": "Stop"}
    assert env.run("reflect-jobs-hook", "claude", input=json.dumps(payload)).returncode == 0
    worker = subprocess.Popen(
        [str(BIN / "reflect-jobs"), "worker", "-w", "1"],
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = worker.stderr.readline()  # the one line, then it waits (no traceback loop)
        assert "waiting" in line and str(ledger) in line and "db rebuild" in line
        assert worker.poll() is None
        env.cli("db", "rebuild")
        db = env.settings().db_url
        wait_for(
            lambda: any(j["outcome"] == "ok" for j in admin.list_jobs(db)),
            timeout=90,
            what="the worker resuming on the rebuilt ledger",
        )
    finally:
        worker.terminate()
        worker.wait(30)
    with session_scope(env.settings().db_url) as s:
        assert s.scalar(select(func.count()).select_from(Learning)) == 1
        assert s.scalar(select(func.count()).select_from(Job)) == 1


def test_db_check_passes_on_a_healthy_ledger(env, monkeypatch):
    from click.testing import CliRunner

    from reflect_jobs.cli import main
    from reflect_jobs.ledger.db import get_engine

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    get_engine(env.settings().db_url)  # a ledger at head
    out = CliRunner().invoke(main, ["db", "check"])
    assert out.exit_code == 0 and "ok (integrity checked" in out.output
    data = json.loads(CliRunner().invoke(main, ["db", "check", "--json"]).output)
    assert data["ok"] and data["revision"] == data["head"] and data["problem"] is None
