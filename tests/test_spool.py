"""The capture spool's files, and the status view of what waits (issues 11.1, 11.5)."""

from __future__ import annotations

import json
import stat
import subprocess

import pytest
from support import BIN, transcripts_dir

from reflect_jobs import spool
from reflect_jobs.cli.health import queue_line

ENTRY = {
    "harness": "claude",
    "session_id": "s1",
    "transcript_path": "/t.jsonl",
    "event": "Stop",
    "hook_ts": 1.5,
    "cwd": "/home/dev/repo",
}


def test_append_writes_a_private_entry_in_a_private_dir(tmp_path):
    home = str(tmp_path / "home")
    first = spool.append(home, **ENTRY)
    second = spool.append(home, **ENTRY)
    d = tmp_path / "home" / "spool"
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    for entry_id in (first, second):
        assert stat.S_IMODE((d / f"{entry_id}.json").stat().st_mode) == 0o600
    assert spool.entry_ids(home) == sorted([first, second]) and first != second
    assert spool.read_entry(home, first) == {"id": first, **ENTRY}
    assert [p.name for p in d.iterdir() if not p.name.endswith(".json")] == [], "no temp left"


def test_entry_ids_min_age_delete_and_missing(tmp_path):
    home = str(tmp_path)
    entry_id = spool.append(home, **ENTRY)
    assert spool.entry_ids(home, min_age_sec=60) == []
    assert spool.entry_ids(home, min_age_sec=60, now=10**11) == [entry_id]
    assert spool.delete(home, entry_id) is True and spool.delete(home, entry_id) is False
    assert spool.read_entry(home, entry_id) is None and spool.entry_ids(home) == []
    assert spool.entry_ids(str(tmp_path / "nowhere")) == []


def test_temporary_files_of_killed_hooks_are_adopted_or_removed(tmp_path):
    home = str(tmp_path)
    whole = spool.append(home, **ENTRY)
    d = tmp_path / "spool"
    (d / f"{whole}.json").rename(d / f".tmp-{whole}")  # killed between write and rename
    (d / ".tmp-0000-abc").write_bytes(b'{"harn')  # killed mid-write
    assert spool.adopt_stale_temps(home) == 0, "young temporary files may still be written"
    assert spool.adopt_stale_temps(home, now=10**11) == 1
    assert spool.entry_ids(home) == [whole] and sorted(p.name for p in d.iterdir()) == [
        f"{whole}.json"
    ]


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1]", json.dumps({**ENTRY, "harness": 3}).encode(), b'{"event": "x"}'],
)
def test_malformed_entries_are_refused_with_one_line(tmp_path, body):
    home = str(tmp_path)
    entry_id = spool.append(home, **ENTRY)
    (tmp_path / "spool" / f"{entry_id}.json").write_bytes(body)
    with pytest.raises(ValueError, match=f"spool entry {entry_id}"):
        spool.read_entry(home, entry_id)
    kept = spool.set_aside(home, entry_id)
    assert kept.endswith(".bad") and spool.entry_ids(home) == []


@pytest.mark.parametrize("bad", ["", "../x", "a%b", "ABC", "1" * 65, None, 3])
def test_ids_from_messages_are_checked(bad):
    assert not spool.valid_id(bad)
    assert spool.delete("/nonexistent", bad) is False  # type: ignore[arg-type]


def test_queue_line():
    assert queue_line({"pending": 0, "captures": 0, "spooled": 0}) == "empty"
    assert queue_line({"pending": 3, "captures": 3, "spooled": 1}) == (
        "3 captures waiting (1 spooled)"
    )
    assert queue_line({"pending": 2, "captures": 1, "spooled": 0}) == (
        "1 capture waiting, 1 other message(s) waiting"
    )


def _hook(env, session_id: str) -> None:
    t = transcripts_dir() / "hello-world-script.jsonl"
    proc = subprocess.run(
        [str(BIN / "reflect-jobs-hook"), "claude"],
        input=json.dumps({"session_id": session_id, "transcript_path": str(t)}).encode(),
        env=dict(env),
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0


def test_status_counts_waiting_captures_once_and_names_the_missing_worker(env):
    env["REFLECT_CAPTURE_SETTLE_SEC"] = "3600"
    for i in range(3):
        _hook(env, f"w{i}")  # each one is in the queue and in the spool
    t = str(transcripts_dir() / "hello-world-script.jsonl")
    spool.append(str(env.home), **{**ENTRY, "transcript_path": t})  # spooled only
    data = json.loads(env.invoke("status", "--json").stdout)
    assert data["queue"] == {"pending": 4, "captures": 4, "spooled": 4}
    assert data["counts"]["queued"] == 0
    (warning,) = data["warnings"]
    assert warning.startswith("4 capture(s) waiting in the queue and no worker heartbeat ever")
    assert "reflect-jobs worker" in warning
    text = env.invoke("status").stdout
    assert "jobs: none" in text and "queue: 4 captures waiting (4 spooled)" in text
    assert "captures:4" in env.invoke("status", "--line").stdout

    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    data = json.loads(env.invoke("status", "--json").stdout)
    assert data["queue"] == {"pending": 0, "captures": 0, "spooled": 0}
    assert data["counts"]["queued"] == 4 and data["warnings"] == []


@pytest.mark.chaos
def test_a_malformed_spool_entry_is_set_aside_and_reported(env):
    env.home.mkdir(parents=True)
    entry_id = spool.append(str(env.home), **ENTRY)
    (env.home / "spool" / f"{entry_id}.json").write_text("{broken")
    env.cli("drain", "--until-idle", "--max-seconds", "30")
    assert (env.home / "spool" / f"{entry_id}.bad").exists()
    errors = json.loads(env.cli("errors", "--json").stdout)
    assert [e["kind"] for e in errors] == ["spool_bad"]
