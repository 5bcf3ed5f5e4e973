"""Build the recall benchmark's KB and fake checkouts with the product's own writer and commands.

Kept apart from the harness so the building (what the product is given) and the measuring
(what it answers) are read separately. Everything goes under one temporary directory:
``kb/`` (``$GLOBAL_LEARNINGS_PATH``), ``home/`` (``$REFLECT_HOME``: no worker socket there,
so the CLI answers in-process) and ``repos/<owner>__<name>/`` — one tiny git checkout per
repository with its origin URL, manifest files and a few files of its top extensions, from
which the product computes the repository key (and, later, its profile).
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner
from recall_eval_data import Dataset, Learning, strength_of

from reflect_jobs import kb
from reflect_jobs.cli import main as cli_main
from reflect_jobs.index import maintenance


def env_for(root: Path, *, vectors: bool) -> dict[str, str]:
    """The environment every product call of one scale runs under (set on ``os.environ``)."""
    return {
        "GLOBAL_LEARNINGS_PATH": str(root / "kb"),
        "REFLECT_HOME": str(root / "home"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "REFLECT_INDEX_VECTORS": "1" if vectors else "0",
        "REFLECT_RECALL_ON_PROMPT": "1",
    }


def write_notes(learnings: list[Learning], kb_root: Path, now: datetime) -> dict[str, str]:
    """Write every learning through ``kb.write_learning``; return benchmark id -> note id.

    Ages are counted back from ``now`` (so the recency term of the ranking does not drift
    with the calendar); a proof count above 1 is recorded the way an UPDATE records it
    (``kb.bump_note``). ``applies_to`` goes into the frontmatter and the tags.
    """
    ids: dict[str, str] = {}
    for learning in learnings:
        proof, confidence, age = strength_of(learning.id)
        when = (now - timedelta(days=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = learning.as_learning()
        body["confidence_num"] = confidence
        nf = kb.write_learning(
            kb_root,
            body,
            created=when,
            updated=when,
            source_path=f"/bench/sessions/{learning.id}.jsonl",
            session_id=learning.id,
            extra={"applies_to": learning.applies_to},
        )
        if proof > 1:
            kb.bump_note(nf.path, source="/bench/sessions/again.jsonl", proof_count=proof, now=when)
        if nf.id in ids.values():
            raise SystemExit(f"two benchmark learnings map to one note id: {learning.id}")
        ids[learning.id] = nf.id
    return ids


def reindex(kb_root: Path, *, vectors: bool) -> dict:
    """``reflect-jobs reindex --json`` (the product's command), then the community pass.

    The worker re-clusters communities every 30 minutes; a settled KB has them, and the
    ``global`` search mode reads their reports, so the benchmark runs that pass too.
    """
    result = CliRunner().invoke(cli_main, ["reindex", "--json"], catch_exceptions=False)
    if result.exit_code != 0:
        raise SystemExit(f"reindex failed ({result.exit_code}): {result.output[-2000:]}")
    stats = json.loads(result.stdout)
    if vectors:
        maintenance.rebuild_communities(kb_root, vectors=True)
    return stats


def fake_repo(root: Path, key: str, repo: dict) -> Path:
    """A checkout of ``key`` (``host/owner/name``): ``.git/config`` with its origin, manifests,
    and one empty file per 5 % share of each top extension (at least one)."""
    host, path = key.split("/", 1)
    d = root / "repos" / path.replace("/", "__")
    (d / ".git").mkdir(parents=True, exist_ok=True)
    (d / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (d / ".git" / "config").write_text(
        f'[core]\n\trepositoryformatversion = 0\n[remote "origin"]\n\turl = https://{host}/{path}.git\n'
    )
    for name, text in repo.get("manifests", {}).items():
        target = d / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    for ext, share in repo.get("extensions", {}).items():
        for i in range(max(1, round(share / 5))):
            f = d / "src" / f"file{i}{ext}"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.touch()
    return d


def build(ds: Dataset, scale: str, root: Path, *, vectors: bool) -> tuple[dict, dict, dict]:
    """Write the scale's KB, reindex it, and create every repository's checkout.

    Returns:
        (benchmark id -> note id, repository key -> checkout, phase timings and reindex stats)
    """
    learnings = ds.learnings(scale)
    now = datetime.now(UTC).replace(microsecond=0)
    t0 = time.perf_counter()
    ids = write_notes(learnings, root / "kb", now)
    t1 = time.perf_counter()
    stats = reindex(root / "kb", vectors=vectors)
    t2 = time.perf_counter()
    dirs = {key: fake_repo(root, key, repo) for key, repo in ds.repos.items()}
    info = {
        "notes": len(learnings),
        "repos_with_learnings": len({x.repo for x in learnings if x.repo}),
        "write_s": round(t1 - t0, 1),
        "reindex_s": round(t2 - t1, 1),
        "reindex": {k: stats.get(k) for k in ("notes", "inserted", "graph")},
    }
    return ids, dirs, info


def apply_env(env: dict[str, str]) -> dict[str, str | None]:
    """Set ``env`` on ``os.environ``; return what to restore (the hook reads os.environ)."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    return old


def restore_env(old: dict[str, str | None]) -> None:
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
