"""Anchors, measured: what they add to the add stage, and how many notes' anchors resolve.

1. **Time added to the add stage.** The real ``pipeline.run_add`` commits a plan of 12
   learnings (each naming paths and symbols, some that exist and some that do not — an
   absent symbol makes ``git grep`` read the whole tree, the worst case) into a real SQLite
   ledger and KB, three ways in the same run: with no repository (anchors skipped: the
   baseline), with this repository as the session's, and with a generated 50,000-file git
   repository. Printed: the median add time of each and its ratio to the baseline, the
   anchors each found, and the anchor step alone (``kb.anchors.find_anchors``) per learning.
2. **Notes whose anchors resolve.** Every note of ``bench/data/notes.jsonl`` (title, rule,
   fix) against this repository: how many name any path or symbol at all, and how many
   resolve. Those notes were learned in six fictional repositories
   (``bench/data/recall_repos.json``), so against this one only the few that name code
   this repository also has can resolve; the figure says what a note from another
   repository anchors to here (nearly nothing, which is the point of checking anchors
   before telling a learning), not a hit rate.

Run: ``python bench/bench_anchors.py [--files 50000] [--reps 3] [--json]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def build_tree(root: Path, files: int) -> float:
    """A git repository of ``files`` small Python modules; returns the seconds it took."""
    started = time.perf_counter()
    for i in range(files):
        d = root / "src" / f"pkg{i // 500:03d}"
        if i % 500 == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i:05d}.py").write_text(
            f'"""Module {i}."""\n\n\ndef func_{i}(x):\n    return x + {i}\n', encoding="utf-8"
        )
    (root / "Makefile").write_text("test:\n\tpytest\n", encoding="utf-8")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, env=env)
    return time.perf_counter() - started


def learnings(kind: str, files: int) -> list[dict]:
    """Twelve learnings whose text names code of the repository ``kind`` (``self``/``tree``)."""
    if kind == "tree":
        last = files - 1
        named = [
            (f"src/pkg{last // 500:03d}/mod{last:05d}.py", f"func_{last}"),
            (f"mod{files // 2:05d}.py", f"func_{files // 2}"),
            ("Makefile", "NoSuchSymbolAnywhere"),
        ]
    else:
        named = [
            ("reflect_jobs/writer/prompt.py", "build_prompt"),
            ("actions.py", "plan_actions"),
            ("reflect_jobs.kb.anchors", "NoSuchSymbolAnywhere"),
        ]
    out = []
    for i in range(12):
        path, symbol = named[i % len(named)]
        out.append(
            {
                "title": f"Learning {i} about `{symbol}`",
                "category": "Tools",
                "key_insight": "",
                "problem": "",
                "root_cause": "",
                "fix": f"Edit {path} and call {symbol}() there; see ModelResult too",
                "rule": f"Keep {symbol} in {path} (case {i})",
                "confidence_num": 0.9,
                "tags": [],
                "entities": [],
                "causal_relations": [],
                "body": "## Context\nbench",
                "evidence": f"the person said to keep {symbol} where it is",
                "evidence_origin": "person",
                "scope": "repo",
            }
        )
    return out


class _Dispatcher:
    def schedule(self, stage: str, job_id: str, eta: object = None) -> None:
        pass

    def kb_changed(self) -> None:
        pass


def time_adds(
    home: Path, roots: dict[str, str | None], items: dict[str, list[dict]], reps: int
) -> dict:
    """Median seconds of ``run_add`` per variant (interleaved reps, fresh KB per add)."""
    import structlog
    from huey.storage import SqliteStorage

    # The runners log every transition; the figures are the output here.
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())

    from reflect_jobs import pipeline
    from reflect_jobs.config import load_settings
    from reflect_jobs.ledger.db import session_scope
    from reflect_jobs.ledger.models import Job, Learning
    from reflect_jobs.limits import Caps

    env = {
        "REFLECT_HOME": str(home),
        "GLOBAL_LEARNINGS_PATH": str(home / "kb"),
        "REFLECT_INDEX_VECTORS": "0",
        "REFLECT_DRAIN_SKIP_REINDEX": "1",
        "HOME": str(home),
    }
    settings = load_settings(env)
    settings.home.mkdir(parents=True, exist_ok=True)
    caps = Caps(
        SqliteStorage("b", filename=str(home / "q.db")), daily_max=1, run_max=1, window_sec=600
    )
    times: dict[str, list[float]] = {name: [] for name in roots}
    found: dict[str, int] = {}
    for rep in range(reps):
        for name, root in roots.items():
            kb_dir = home / f"kb-{name}-{rep}"
            rt = pipeline.Runtime(
                settings=dataclasses.replace(settings, kb_path=kb_dir),
                dispatcher=_Dispatcher(),
                caps=caps,
                worker="bench",
            )
            job_id = uuid.uuid4().hex[:16]
            creates = [{**x, "title": f"{x['title']} ({name} {rep})"} for x in items[name]]
            with session_scope(settings.db_url) as s:
                s.add(
                    Job(
                        id=job_id,
                        harness="claude",
                        session_id=f"bench-{name}-{rep}",
                        transcript_path=str(home / "t.jsonl"),
                        stage="add",
                        state="queued",
                        actions={
                            "creates": creates,
                            "updates": [],
                            "deletes": [],
                            "notes": [],
                            "writer": "claude",
                        },
                        prepare_stats={"repo": {"key": "bench", "root": root, "cwd": root}},
                        result={"outcome": "ok"},
                    )
                )
            started = time.perf_counter()
            pipeline.run_add(rt, job_id)
            times[name].append(time.perf_counter() - started)
            with session_scope(settings.db_url, readonly=True) as s:
                rows = s.query(Learning).filter(Learning.created_by_job == job_id).all()
                assert len(rows) == len(creates), (name, len(rows))
                found[name] = sum(len(r.anchors or []) for r in rows)
    return {
        name: {"median_sec": statistics.median(v), "anchors": found[name]}
        for name, v in times.items()
    }


def anchor_step(root: str, items: list[dict]) -> dict:
    from reflect_jobs.kb.anchors import find_anchors

    per = []
    for learning in items:
        started = time.perf_counter()
        find_anchors(learning, root)
        per.append(time.perf_counter() - started)
    return {
        "median_ms": round(1000 * statistics.median(per), 1),
        "max_ms": round(1000 * max(per), 1),
    }


def notes_share() -> dict:
    from reflect_jobs.kb.anchors import candidates, find_anchors

    notes = [
        json.loads(x)
        for x in (ROOT / "bench/data/notes.jsonl").read_text().splitlines()
        if x.strip()
    ]
    named = resolved = 0
    examples: list[str] = []
    started = time.perf_counter()
    for note in notes:
        fields = [note.get(k) or "" for k in ("title", "rule", "fix")]
        c = candidates(fields)
        if c.paths or c.symbols or c.weak or c.modules:
            named += 1
        got = find_anchors({"title": fields[0], "rule": fields[1], "fix": fields[2]}, str(ROOT))
        if got:
            resolved += 1
            if len(examples) < 8:
                examples.append(f"{note['slug']}: {got}")
    return {
        "notes": len(notes),
        "naming_code": named,
        "resolved_here": resolved,
        "share_resolved": round(resolved / len(notes), 3),
        "share_of_naming": round(resolved / named, 3) if named else 0.0,
        "examples": examples,
        "sec_all_notes": round(time.perf_counter() - started, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-anchors-") as tmp:
        base = Path(tmp)
        tree = base / "tree"
        tree.mkdir()
        build_sec = build_tree(tree, args.files)
        items = {
            "none": learnings("self", args.files),
            "self": learnings("self", args.files),
            "tree": learnings("tree", args.files),
        }
        roots: dict[str, str | None] = {"none": None, "self": str(ROOT), "tree": str(tree)}
        adds = time_adds(base / "home", roots, items, args.reps)
        base_sec = adds["none"]["median_sec"]
        out = {
            "tree_files": args.files,
            "tree_build_sec": round(build_sec, 1),
            "add": {
                name: {
                    "median_ms": round(1000 * v["median_sec"], 1),
                    "ratio_to_no_anchors": round(v["median_sec"] / base_sec, 2),
                    "added_ms": round(1000 * (v["median_sec"] - base_sec), 1),
                    "anchors_found": v["anchors"],
                }
                for name, v in adds.items()
            },
            "anchor_step_per_learning": {
                "self": anchor_step(str(ROOT), items["self"]),
                "tree": anchor_step(str(tree), items["tree"]),
            },
            "notes_jsonl": notes_share(),
        }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(
        f"50,000-file tree: {out['tree_files']} files, built and git-added in {out['tree_build_sec']} s"
    )
    print("add stage, 12 learnings (median of reps; fresh KB per add):")
    for name, label in (
        ("none", "no repository (baseline)"),
        ("self", "this repository"),
        ("tree", f"{args.files}-file tree"),
    ):
        v = out["add"][name]
        print(
            f"  {label:<26} {v['median_ms']:>8.1f} ms  x{v['ratio_to_no_anchors']:<5} "
            f"(+{v['added_ms']} ms)  anchors {v['anchors_found']}"
        )
    for name, v in out["anchor_step_per_learning"].items():
        print(
            f"  anchor step alone, {name}: median {v['median_ms']} ms, max {v['max_ms']} ms per learning"
        )
    n = out["notes_jsonl"]
    print(
        f"bench/data/notes.jsonl: {n['notes']} notes, {n['naming_code']} name a path or symbol, "
        f"{n['resolved_here']} resolve against this repository ({n['share_resolved']:.1%} of all, "
        f"{n['share_of_naming']:.1%} of those naming code) in {n['sec_all_notes']} s"
    )
    for line in n["examples"]:
        print(f"  {line}")


if __name__ == "__main__":
    main()
