"""CLI search with a worker up: hybrid vs lexical, scoped (``--repo``) and not (issue 25 item 3).

Run: .venv/bin/python bench/bench_search_worker.py [--notes 300] [--repeat 5]

Each figure is a whole ``reflect-jobs search`` process, timed in this run; the ratios are
against the same run's lexical search of the same scope (target: hybrid ≤ 2.5× lexical,
scoped or not). Which path answered is read from drain.log (``search_answered``/``via``):
every hybrid search must say ``worker`` — a scoped one used to load the model in-process.
The KB is ``bench_warm.py``'s cached corpus KB (``bench/out/warm-kb-<n>``, built once).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from bench_warm import QUERY, base_env, cached_kb, med, timed_cli, via_counts, worker  # noqa: E402


def fake_checkout(path: Path) -> Path:
    """A directory a reader of ``.git`` takes for a checkout of github.com/bench/app."""
    (path / ".git").mkdir(parents=True)
    (path / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = https://github.com/bench/app.git\n'
    )
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notes", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cache = cached_kb(args.notes, False)
    tmp = Path(tempfile.mkdtemp(prefix="rjsearchw"))
    try:
        kb_path, home = tmp / "kb", tmp / "home"
        shutil.copytree(cache, kb_path)
        repo = fake_checkout(tmp / "app")
        env = base_env(home, kb_path, 600)
        timed_cli(env, "reindex", "--json")  # settle this copy's manifest
        scopes = {"unscoped": [], "scoped": ["--repo", str(repo)]}
        out: dict[str, dict[str, float]] = {}
        with worker(env):
            timed_cli(env, "search", QUERY, "--json")  # the model child starts here
            time.sleep(1)
            for name, extra in scopes.items():
                row = {}
                for mode in ("lexical", "hybrid"):
                    argv = ["search", QUERY, "--mode", mode, "--json", *extra]
                    row[mode] = med([timed_cli(env, *argv) for _ in range(args.repeat)])
                out[name] = row
        vias = via_counts(home)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"KB: {args.notes} notes, worker up, medians of {args.repeat} CLI processes each\n")
    print("| scope | lexical | hybrid (worker) | hybrid / lexical |")
    print("|---|---:|---:|---:|")
    for name, row in out.items():
        ratio = row["hybrid"] / row["lexical"]
        print(f"| {name} | {row['lexical']:.2f} s | {row['hybrid']:.2f} s | {ratio:.2f}x |")
    print(f"\nsearches answered per path (drain.log): {vias} (target: every hybrid via worker)")


if __name__ == "__main__":
    main()
