"""Staleness: learnings anchored at an old commit, verified at later ones (issue 23 item 1).

Run: .venv/bin/python bench/bench_staleness.py

The history is that of a real public project, pallets/markupsafe (BSD-3-Clause): the file
tree and the functions/classes defined in each code file at three commits — 2018-10-19,
before the package moved under ``src/``; 2020-01-29, after the move, ``_compat.py``
deleted; 2025-06-14, ``_constants.py`` and the ``bench/`` scripts gone, ``tox.ini`` and
``requirements/`` gone, tests added — are stored in ``bench/data/staleness_markupsafe.json``
(extracted from a clone with ``git ls-tree``/``git show``; no source text is kept, only
paths and names). No network at run time: the script rebuilds that history as a real git
repository in a temporary directory, one commit per snapshot, each code file holding its
real function names (bodies are stubs).

At the first commit a learning is written per code file (naming the file and its first
function) and per pair of neighbouring code files (naming both), plus one per other
file (naming its path); their anchors are found by the real anchor finder
(``kb/anchors.py:find_anchors``) in that checkout. Then each later commit is checked out and
every learning verified (``recall/verify.py:verdict``). The truth comes from git, not from
the file system the verifier reads: a learning is *stale* when none of its anchored paths
is in ``git ls-tree`` of that commit. Reported: stale learnings withheld (target: all) and
valid learnings wrongly withheld (target: 0), and how many valid ones are told marked
``partial``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reflect_jobs.kb.anchors import find_anchors  # noqa: E402
from reflect_jobs.recall import verify  # noqa: E402

DATA = ROOT / "bench" / "data" / "staleness_markupsafe.json"
CODE = (".py", ".c")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def body(path: str, symbols: list[str]) -> str:
    if path.endswith(".py"):
        return "".join(f"def {s}(*args):\n    return None\n\n" for s in symbols) or "# empty\n"
    if path.endswith(".c"):
        return "".join(f"static int {s}(void) {{ return 0; }}\n" for s in symbols) or "/* */\n"
    return f"placeholder for {path}\n"


def build(repo: Path, snapshots: list[dict]) -> list[str]:
    """One commit per snapshot (files added, changed and deleted as in the real history)."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    shas = []
    for snap in snapshots:
        for old in git(repo, "ls-files").split():
            if old not in snap["tree"]:
                git(repo, "rm", "-q", old)
        for path, symbols in snap["tree"].items():
            f = repo / path
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(body(path, symbols))
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", snap["label"])
        shas.append(git(repo, "rev-parse", "HEAD").strip())
    return shas


def learnings(tree: dict[str, list[str]]) -> list[dict]:
    code = [(p, s) for p, s in sorted(tree.items()) if p.endswith(CODE) and s]
    out = []
    for path, symbols in code:
        out.append({"title": f"`{symbols[0]}` in {path} handles the escaping case", "rule": ""})
    for (a, _), (b, _) in zip(code, code[1:], strict=False):
        out.append({"title": f"Change {a} and {b} together", "rule": ""})
    for path in sorted(p for p in tree if not p.endswith(CODE)):
        out.append({"title": f"Keep {path} in step with the release", "rule": ""})
    return out


def main() -> None:
    data = json.loads(DATA.read_text())
    snaps = data["snapshots"]
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "markupsafe"
        shas = build(repo, snaps)
        git(repo, "checkout", "-q", shas[0])
        items = learnings(snaps[0]["tree"])
        for item in items:
            item["anchors"] = find_anchors(item, str(repo))
        anchored = [i for i in items if i["anchors"]]
        print(
            f"{data['source']} ({data['licence']}): {len(items)} learnings written at "
            f"{snaps[0]['label']}, {len(anchored)} with anchors"
        )
        print(
            "| checked out at | stale (truth) | withheld of them | valid | wrongly withheld "
            "| valid told partial |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for snap, sha in zip(snaps, shas, strict=True):
            git(repo, "checkout", "-q", sha)
            present = set(git(repo, "ls-tree", "-r", "--name-only", sha).split())
            stale = withheld = valid = wrong = partial = 0
            for item in anchored:
                truth_stale = not any(a["path"] in present for a in item["anchors"])
                v = verify.verdict(str(repo), item["anchors"], verify.MemoryCache())
                if truth_stale:
                    stale += 1
                    withheld += v.status == verify.STALE
                else:
                    valid += 1
                    wrong += v.status == verify.STALE
                    partial += v.status == verify.PARTIAL
            print(f"| {snap['label']} | {stale} | {withheld} | {valid} | {wrong} | {partial} |")


if __name__ == "__main__":
    main()
