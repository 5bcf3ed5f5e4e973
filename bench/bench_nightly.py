"""Cost and wall time of one nightly run on a 1,000-learning knowledge base (docs/NIGHTLY.md).

Run: .venv/bin/python bench/bench_nightly.py [--learnings 1000] [--sessions 200]

Builds, in a temporary home: a real git repository with a revert of a session's commit in
its history, a real SQLite ledger holding ``--sessions`` finished jobs of that repository
(each with its recorded commits) and ``--learnings`` learnings written through the ledger's
own ``upsert_learning`` / ``add_proof`` with their notes on disk (a third confirmed by a
second session), a Claude Code ``MEMORY.md`` with a person's lines, and runs the real
``run_nightly`` in process against the stub ``claude`` of tests/stubs (a subprocess speaking
the real CLI's JSON) three times:

* **baseline** — the same run over an empty knowledge base (no learnings, no sessions),
  measured warm (a first run pays the imports and the ledger's migrations and is not shown);
* **first night** — 1,000 learnings, every part due (analyzer, revert demotion, dreaming,
  the weekly synthesis's one paid call);
* **second night** — nothing changed (the synthesis is not due again, MEMORY.md unchanged).

Prints paid calls, prompt characters sent, wall time, and each run's time as a ratio to the
baseline measured in the same process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUB = ROOT / "tests" / "stubs" / "claude"
sys.path.insert(0, str(ROOT))


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.email=a@b", "-c", "user.name=a", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _repo(path: Path) -> tuple[Path, str]:
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    _git(path, "remote", "add", "origin", "git@github.com:acme/bench.git")
    (path / "f").write_text("1")
    _git(path, "add", "f")
    _git(path, "commit", "-qm", "init")
    (path / "f").write_text("2")
    _git(path, "commit", "-qam", "session change")
    short = _git(path, "rev-parse", "--short=7", "HEAD").strip()
    _git(path, "revert", "--no-edit", "HEAD")
    return path, short


def _fill(settings, kb_path: Path, root: Path, learnings: int, sessions: int, short: str) -> None:  # type: ignore[no-untyped-def]
    from reflect_jobs import kb
    from reflect_jobs.ledger import learnings as ledger_learnings
    from reflect_jobs.ledger.db import session_scope
    from reflect_jobs.ledger.models import Job

    key = "github.com/acme/bench"
    now = datetime.now(UTC)
    with session_scope(settings.db_url) as s:
        for i in range(sessions):
            s.add(
                Job(
                    id=f"job{i:06d}",
                    harness="claude",
                    session_id=f"sess-{i}",
                    transcript_path=f"/nowhere/sess-{i}.jsonl",
                    stage="done",
                    state="done",
                    outcome="ok",
                    prepare_stats={
                        "repo": {"key": key, "root": str(root), "cwd": str(root)},
                        "commits": [short] if i == 0 else [],
                    },
                    created_at=now - timedelta(hours=2),
                    updated_at=now - timedelta(hours=1),
                )
            )
    with session_scope(settings.db_url) as s:
        for i in range(learnings):
            item = {
                "title": f"Rule {i}: regenerate fixture {i % 37} before suite {i % 11}",
                "rule": f"Regenerate fixture {i % 37} before running suite {i % 11} ({i}).",
                "category": "Process",
                "key_insight": "fixtures go stale",
                "evidence": f"fixture {i % 37} is stale",
                "scope": "repo",
                "repo": key,
            }
            note = kb.write_learning(
                kb_path, item, created=now.isoformat(), updated=now.isoformat(),
                source_path=f"/nowhere/sess-{i % sessions}.jsonl", session_id=f"sess-{i % sessions}",
            )  # fmt: skip
            ledger_learnings.upsert_learning(
                s,
                learning_id=note.id,
                title=item["title"],
                category="Process",
                learning_type="pattern",
                confidence_num=0.8,
                note_path=str(note.path),
                content_hash=note.content_hash,
                source=f"/nowhere/sess-{i % sessions}.jsonl",
                session_id=f"sess-{i % sessions}",
                signal_hash=None,
                job_id=f"job{i % sessions:06d}",
                scope="repo",
                repo_key=key,
                evidence=item["evidence"],
                evidence_origin="person",
            )
            if i % 3 == 0:
                s.flush()
                ledger_learnings.add_proof(
                    s, note.id, f"/nowhere/sess-{(i + 1) % sessions}.jsonl",
                    reason="bench", job_id=None,
                )  # fmt: skip


def _history(path: Path, commits: int) -> Path:
    """A repository of ``commits`` empty commits (git fast-import), a revert among the newest."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    lines = []
    t = 1_700_000_000
    for i in range(commits):
        msg = (
            f"commit {i}\n"
            if i != commits - 10
            else "Revert x\n\nThis reverts commit " + "ab" * 20 + ".\n"
        )
        data = msg.encode()
        lines.append(f"commit refs/heads/main\ncommitter a <a@b> {t + i} +0000\ndata {len(data)}\n")
        lines.append(msg + "\n")
    subprocess.run(
        ["git", "-C", str(path), "fast-import", "--quiet"],
        input="".join(lines).encode(),
        check=True,
    )
    return path


def _scan_seconds(root: Path, reps: int = 5) -> float:
    from reflect_jobs.nightly.commits import reverts

    since = datetime(2000, 1, 1, tzinfo=UTC)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        found = reverts(str(root), since)
        best = min(best, time.perf_counter() - t0)
    assert len(found) == 1
    return best


def _run(settings, storage, root: Path | None) -> tuple[float, dict]:  # type: ignore[no-untyped-def]
    from reflect_jobs.nightly.run import run_nightly

    t0 = time.perf_counter()
    result = run_nightly(settings, storage, force=True, repo_dir=str(root) if root else None)
    return time.perf_counter() - t0, result.to_json()


def _calls(log: Path) -> tuple[int, int]:
    if not log.exists():
        return 0, 0
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    return len(rows), sum(int(r.get("prompt_chars") or 0) for r in rows)


def main() -> int:
    """Build the knowledge base, run the three nights, print the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--learnings", type=int, default=1000)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--history", type=int, default=100_000, help="commits of the big history")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "user").mkdir()
        log = base / "calls.jsonl"
        os.environ.update(
            HOME=str(base / "user"),
            CLAUDE_CONFIG_DIR=str(base / "claude"),
            REFLECT_HOME=str(base / "home"),
            GLOBAL_LEARNINGS_PATH=str(base / "kb"),
            REFLECT_DRAIN_CLAUDE_BIN=str(STUB),
            REFLECT_WRITER_BACKEND="claude",
            REFLECT_INDEX_VECTORS="0",
            STUB_CLAUDE_MODE="echo_actions",
            STUB_CLAUDE_ACTIONS=json.dumps({"observations": []}),
            STUB_CLAUDE_LOG=str(log),
            XDG_CONFIG_HOME=str(base / "xdg"),
        )
        from reflect_jobs.config import load_settings
        from reflect_jobs.nightly.memory_md import memory_file
        from reflect_jobs.queue import make_huey

        settings = load_settings()
        storage = make_huey(settings).storage
        empty = base / "empty"
        empty.mkdir()
        _run(settings, storage, empty)  # imports, migrations, first connections: not measured
        t_base, _ = _run(settings, storage, empty)
        c0 = _calls(log)
        root, short = _repo(base / "bench")
        target = memory_file(str(base / "claude"), str(root))
        assert target is not None
        target.parent.mkdir(parents=True)
        target.write_text("# My notes\n- deploy with make ship\n")
        t_fill = time.perf_counter()
        _fill(settings, settings.kb_path, root, args.learnings, args.sessions, short)
        t_fill = time.perf_counter() - t_fill
        t1, r1 = _run(settings, storage, root)
        c1 = _calls(log)
        t2, r2 = _run(settings, storage, root)
        c2 = _calls(log)
        repo1 = r1["repos"][0]
        print(f"knowledge base: {args.learnings} learnings, {args.sessions} sessions "
              f"(built in {t_fill:.1f} s)")  # fmt: skip
        print(f"{'run':<14}{'paid calls':>11}{'prompt chars':>14}{'wall s':>9}{'x baseline':>12}")
        rows = [
            ("baseline", c0, t_base),
            ("first night", (c1[0] - c0[0], c1[1] - c0[1]), t1),
            ("second night", (c2[0] - c1[0], c2[1] - c1[1]), t2),
        ]
        for name, (calls, chars), secs in rows:
            print(f"{name:<14}{calls:>11}{chars:>14,}{secs:>9.2f}{secs / t_base:>12.1f}")
        small = _scan_seconds(_history(base / "h-small", 2000))
        large = _scan_seconds(_history(base / "h-large", args.history))
        print(
            f"revert scan (best of 5): 2,000-commit history {small * 1000:.0f} ms, "
            f"{args.history:,}-commit history {large * 1000:.0f} ms "
            f"({large / small:.2f}x: bounded by git log -n2000)"
        )
        print(
            f"first night: {repo1['sessions']} sessions, {repo1['repeated']} repeated, "
            f"MEMORY.md {repo1['memory']}, {len(repo1['demoted'])} demoted; "
            f"second night: MEMORY.md {r2['repos'][0]['memory']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
