"""Verify before telling (issue 23 item 1): the real hook on a real git repository.

A learning's anchors are checked against the session's working tree at SessionStart: a
learning whose files are all gone is withheld and the block's last line counts it; one whose
symbol was renamed is told with a mark; three stale session starts take it out of circulation
(ledger ``stale_anchors``, through the worker) until a person restores it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from recall_support import add_note, learning, reindex
from support import BIN

from reflect_jobs.kb import parse_note
from reflect_jobs.kb.render import MAX_ANCHORS
from reflect_jobs.ledger import learnings as ledger_learnings
from reflect_jobs.ledger.db import session_scope
from reflect_jobs.ledger.models import Learning
from reflect_jobs.recall import block, verify
from reflect_jobs.recall.verify_store import VerifyStore, store_path

HOOK = str(BIN / "reflect-jobs-hook")
KEY = "github.com/acme/shop"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "shop"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("def parse_config(path):\n    return {}\n")
    (repo / "src" / "old.py").write_text("LEGACY = 1\n")
    (repo / "src" / "keep.py").write_text("def keep_me():\n    pass\n")
    _git(repo, "init", "-q")
    _git(repo, "remote", "add", "origin", "https://github.com/acme/shop.git")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    return repo


def _note(env, title: str, anchors: list[dict], **kw):  # type: ignore[no-untyped-def]
    item = learning(
        title,
        f"Rule for {title.lower()}",
        repo=KEY,
        evidence=f"we saw {title}",
        evidence_origin="person",
        anchors=anchors,
        **kw,
    )
    return add_note(env.kb, item)


def _session_start(env, cwd: Path, session: str) -> str:  # type: ignore[no-untyped-def]
    payload = {"session_id": session, "hook_event_name": "SessionStart", "cwd": str(cwd)}
    proc = subprocess.run(
        [HOOK, "claude"], input=json.dumps(payload).encode(), env=dict(env),
        capture_output=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    if not proc.stdout.strip():
        return ""
    return json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def _last_line(text: str) -> str:
    lines = text.splitlines()
    assert lines[-1] == block.CLOSE
    return lines[-2]


def _errors(env) -> str:  # type: ignore[no-untyped-def]
    log = env.home / "hook-errors.log"
    return log.read_text() if log.exists() else ""


def test_a_deleted_file_withholds_its_learning_and_a_renamed_symbol_marks_it(env, tmp_path):
    repo = _repo(tmp_path)
    _note(env, "Old module holds the legacy flag", [{"path": "src/old.py"}])
    _note(env, "Config parsing lives in app", [{"path": "src/app.py", "symbol": "parse_config"}])
    _note(env, "Keep module is stable", [{"path": "src/keep.py", "symbol": "keep_me"}])
    reindex(env.kb)

    first = _session_start(env, repo, "s1")
    assert first.splitlines()[1] == block.FRAMING
    assert "Old module holds" in first and "Config parsing" in first
    assert _last_line(first) == "nothing more qualifies; 0 withheld (stale)"
    assert "(unverified" not in first

    (repo / "src" / "old.py").unlink()
    (repo / "src" / "app.py").write_text("def load_config(path):\n    return {}\n")
    told = _session_start(env, repo, "s2")
    assert "Old module holds" not in told, "every anchor gone: withheld"
    line = next(x for x in told.splitlines() if "Config parsing" in x)
    assert line.endswith("(unverified: parse_config in src/app.py gone)")
    keep = next(x for x in told.splitlines() if "Keep module" in x)
    assert "(unverified" not in keep and "(confidence 0.70, " in keep
    assert _last_line(told) == "nothing more qualifies; 1 withheld (stale)"
    assert _errors(env) == ""


def test_everything_withheld_still_says_so(env, tmp_path):
    repo = _repo(tmp_path)
    _note(env, "Old module holds the legacy flag", [{"path": "src/old.py"}])
    reindex(env.kb)
    (repo / "src" / "old.py").unlink()
    told = _session_start(env, repo, "s1")
    assert "Old module" not in told
    assert _last_line(told) == "nothing more qualifies; 1 withheld (stale)"


def test_a_symlink_leaving_the_repository_counts_as_gone(env, tmp_path):
    repo = _repo(tmp_path)
    outside = tmp_path / "outside.py"
    outside.write_text("def secret_fn():\n    pass\n")
    (repo / "src" / "link.py").symlink_to(outside)
    _note(env, "The link module", [{"path": "src/link.py", "symbol": "secret_fn"}])
    _note(env, "Dotdot anchor", [{"path": "../outside.py"}])
    reindex(env.kb)
    told = _session_start(env, repo, "s1")
    assert "The link module" not in told and "Dotdot anchor" not in told
    assert _last_line(told).endswith("; 2 withheld (stale)")
    assert verify.verdict(str(repo), [{"path": "src/link.py"}]).status == verify.STALE


def test_a_2gb_anchor_is_read_only_up_to_the_cap(env, tmp_path):
    repo = _repo(tmp_path)
    big = repo / "data.bin"
    with open(big, "wb") as fh:  # sparse: 2 GB of size, no disk
        fh.truncate(2 * 1024**3)
    _note(env, "Huge data file", [{"path": "data.bin", "symbol": "needle_symbol"}])
    reindex(env.kb)
    t0 = time.monotonic()
    told = _session_start(env, repo, "s1")
    assert time.monotonic() - t0 < 20
    line = next(x for x in told.splitlines() if "Huge data file" in x)
    assert "(unverified" not in line, "beyond the cap: unchecked, not gone"
    v = verify.verdict(str(repo), [{"path": "data.bin", "symbol": "needle_symbol"}])
    assert v.status == verify.OK and v.unchecked == ["needle_symbol in data.bin"]


def test_three_stale_session_starts_take_it_out_of_circulation_until_restored(env, tmp_path):
    repo = _repo(tmp_path)
    nf = _note(env, "Old module holds the legacy flag", [{"path": "src/old.py"}])
    db = env.settings().db_url
    with session_scope(db) as s:
        ledger_learnings.upsert_learning(
            s, learning_id=nf.id, title="Old module holds the legacy flag", category="Tools",
            learning_type="gotcha", confidence_num=0.7, note_path=str(nf.path),
            content_hash=nf.content_hash, source="/t.jsonl", session_id="s0",
            signal_hash=None, job_id=None, scope="repo", repo_key=KEY,
            anchors=[{"path": "src/old.py"}],
        )  # fmt: skip
    reindex(env.kb)
    (repo / "src" / "old.py").unlink()
    for session in ("s1", "s1", "s2"):  # a resumed session counts once
        _session_start(env, repo, session)
    vs = VerifyStore(store_path(str(env.home)))
    assert vs.streak(nf.id) == 2
    vs.close()
    assert not (env.home / "queue.db").exists() or _queued(env) == 0
    _session_start(env, repo, "s3")
    assert _queued(env) == 1, "the third stale session hands it to the worker"

    env.invoke("drain", "--until-idle", "--max-seconds", "60")
    with session_scope(db, readonly=True) as s:
        row = s.get(Learning, nf.id)
        assert row.status == "stale_anchors"
        assert "src/old.py" in row.retired_reason
    assert parse_note(nf.path).frontmatter["status"] == "stale_anchors"
    told = _session_start(env, repo, "s4")
    assert nf.id not in told and (told == "" or "; 0 withheld (stale)" in told)
    found = env.invoke("search", "legacy flag", "--json").stdout
    assert nf.id not in found, "out of circulation: not searched either"

    assert "restored" in env.invoke("restore", nf.id).stdout
    with session_scope(db, readonly=True) as s:
        assert s.get(Learning, nf.id).status == "active"
    assert parse_note(nf.path).frontmatter["status"] == "active"
    still = _session_start(env, repo, "s5")
    assert nf.id not in still and "; 1 withheld (stale)" in still, "files still gone"
    (repo / "src" / "old.py").write_text("LEGACY = 2\n")
    assert "Old module holds" in _session_start(env, repo, "s6")
    vs = VerifyStore(store_path(str(env.home)))
    assert vs.streak(nf.id) == 0, "anchors found again: the streak ended"
    vs.close()


def _queued(env) -> int:  # type: ignore[no-untyped-def]
    import sqlite3

    conn = sqlite3.connect(env.home / "queue.db")
    try:
        return conn.execute("select count(*) from task").fetchone()[0]
    finally:
        conn.close()


def test_a_hung_check_is_told_unverified_within_the_budget(env, tmp_path):
    repo = _repo(tmp_path)
    _note(env, "Config parsing lives in app", [{"path": "src/app.py", "symbol": "parse_config"}])
    reindex(env.kb)
    pause = tmp_path / "fp"
    pause.mkdir()
    hung = dict(env, REFLECT_FAILPOINTS="verify:check=pause", REFLECT_FAILPOINT_DIR=str(pause))
    t0 = time.monotonic()
    told = _session_start(hung, repo, "s1")
    assert time.monotonic() - t0 < 10
    line = next(x for x in told.splitlines() if "Config parsing" in x)
    assert line.endswith("(unverified: check timed out)")


def test_verify_command_prints_each_verdict(env, tmp_path):
    repo = _repo(tmp_path)
    _note(env, "Old module holds the legacy flag", [{"path": "src/old.py"}])
    _note(env, "Config parsing lives in app", [{"path": "src/app.py", "symbol": "parse_config"}])
    _note(env, "No anchors here", [])
    add_note(env.kb, learning("A global rule", "Always x", scope="global"))
    reindex(env.kb)
    (repo / "src" / "old.py").unlink()
    rows = json.loads(env.invoke("verify", "--cwd", str(repo), "--json").stdout)
    by_title = {r["title"]: r for r in rows}
    assert by_title["Old module holds the legacy flag"]["verdict"] == "stale"
    assert by_title["Old module holds the legacy flag"]["missing"] == ["src/old.py"]
    assert by_title["Config parsing lives in app"]["verdict"] == "ok"
    assert by_title["No anchors here"]["verdict"] == "unanchored"
    assert by_title["A global rule"]["verdict"] == "unanchored"
    text = env.invoke("verify", "--cwd", str(repo)).stdout
    assert "stale" in text and "gone: src/old.py" in text


def test_context_all_prints_everything_and_reports_tokens(env, tmp_path):
    repo = _repo(tmp_path)
    for i in range(14):
        _note(env, f"Lesson number {i} about keep", [{"path": "src/keep.py"}])
    reindex(env.kb)
    capped = env.invoke("context", "--cwd", str(repo))
    assert _last_line(capped.stdout) == (
        "+4 more — those your task needs: MCP `context` with it as `query`, or "
        '`reflect-jobs search "your task" --repo .`; all: `reflect-jobs context --all`; '
        "0 withheld (stale)"
    )
    assert "characters, ~" in capped.stderr and "tokens (estimate)" in capped.stderr
    full = env.invoke("context", "--cwd", str(repo), "--all").stdout
    assert sum(1 for x in full.splitlines() if x.startswith("- [")) == 14
    assert _last_line(full) == "nothing more qualifies; 0 withheld (stale)"


# --- the pure parts -------------------------------------------------------------------------


def test_symbols_match_whole_identifiers_across_chunk_edges(tmp_path):
    f = tmp_path / "a.py"
    pad = b"x" * (verify._CHUNK - 4)
    f.write_bytes(pad + b" parse_config()")
    assert verify.find_symbol(str(f), "parse_config") == verify.FOUND
    f.write_bytes(pad + b" parse_configs()")
    assert verify.find_symbol(str(f), "parse_config") == verify.ABSENT
    f.write_bytes(b"def parse_config")
    assert verify.find_symbol(str(f), "parse_config") == verify.FOUND
    assert verify.find_symbol(str(f), "parse_conf") == verify.ABSENT


def test_the_cache_is_keyed_by_mtime_and_size(tmp_path):
    f = tmp_path / "a.py"
    f.write_text("def one():\n    pass\n")
    cache = verify.MemoryCache()
    anchors = [{"path": "a.py", "symbol": "one"}]
    assert verify.verdict(str(tmp_path), anchors, cache).status == verify.OK
    st = f.stat()
    cache.put(os.path.realpath(tmp_path), "a.py", "one", st.st_mtime_ns, st.st_size, 0)
    assert verify.verdict(str(tmp_path), anchors, cache).status == verify.PARTIAL, "cache hit"
    f.write_text("def one():\n    return 1\n")
    assert verify.verdict(str(tmp_path), anchors, cache).status == verify.OK, "changed: re-read"


def test_the_verification_store_is_private(env, tmp_path):
    vs = VerifyStore(store_path(str(env.home)))
    vs.close()
    assert (os.stat(store_path(str(env.home))).st_mode & 0o777) == 0o600


@pytest.mark.parametrize(
    "token", ["/etc/passwd", "~/x", "a/../../b", ".git/config", "C:/x", "a\\b", "", "a\x00b"]
)
def test_unsafe_anchor_paths_are_never_touched(token):
    assert verify.safe_relpath(token) is None


def test_the_anchor_bound_is_the_one_notes_keep():
    assert verify.MAX_ANCHORS == MAX_ANCHORS


def test_recall_log_records_what_each_session_was_told(env, tmp_path):
    repo = _repo(tmp_path)
    kept = _note(env, "Keep module is stable", [{"path": "src/keep.py", "symbol": "keep_me"}])
    old = _note(env, "Old module holds the legacy flag", [{"path": "src/old.py"}])
    reindex(env.kb)
    (repo / "src" / "old.py").unlink()
    told = _session_start(env, repo, "sess-1")
    _session_start(env, repo, "sess-2")
    rows = json.loads(env.invoke("recall-log", "--session", "sess-1", "--json").stdout)
    assert len(rows) == 1
    r = rows[0]
    assert r["session"] == "sess-1" and r["harness"] == "claude" and r["event"] == "SessionStart"
    assert r["cwd"] == str(repo) and r["learnings"] == [kept.id] and r["withheld"] == [old.id]
    assert r["chars"] == len(told) and r["tokens"] == block.estimate_tokens(told)
    assert r["time"].startswith("20")
    assert (os.stat(env.home / "recall-log.jsonl").st_mode & 0o777) == 0o600
    assert len(json.loads(env.invoke("recall-log", "--json").stdout)) == 2
    assert "sess-2" in env.invoke("recall-log").stdout


def test_a_damaged_verify_store_is_set_aside_and_the_block_still_told(env, tmp_path):
    repo = _repo(tmp_path)
    _note(env, "Keep module is stable", [{"path": "src/keep.py", "symbol": "keep_me"}])
    reindex(env.kb)
    env.home.mkdir(parents=True, exist_ok=True)
    (env.home / "verify.db").write_bytes(b"this is not a database" * 100)
    assert "Keep module is stable" in _session_start(env, repo, "s1")
    assert list(env.home.glob("verify.db.bad-*")), "set aside, not deleted"
    vs = VerifyStore(store_path(str(env.home)))
    vs.close()


def test_verification_keeps_the_hook_path_stdlib_only(env, tmp_path):
    from recall_support import session_start_in_process

    repo = _repo(tmp_path)
    _note(env, "Config parsing lives in app", [{"path": "src/app.py", "symbol": "parse_config"}])
    _note(env, "Old module holds the legacy flag", [{"path": "src/gone.py"}])
    reindex(env.kb)
    told, heavy = session_start_in_process(env, repo, also_heavy=("reflect_jobs.kb", "threading"))
    assert "Config parsing" in told and "; 1 withheld (stale)" in told
    assert heavy == []


def test_a_store_from_before_anchors_is_read_then_upgraded_and_refilled(env, tmp_path):
    import sqlite3

    from reflect_jobs.recall import store

    repo = _repo(tmp_path)
    nf = _note(env, "Old module holds the legacy flag", [{"path": "src/old.py"}])
    path = store.store_path(env.kb)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    old_schema = store._SCHEMA.replace(",\n    anchors TEXT NOT NULL DEFAULT ''", "")
    conn = sqlite3.connect(path)
    conn.executescript(old_schema)
    conn.execute(
        "INSERT INTO notes (id, scope, repo_key, title) VALUES (?, 'repo', ?, ?)",
        (nf.id, KEY, "Old module holds the legacy flag"),
    )
    conn.execute("INSERT INTO meta VALUES ('schema', '1'), ('populated', '1')")
    conn.commit()
    conn.close()
    (repo / "src" / "old.py").unlink()
    assert "Old module" in _session_start(env, repo, "s1"), "schema 1: no anchors, told"
    reindex(env.kb)
    told = _session_start(env, repo, "s2")
    assert "Old module" not in told and "; 1 withheld (stale)" in told
