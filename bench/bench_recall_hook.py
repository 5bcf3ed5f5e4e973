"""SessionStart hook latency at 100 / 1,000 / 5,000 notes, as a ratio to a bare interpreter.

Run: .venv/bin/python bench/bench_recall_hook.py [--runs N]

For each size a context store (``index/context.db``, what every reindex keeps up to date) is
filled with that many learnings — the 241 natural notes of ``bench/data/notes.jsonl``
repeated with distinct ids, half of them scoped to one of six repositories in turn (the
hook's own repository among them, so its repository section is filled and queried) — and
``reflect-jobs-hook claude`` is run on a SessionStart payload whose ``cwd`` is inside one of
those repositories (so the repository section and the global section are both queried, and
the git root and origin are found by reading ``.git``), and on a UserPromptSubmit payload with
``REFLECT_RECALL_ON_PROMPT=1``, and on a SessionStart payload after a compaction (``source``
``compact``, a 2 MB transcript whose last prompt is the UserPromptSubmit one: its tail is
read and the block ranks that task's learnings first). At 5,000 notes the repository then gets ``--items`` open
reflection items (default 200; their index already refreshed, as after any ``reflections``
command) and SessionStart is timed again, the block now listing them. Runs are interleaved with ``python -c pass`` of the same venv
so a load change on the shared machine hits all alike: compare the ratios. The bound is a
median of at most 3x the bare interpreter at 5,000 notes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent

from reflect_jobs.recall import store  # noqa: E402

REPOS = [f"github.com/acme/r{i}" for i in range(6)]


def fill(kb_root: Path, n: int) -> None:
    notes = [json.loads(x) for x in (ROOT / "bench/data/notes.jsonl").read_text().splitlines() if x]
    rows = []
    now = time.time()
    for i in range(n):
        note = notes[i % len(notes)]
        scoped = i % 2 == 0
        rows.append(
            {
                "id": f"lrn-{note['slug']}-{i:06d}",
                "scope": "repo" if scoped else "global",
                # every second note is scoped, to each repository in turn: (i // 2), not i,
                # or the even i's would only ever reach r0, r2 and r4 and the hook's own r1
                # would have no repository section to query
                "repo_key": REPOS[(i // 2) % len(REPOS)] if scoped else "",
                "title": note["title"],
                "rule": note["rule"],
                "key_insight": note["key_insight"],
                "category": note["category"],
                "path": str(kb_root / "documents" / f"lrn-{i}.md"),
                "proof_count": 1 + (i % 7 == 0) + (i % 31 == 0),
                "confidence": 0.5 + (i % 5) / 10,
                "updated_ts": now - (i % 90) * 86400,
                "content_hash": f"{i:064x}",
            }
        )
    conn = store.open_for_write(store.store_path(kb_root))
    store.upsert_many(conn, rows)
    store.mark_populated(conn)
    conn.close()


def timed(argv: list[str], stdin: bytes, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, input=stdin, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=25)
    ap.add_argument("--items", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "r1"
        (repo / ".git").mkdir(parents=True)
        (repo / ".git" / "config").write_text(
            '[remote "origin"]\n\turl = git@github.com:acme/r1.git\n'
        )
        (repo / "src" / "deep").mkdir(parents=True)
        # A second checkout of the same repository, on a task branch: a fresh start there
        # ranks the block by the branch's words (``recall/task_query.py:branch_task``).
        on_branch = Path(tmp) / "r1-branch"
        (on_branch / ".git").mkdir(parents=True)
        (on_branch / ".git" / "config").write_text((repo / ".git" / "config").read_text())
        (on_branch / ".git" / "HEAD").write_text("ref: refs/heads/fix/nightly-db-locked\n")
        branch_start = json.dumps({"hook_event_name": "SessionStart", "cwd": str(on_branch)})
        hook = [str(BIN / "reflect-jobs-hook"), "claude"]
        start = json.dumps({"hook_event_name": "SessionStart", "cwd": str(repo / "src" / "deep")})
        prompt = json.dumps(
            {
                "hook_event_name": "UserPromptSubmit",
                "cwd": str(repo),
                "prompt": "the nightly job fails with database is locked when the web app writes",
            }
        )
        # After a compaction: the transcript's tail gives the task (``recall/task_query.py``);
        # a 2 MB transcript, so the bounded tail read is what is timed.
        transcript = Path(tmp) / "session.jsonl"
        turn = {"type": "user", "message": {"role": "user", "content": "x " * 2000}}
        last = {
            "type": "user",
            "message": {"role": "user", "content": json.loads(prompt)["prompt"]},
        }
        transcript.write_text("\n".join([json.dumps(turn)] * 500 + [json.dumps(last)]) + "\n")
        compact = json.dumps(
            {
                "hook_event_name": "SessionStart",
                "cwd": str(repo / "src" / "deep"),
                "source": "compact",
                "transcript_path": str(transcript),
            }
        )
        bare = [sys.executable, "-c", "pass"]
        print(f"runs per command: {args.runs}; medians in ms, ratio to the bare interpreter")
        for n in (100, 1000, 5000):
            kb_root = Path(tmp) / f"kb{n}"
            fill(kb_root, n)
            env = {
                # Bytecode is written as an install does (with PYTHONDONTWRITEBYTECODE every
                # run would compile the hook's modules again and time the compiler).
                **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
                "REFLECT_HOME": str(Path(tmp) / "home"),
                "GLOBAL_LEARNINGS_PATH": str(kb_root),
                "REFLECT_RECALL_ON_PROMPT": "1",
            }
            out = subprocess.run(
                hook, input=start.encode(), env=env, capture_output=True, check=True
            )
            told = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
            chars = len(told)
            # the figure is only worth printing if both sections were queried and told
            assert "## This repository (github.com/acme/r1)" in told, told[:400]
            assert "## General" in told, told[:400]
            times: dict[str, list[float]] = {
                "bare": [],
                "start": [],
                "branch": [],
                "prompt": [],
                "compact": [],
            }
            for _ in range(args.runs):
                times["bare"].append(timed(bare, b"", env))
                times["start"].append(timed(hook, start.encode(), env))
                times["branch"].append(timed(hook, branch_start.encode(), env))
                times["prompt"].append(timed(hook, prompt.encode(), env))
                times["compact"].append(timed(hook, compact.encode(), env))
            med = {k: statistics.median(v) for k, v in times.items()}
            print(
                f"{n:>5} notes: bare {med['bare']:.1f}  SessionStart {med['start']:.1f} "
                f"({med['start'] / med['bare']:.2f}x, {chars} chars)  "
                f"on a branch {med['branch']:.1f} ({med['branch'] / med['bare']:.2f}x)  "
                f"UserPromptSubmit {med['prompt']:.1f} ({med['prompt'] / med['bare']:.2f}x)  "
                f"SessionStart compact {med['compact']:.1f} ({med['compact'] / med['bare']:.2f}x)"
            )
        add_items(repo, env, args.items)
        out = subprocess.run(hook, input=start.encode(), env=env, capture_output=True, check=True)
        ctx = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
        times = {"bare": [], "start": []}
        for _ in range(args.runs):
            times["bare"].append(timed(bare, b"", env))
            times["start"].append(timed(hook, start.encode(), env))
        med = {k: statistics.median(v) for k, v in times.items()}
        print(
            f"5000 notes + {args.items} open items: bare {med['bare']:.1f}  SessionStart "
            f"{med['start']:.1f} ({med['start'] / med['bare']:.2f}x, {len(ctx)} chars, "
            f"{ctx.count(chr(10) + '- #')} items shown)"
        )


def add_items(repo: Path, env: dict[str, str], n: int) -> None:
    """``n`` open items in the repository's memory home, written through the store."""
    from reflect_jobs.reflections.store import open_store

    st = open_store(str(repo), repo, env)
    try:
        kinds = ("action", "question", "handoff")
        for i in range(n):
            st.add(kinds[i % 3], f"Open item {i}: finish the part of the port it names")
    finally:
        st.close()


if __name__ == "__main__":
    main()
