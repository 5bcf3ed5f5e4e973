"""Fast writers of hostile inputs for issue 24's red-team tests and ``bench_hostile_store.py``.

Big reflection logs (100,000 or 1,000,000 valid events, written as text — the store's own
writer redacts and fsyncs every line, far too slow to make a million), a single-line
transcript of any size, and a knowledge base of N notes cloned from one template. Standard
library only; imported by ``tests/test_redteam_store.py`` and the bench.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

#: One learning note as ``kb.write_learning`` writes it (ids and texts are substituted).
NOTE = """---
type: learning
id: {id}
created: "2026-11-30T00:00:00Z"
updated: "2026-11-30T00:00:00Z"
scope: global
confidence: medium
confidence_num: 0.6
learning_type: bug-fix
title: "{title}"
tags: []
key_insight: "{insight}"
problem: ""
root_cause: ""
fix: ""
rule: "{title}"
category: "Tools"
entities: []
causal_relations: []
source_path: t
session_id: s
status: active
---

## Problem


## Solution


## Context
"""


def event_line(**event: object) -> str:
    """One log line as the store writes it (keys sorted, no spaces), ``v`` 1 added.

    Args:
        **event: The event's keys (``eid``, ``uid``, ``ts``, ``host``, ``op``…).

    Returns:
        The JSON text, without its newline.
    """
    return json.dumps({"v": 1, **event}, separators=(",", ":"), sort_keys=True)


def write_log(
    path: Path,
    n: int,
    *,
    host: str | None = None,
    edits_per_item: int = 1,
    body: str = "some body text to make the line realistic",
    start: datetime | None = None,
) -> int:
    """Write ``n`` valid events to the host log ``path``: adds, each followed by edits.

    Args:
        path: ``<memory home>/reflections/<host>.jsonl`` (created with its directories).
        n: How many events.
        host: The events' host; default the file's stem (a log that speaks for its host).
        edits_per_item: Edits after each add (items = n / (1 + edits_per_item)).
        body: Each add's body.
        start: The first event's time; default 30 days ago (in the past: nothing clamped).

    Returns:
        The size of the file in bytes.
    """
    host = host or path.stem
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = start or (datetime.now(UTC) - timedelta(days=30))
    salt = hashlib.sha256(host.encode()).hexdigest()[:4]
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            item = i // (1 + edits_per_item)
            uid = hashlib.blake2b(f"{host}/{item}".encode(), digest_size=8).hexdigest()
            ts = (t0 + timedelta(microseconds=i * 1000)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            common = {"eid": f"{salt}{i:012x}", "uid": uid, "ts": ts, "host": host}
            if i % (1 + edits_per_item) == 0:
                line = event_line(
                    **common,
                    op="add",
                    by="reflector",
                    kind="action",
                    title=f"Item {item} about the retry budget",
                    body=body,
                )
            else:
                line = event_line(**common, op="edit", by="reflector", body=f"edited {i}")
            fh.write(line + "\n")
    return path.stat().st_size


def single_line_transcript(path: Path, chars: int) -> int:
    """A Claude Code transcript that is one user record of ``chars`` characters, no newline.

    Args:
        path: Where to write it.
        chars: The size of the one message.

    Returns:
        The file's size in bytes.
    """
    record = {
        "type": "user",
        "sessionId": "s-big",
        "timestamp": "2026-11-01T10:00:00Z",
        "message": {"role": "user", "content": "Z" * chars},
    }
    path.write_text(json.dumps(record), encoding="utf-8")
    return path.stat().st_size


def write_notes(root: Path, n: int) -> None:
    """``n`` learning notes in ``root/documents`` (a KB the reindex reads).

    Args:
        root: The KB root.
        n: How many notes.
    """
    docs = root / "documents"
    docs.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        nid = f"lrn-note-{i:06d}-{i * 7919 % 999983:06x}"
        text = NOTE.format(
            id=nid,
            title=f"Learning number {i} about retries {i % 97}",
            insight=f"insight {i} on caching layer {i % 31} and connection pools",
        )
        (docs / f"{nid}.md").write_text(text, encoding="utf-8")
