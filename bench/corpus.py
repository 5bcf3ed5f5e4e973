"""The retrieval benchmarks' corpus: natural notes, labelled queries, and how it is scaled.

A helper module for ``bench_kb.py`` and ``bench_index.py``, not a benchmark itself.

``bench/data/notes.jsonl`` holds hand-written learnings of the kind a coding agent's KB
collects (SQLite and PostgreSQL locking, Redis, git, Docker, asyncio, pytest, packaging, CI,
HTTP clients, logging, security, shell, Linux, JavaScript, Rust/Go, pandas, job queues, team
process, time and text encoding, SQLAlchemy, Kubernetes…), each one a different lesson with
its own title, key insight, problem, root cause, fix, rule, tags, entities and, for some, a
causal relation. ``bench/data/retrieval_queries.jsonl`` holds queries written separately from
the notes, each describing one note's situation in other words (they share product names
and error messages with it, as real searches do), labelled with that note's ``slug``.

A KB larger than the hand-written set is filled with *variations*: the same lesson recorded
again for another project, as an un-deduplicated KB accumulates it — the project's name is
added to the title, the problem and the tags, and every other variation drops the root
cause; the rest is the original note's text. Only notes that no query targets are varied,
so every query keeps exactly one right answer while the larger KBs hold many near-duplicate
notes on the same topics (which makes them harder for every search mode alike).
"""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
NOTES = DATA / "notes.jsonl"
QUERIES = DATA / "retrieval_queries.jsonl"

PROJECTS = [
    "billing service",
    "search indexer",
    "mobile API",
    "analytics pipeline",
    "admin dashboard",
    "payments gateway",
    "notification worker",
    "warehouse loader",
    "auth service",
    "release tooling",
    "customer portal",
    "inventory sync",
    "recommendation engine",
    "support inbox",
    "data export job",
    "feature-flag service",
    "checkout frontend",
    "geo lookup service",
    "document renderer",
    "audit log service",
    "partner webhooks",
    "ML training jobs",
    "image thumbnailer",
    "email sender",
    "reporting backend",
    "scheduler service",
    "config service",
    "chat backend",
    "metrics collector",
    "onboarding flow",
    "pricing engine",
    "fraud checks",
    "CRM integration",
    "CLI installer",
    "docs site build",
    "internal SDK",
    "ETL cron jobs",
    "video transcoder",
    "shipping labels service",
    "tenant provisioning",
]


def _load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def load_notes() -> list[dict]:
    """The hand-written notes, in file order (each has a unique ``slug``)."""
    return _load(NOTES)


def load_queries() -> list[dict]:
    """The labelled queries: ``{"query": text, "note": slug of the one right note}``."""
    return _load(QUERIES)


def variation(note: dict, k: int) -> dict:
    """The ``k``-th re-recording of ``note`` for another project (see the module docstring).

    Args:
        note: a hand-written note from :func:`load_notes`.
        k: which variation (0, 1, …); the project cycles through ``PROJECTS``.

    Returns:
        A new learning dict with its own ``slug`` and title (so its own note id).
    """
    project = PROJECTS[k % len(PROJECTS)]
    round_ = k // len(PROJECTS)
    label = project if round_ == 0 else f"{project}, again ({round_ + 1})"
    out = dict(note)
    out["slug"] = f"{note['slug']}~{k}"
    out["title"] = f"{note['title']} ({label})"
    out["problem"] = f"Seen in the {project}: {note['problem']}"
    out["tags"] = [*note.get("tags", []), project.replace(" ", "-").lower()]
    if k % 2 and "root_cause" in out:
        del out["root_cause"]
    return out


def corpus(n: int) -> list[dict]:
    """``n`` learnings: every query target first, then other notes, then variations.

    Args:
        n: KB size; at least the number of distinct query targets.

    Returns:
        The learnings to write, each with a ``slug`` (a query's ``note`` for targets).

    Raises:
        ValueError: when ``n`` is smaller than the number of query targets.
    """
    notes = load_notes()
    targets = {q["note"] for q in load_queries()}
    unknown = targets - {x["slug"] for x in notes}
    if unknown:
        raise ValueError(f"queries label notes that do not exist: {sorted(unknown)}")
    if n < len(targets):
        raise ValueError(f"a KB of {n} notes cannot hold the {len(targets)} query targets")
    first = [x for x in notes if x["slug"] in targets]
    others = [x for x in notes if x["slug"] not in targets]
    out = (first + others)[:n]
    k = 0
    while len(out) < n:
        out.append(variation(others[k % len(others)], k // len(others)))
        k += 1
    return out


def extra_notes(count: int) -> list[dict]:
    """``count`` more notes for "+1 note" measurements: variations no corpus size contains."""
    targets = {q["note"] for q in load_queries()}
    others = [x for x in load_notes() if x["slug"] not in targets]
    return [variation(others[j % len(others)], 10_000 + j) for j in range(count)]


def extra_note() -> dict:
    """One more note for a "+1 note" measurement (the first of :func:`extra_notes`)."""
    return extra_notes(1)[0]


def learning(note: dict) -> dict:
    """The learning dict as the writer would hand it to ``kb.write_learning`` (no slug)."""
    return {key: value for key, value in note.items() if key != "slug"}
