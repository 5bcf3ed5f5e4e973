"""SessionStart with anchor verification: 100 / 1,000 / 5,000 notes and a 50,000-file repository.

Run: .venv/bin/python bench/bench_verify.py [--runs N] [--files 50000]

For each size a context store is filled with that many learnings (the natural notes of
``bench/data/notes.jsonl`` with distinct ids; half scoped to one of six repositories, as
``bench_recall_hook.py`` does), every repository learning anchored to one to three files of
the session's working tree — a path and the symbol defined in it — and one in ten anchored
only to files that were deleted (stale: withheld, which makes the hook check further down
the ranking). ``reflect-jobs-hook claude`` is run on a SessionStart payload inside that
repository: on the same store with no anchors (``no anchors``: what the hook cost before
verification), then with the anchors, once with no verification store (``cold``: every anchored file read), then
warm (the symbol cache keyed by mtime/size answers; paths are still ``stat``-ed). Runs
are interleaved with ``python -c pass`` of the same venv so a load change on the shared
machine hits all alike: compare the ratios. The bound is a median of at most 3x the bare
interpreter at 5,000 notes.

The last line repeats the 5,000-note case in a working tree of ``--files`` files (default
50,000, in 500 directories) whose anchors are spread over the whole tree: verification
costs the same, because nothing walks the tree — only the anchors of the learnings that
would be told are looked at.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
SESSION_REPO = REPOS[1]


def make_tree(repo: Path, files: int) -> list[tuple[str, str]]:
    """A working tree of ``files`` Python files; returns ``(path, symbol)`` of each."""
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text('[remote "origin"]\n\turl = git@github.com:acme/r1.git\n')
    out = []
    per_dir = 100
    for i in range(files):
        rel = f"src/d{i // per_dir:04d}/mod_{i}.py"
        path = repo / rel
        if i % per_dir == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
        symbol = f"handler_{i}"
        body = "".join(f"def helper_{i}_{k}(x):\n    return x + {k}\n\n" for k in range(40))
        path.write_text(body + f"def {symbol}(request):\n    return request\n")
        out.append((rel, symbol))
    return out


def fill(kb_root: Path, n: int, tree: list[tuple[str, str]], *, anchored: bool = True) -> None:
    notes = [json.loads(x) for x in (ROOT / "bench/data/notes.jsonl").read_text().splitlines() if x]
    rows = []
    now = time.time()
    for i in range(n):
        note = notes[i % len(notes)]
        scoped = i % 2 == 0
        key = REPOS[(i // 2) % len(REPOS)] if scoped else ""
        anchors = []
        if scoped and anchored:
            if i % 10 == 0:  # stale: its files were deleted
                anchors = [{"path": f"src/gone/old_{i}.py"}, {"path": f"lib/removed_{i}.py"}]
            else:
                for k in range(1 + i % 3):
                    rel, sym = tree[(i * 7 + k * 131) % len(tree)]
                    anchors.append({"path": rel, "symbol": sym})
        rows.append(
            {
                "id": f"lrn-{note['slug']}-{i:06d}",
                "scope": "repo" if scoped else "global",
                "repo_key": key,
                "title": note["title"],
                "rule": note["rule"],
                "key_insight": note["key_insight"],
                "category": note["category"],
                "path": str(kb_root / "documents" / f"lrn-{i}.md"),
                "proof_count": 1 + (i % 7 == 0) + (i % 31 == 0),
                "confidence": 0.5 + (i % 5) / 10,
                "updated_ts": now - (i % 90) * 86400,
                "content_hash": f"{i:064x}",
                "anchors": json.dumps(anchors) if anchors else "",
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


def measure(label: str, kb_root: Path, repo: Path, home: Path, runs: int) -> None:
    hook = [str(BIN / "reflect-jobs-hook"), "claude"]
    bare = [sys.executable, "-c", "pass"]
    env = {**os.environ, "REFLECT_HOME": str(home), "GLOBAL_LEARNINGS_PATH": str(kb_root)}
    env.pop("REFLECT_FAILPOINTS", None)
    times: dict[str, list[float]] = {"bare": [], "plain": [], "cold": [], "warm": []}
    plain_env = {**env, "GLOBAL_LEARNINGS_PATH": str(kb_root) + "-plain"}
    chars = withheld = 0
    for r in range(runs):
        payload = json.dumps(
            {"hook_event_name": "SessionStart", "cwd": str(repo), "session_id": f"bench-{r}"}
        ).encode()
        times["bare"].append(timed(bare, b"", env))
        times["plain"].append(timed(hook, payload, plain_env))
        shutil.rmtree(home, ignore_errors=True)
        times["cold"].append(timed(hook, payload, env))
        times["warm"].append(timed(hook, payload, env))
    out = subprocess.run(hook, input=payload, env=env, capture_output=True, check=True)
    ctx = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    chars = len(ctx)
    withheld = ctx.splitlines()[-2]
    med = {k: statistics.median(v) for k, v in times.items()}
    inproc = in_process(kb_root, repo, home)
    print(
        f"{label}: bare {med['bare']:.1f}  no anchors {med['plain']:.1f} "
        f"({med['plain'] / med['bare']:.2f}x)  verified cold {med['cold']:.1f} "
        f"({med['cold'] / med['bare']:.2f}x)  warm {med['warm']:.1f} "
        f"({med['warm'] / med['bare']:.2f}x)  {chars} chars; last line: {withheld}"
    )
    print(
        f"    in-process session_block, median of 50: no anchors {inproc[0]:.2f} ms, "
        f"verified (warm) {inproc[1]:.2f} ms: verification adds {inproc[1] - inproc[0]:.2f} ms"
    )


def in_process(kb_root: Path, repo: Path, home: Path) -> tuple[float, float]:
    """The block's build time without and with verification, in this process (no start-up
    noise): what verification itself adds to a session start."""
    from reflect_jobs.recall.session_start import session_block

    out = []
    for kb in (Path(str(kb_root) + "-plain"), kb_root):
        os.environ["GLOBAL_LEARNINGS_PATH"], os.environ["REFLECT_HOME"] = str(kb), str(home)
        session_block(str(repo), max_chars=6000, session_id="warm-up")
        runs = []
        for i in range(50):
            t0 = time.perf_counter()
            session_block(str(repo), max_chars=6000, session_id=f"in-process-{i}")
            runs.append((time.perf_counter() - t0) * 1000)
        out.append(statistics.median(runs))
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--files", type=int, default=50_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "r1"
        tree = make_tree(small, 500)
        print(f"runs per command: {args.runs}; medians in ms, ratio to the bare interpreter")
        for n in (100, 1000, 5000):
            kb_root = Path(tmp) / f"kb{n}"
            fill(kb_root, n, tree)
            fill(Path(str(kb_root) + "-plain"), n, tree, anchored=False)
            measure(f"{n:>5} notes, 500-file tree", kb_root, small, Path(tmp) / "home", args.runs)
        big = Path(tmp) / "big" / "r1"
        t0 = time.perf_counter()
        big_tree = make_tree(big, args.files)
        print(f"({args.files} files written in {time.perf_counter() - t0:.1f} s)")
        kb_root = Path(tmp) / "kb-big"
        fill(kb_root, 5000, big_tree)
        fill(Path(str(kb_root) + "-plain"), 5000, big_tree, anchored=False)
        measure(
            f" 5000 notes, {args.files}-file tree", kb_root, big, Path(tmp) / "home2", args.runs
        )


if __name__ == "__main__":
    main()
