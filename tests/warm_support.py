"""Helpers for the warm-search tests: a real worker, its model child, the answer path."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

from support import running_worker, wait_for

from reflect_jobs import kb

NOW = "2026-11-30T00:00:00Z"
CHILD_MARK = "reflect_jobs.warm.child"


def notes(root: Path) -> None:
    for title, insight in (
        ("Pin the docker digest", "floating tags broke the build"),
        ("Quote FTS5 queries", "a hyphen in a docker tag raised a syntax error"),
    ):
        kb.write_learning(
            root,
            {"title": title, "category": "Tools", "key_insight": insight, "rule": title},
            created=NOW,
            updated=NOW,
            source_path="t",
            session_id="s",
        )


def answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(path))
            return True
        except OSError:
            return False


def children(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` and that run the model child."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if int(fields[1]) == pid and fields[0] != "Z" and CHILD_MARK in cmd:
                out.append(int(d))
    return out


def vias(env) -> list[str]:
    log = env.home / "drain.log"
    return [
        rec["via"]
        for rec in map(json.loads, log.read_text().splitlines())
        if rec.get("event") == "search_answered"
    ]


@contextlib.contextmanager
def worker(env) -> Iterator[subprocess.Popen[bytes]]:
    """A one-thread worker, yielded once its model socket answers."""
    with running_worker(env, 1) as proc:
        sock = env.home / "run" / "model.sock"
        wait_for(lambda: answers(sock), timeout=60, what="the worker's socket")
        yield proc
