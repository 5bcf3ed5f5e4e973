"""One search over every memory: its cost at 1,000 memory files, and its bound at 100,000.

Run: .venv/bin/python bench/bench_memory_search.py [--files 1000] [--huge 100000] [--runs 20]

A temporary home with one repository (200 items), Claude Code's project memory of
``--files`` markdown files (~2 KB each, a tenth mention the query) and Codex's memories (50
files). Measured in one run, in-process (``Store``, what ``reflections search`` calls):

* **items only** — ``Store.search`` (the baseline: what the search did before);
* **memories, first** — ``Store.memory_search`` on a cold index (every file read once);
* **memories, warm** — the same again: a stat of each file, nothing read, then the query;
* **memories, one changed** — one file rewritten between searches (one file read again);
* **huge directory** — a memory directory of ``--huge`` files plus a sparse 1 GB
  ``MEMORY.md``: the first refresh (bounded: 2,000 files indexed, the rest only listed, the
  1 GB file skipped unread) and a warm one.

Prints the median milliseconds of each and the ratio to the items-only search.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORDS = "alpha beta gamma delta sqlite checkpoint deploy retry budget importer cache tenant"


def _ms(fn) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def main() -> int:
    """Build the home, time the searches, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--huge", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # the huge directory's skip is logged every refresh
    with tempfile.TemporaryDirectory(prefix="rj-bench-mem-") as tmp:
        root = Path(tmp)
        os.environ.update(
            REFLECT_HOME=str(root / "home"),
            GLOBAL_LEARNINGS_PATH=str(root / "kb"),
            CLAUDE_CONFIG_DIR=str(root / "claude"),
            CODEX_HOME=str(root / "codex"),
            HOME=str(root / "user"),
        )
        from reflect_jobs.reflections import memories
        from reflect_jobs.reflections.store import open_store

        repo = root / "shop"
        (repo / ".git").mkdir(parents=True)
        (repo / ".git" / "config").write_text('[remote "origin"]\n\turl = git@x:a/shop.git\n')
        project = root / "claude" / "projects" / memories.claude_project_name(str(repo))
        mem = project / "memory"
        mem.mkdir(parents=True)
        words = WORDS.split()
        for n in range(args.files):
            extra = " quokka migration" if n % 10 == 0 else ""
            body = "\n".join(  # ~2 KB of markdown: 25 lines of 12 words
                "- " + " ".join(words[(n + i + j) % len(words)] for j in range(12))
                for i in range(25)
            )
            (mem / f"topic-{n:05d}.md").write_text(f"# Topic {n}\n\n{body}{extra}\n")
        codex = root / "codex" / "memories"
        codex.mkdir(parents=True)
        for n in range(50):
            (codex / f"summary-{n}.md").write_text(f"# Summary {n}\n{WORDS}\n")
        store = open_store(str(repo), repo)
        for n in range(200):
            store.add("action", f"Item {n} about {words[n % len(words)]}", None)
        query = "quokka migration"
        rows: dict[str, list[float]] = {"items only (baseline)": []}
        rows["memories, first (cold index)"] = [_ms(lambda: store.memory_search(query, 5))]
        rows["memories, warm"] = []
        rows["memories, one file changed"] = []
        for n in range(args.runs):
            rows["items only (baseline)"].append(_ms(lambda: store.search(query, 5)))
            rows["memories, warm"].append(_ms(lambda: store.memory_search(query, 5)))
            (mem / "topic-00000.md").write_text(f"# Topic 0\n\nquokka migration run {n}\n")
            rows["memories, one file changed"].append(_ms(lambda: store.memory_search(query, 5)))
        hits = store.memory_search(query, 5)
        store.close()

        huge = root / "huge"
        huge.mkdir()
        for n in range(args.huge):
            (huge / f"h{n:06d}.md").write_text("x\n")
        with open(huge / "MEMORY.md", "wb") as fh:
            fh.truncate(1024**3)
        from reflect_jobs.reflections.index import ReflectionIndex

        index = ReflectionIndex(root / "huge-index.db")
        source = memories.Source("claude", "claude:/huge", str(huge))
        rows[f"huge dir ({args.huge:,} files + 1 GB), first"] = [
            _ms(lambda: memories.refresh(index._conn, source))
        ]
        rows[f"huge dir ({args.huge:,} files + 1 GB), warm"] = [
            _ms(lambda: memories.refresh(index._conn, source)) for _ in range(5)
        ]
        indexed = index._conn.execute("SELECT count(*) FROM memfiles").fetchone()[0]
        index.close()
    base = statistics.median(rows["items only (baseline)"])
    print(f"{args.files} Claude memory files + 50 Codex, 200 items; {len(hits)} hits, e.g.")
    print(f"  {hits[0]['file']}" if hits else "  (none)")
    print(f"huge directory: {indexed} files indexed (bound {memories.MAX_FILES})")
    print(f"{'search':<40} {'median ms':>9} {'× items only':>12}")
    for name, xs in rows.items():
        med = statistics.median(xs)
        print(f"{name:<40} {med:>9.1f} {med / base:>12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
