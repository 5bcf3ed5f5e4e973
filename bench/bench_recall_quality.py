"""Recall quality: is a new session told the learnings it needs?

Run: .venv/bin/python bench/bench_recall_quality.py [--json]

A KB of the 241 natural notes of ``bench/data/notes.jsonl``, scoped to six fictional
repositories (and global) by the hand-written ``bench/data/recall_repos.json``, is built with
the real add-stage writer and a real (lexical) reindex, which fills the context store. Each of
the 52 situations of ``bench/data/recall_situations.jsonl`` — a repository and the first
prompt of a new session, with the learnings that session should be told — is then asked:

* the SessionStart context block for that repository (what the hook injects): recall of the
  expected learnings among all of the block's items and among its first 5, and the
  characters injected;
* MCP ``search`` (the tool's own function, lexical, filtered to the repository): hit@5;
* per-prompt recall (``REFLECT_RECALL_ON_PROMPT=1``): hit@3 and how often anything is added.

Situations are split by a hash of their id into ``dev`` and ``test``; nothing in the ranking
was tuned on either (its weights were fixed before the set was written), and both are shown.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reflect_jobs import kb  # noqa: E402
from reflect_jobs.index import maintenance  # noqa: E402
from reflect_jobs.recall import tools  # noqa: E402
from reflect_jobs.recall.mcp_scope import ServerScope  # noqa: E402
from reflect_jobs.recall.prompt_hook import prompt_context  # noqa: E402
from reflect_jobs.recall.session_start import session_context  # noqa: E402

DATA = ROOT / "bench" / "data"


def split_of(situation_id: str) -> str:
    return "test" if int(hashlib.sha1(situation_id.encode()).hexdigest(), 16) % 2 else "dev"


def build_kb(root: Path) -> tuple[dict[str, str], dict[str, Path]]:
    """Write every note with its scope and proof; return slug -> id and repo key -> dir."""
    notes = [json.loads(x) for x in (DATA / "notes.jsonl").read_text().splitlines() if x.strip()]
    spec = json.loads((DATA / "recall_repos.json").read_text())
    where = {s: key for key, r in spec["repos"].items() for s in r["notes"]}
    proof = {
        **spec["global_proof"],
        **{s: n for r in spec["repos"].values() for s, n in r["proof"].items()},
    }
    ids: dict[str, str] = {}
    for i, note in enumerate(notes):
        slug = note["slug"]
        learning = {k: v for k, v in note.items() if k != "slug"}
        learning["confidence_num"] = 0.7
        learning["scope"] = "repo" if slug in where else "global"
        if slug in where:
            learning["repo"] = where[slug]
        day = f"2026-11-{1 + i % 28:02d}T10:00:00Z"
        nf = kb.write_learning(
            root / "kb",
            learning,
            created=day,
            updated=day,
            source_path=f"/t/{slug}.jsonl",
            session_id=slug,
        )
        if proof.get(slug, 1) > 1:
            kb.bump_note(nf.path, source="/t/again.jsonl", proof_count=proof[slug], now=day)
        ids[slug] = nf.id
    maintenance.reindex(root / "kb", vectors=False)
    dirs: dict[str, Path] = {}
    for key in [*spec["repos"], "github.com/acme/new-service"]:
        d = root / "repos" / key.rsplit("/", 1)[-1]
        (d / ".git").mkdir(parents=True)
        (d / ".git" / "config").write_text(
            f'[remote "origin"]\n\turl = git@{key.replace("/", ":", 1)}.git\n'
        )
        dirs[key] = d
    return ids, dirs


def items(block: str) -> list[str]:
    return [line.split("]", 1)[0][3:] for line in block.splitlines() if line.startswith("- [")]


def recall(expected: list[str], got: list[str]) -> float:
    return sum(1 for e in expected if e in got) / len(expected)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    situations = [
        json.loads(x) for x in (DATA / "recall_situations.jsonl").read_text().splitlines() if x
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ids, dirs = build_kb(root)
        kb_root = root / "kb"
        rows = []
        for s in situations:
            want = [ids[e] for e in s["expected"]]
            cwd = str(dirs[s["repo"]])
            block = session_context(cwd, max_chars=6000, kb_root=str(kb_root))
            told = items(block)
            # as the MCP server started in that repository searches it (a server reads its
            # own repository and the global learnings, issue 24 item 4)
            found = tools.search_tool(
                kb_root,
                s["prompt"],
                k=5,
                mode="lexical",
                vectors=False,
                scope=ServerScope.here(cwd),
            )
            hits = [json.loads(x)["id"] for x in found.splitlines() if x.startswith("{")]
            per_prompt = items(
                prompt_context(cwd, s["prompt"], max_chars=2000, kb_root=str(kb_root))
            )
            rows.append(
                {
                    "id": s["id"],
                    "split": split_of(s["id"]),
                    "context_recall": recall(want, told),
                    "context_recall_at5": recall(want, told[:5]),
                    "context_chars": len(block),
                    "context_items": len(told),
                    "search_hit5": recall(want, hits[:5]),
                    "prompt_hit3": recall(want, per_prompt[:3]),
                    "prompt_fired": bool(per_prompt),
                    "prompt_precision": (
                        sum(1 for x in per_prompt if x in want) / len(per_prompt)
                        if per_prompt
                        else None
                    ),
                }
            )
    report = {}
    for split in ("dev", "test", "all"):
        sel = [r for r in rows if split == "all" or r["split"] == split]
        prec = [r["prompt_precision"] for r in sel if r["prompt_precision"] is not None]
        report[split] = {
            "situations": len(sel),
            "context_recall": round(statistics.mean(r["context_recall"] for r in sel), 3),
            "context_recall_at5": round(statistics.mean(r["context_recall_at5"] for r in sel), 3),
            "search_hit_at5": round(statistics.mean(r["search_hit5"] for r in sel), 3),
            "prompt_hit_at3": round(statistics.mean(r["prompt_hit3"] for r in sel), 3),
            "prompt_fired_rate": round(sum(r["prompt_fired"] for r in sel) / len(sel), 3),
            "prompt_precision": round(statistics.mean(prec), 3) if prec else None,
            "chars_injected_mean": round(statistics.mean(r["context_chars"] for r in sel)),
            "chars_injected_max": max(r["context_chars"] for r in sel),
            "items_told_mean": round(statistics.mean(r["context_items"] for r in sel), 1),
        }
    if args.json:
        print(json.dumps({"report": report, "rows": rows}, indent=2))
        return
    print(f"{len(ids)} notes, {len(situations)} situations (split by a hash of their id)")
    keys = list(report["all"])
    print(f"{'':24}" + "".join(f"{s:>10}" for s in report))
    for k in keys:
        print(f"{k:24}" + "".join(f"{str(report[s][k]):>10}" for s in report))


if __name__ == "__main__":
    main()
