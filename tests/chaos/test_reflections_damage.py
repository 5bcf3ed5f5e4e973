"""A damaged reflection index is rebuilt from the logs; a command never shows a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import BIN, Env

pytestmark = pytest.mark.chaos


def run(env: dict, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "reflections"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _garbage_pages(db: Path) -> None:
    data = bytearray(db.read_bytes())
    for start in range(4096, len(data), 4096):  # every page but the header's
        data[start : start + 512] = b"\xa5" * 512
    db.write_bytes(bytes(data))


def _items_pages_only(db: Path) -> None:
    """The logs table stays readable, so the stat-first refresh passes and a read fails."""
    import sqlite3

    with sqlite3.connect(db) as conn:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = [
            p
            for (p,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name IN ('items', 'items_repo', 'items_fts_data')"
            )
        ]
    conn.close()
    data = bytearray(db.read_bytes())
    for page in pages:
        start = (page - 1) * size
        data[start : start + size] = b"\xa5" * size
    db.write_bytes(bytes(data))


def _truncate(db: Path) -> None:
    db.write_bytes(db.read_bytes()[:6000])


def _all_garbage(db: Path) -> None:
    db.write_bytes(b"\x00garbage" * 4000)


@pytest.mark.parametrize("damage", [_garbage_pages, _items_pages_only, _truncate, _all_garbage])
def test_a_damaged_index_is_rebuilt_and_every_item_is_still_there(
    tmp_path: Path, env: Env, damage
) -> None:  # type: ignore[no-untyped-def]
    repo = tmp_path / "demo"
    (repo / ".git").mkdir(parents=True)
    ids = []
    for n in range(30):
        proc = run(
            env, repo, "add", "--kind", "action", "--title", f"item {n}", "--body", "b" * 300
        )
        assert proc.returncode == 0, proc.stderr
        ids.append(proc.stdout.strip())
    db = Path(env["REFLECT_HOME"]) / "reflections-index.db"
    for suffix in ("-wal", "-shm"):  # what a crash or a bad copy leaves: only the main file
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    damage(db)
    proc = run(env, repo, "list", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    listed = json.loads(proc.stdout)
    assert len(listed) == len(ids)
    # An id grows a digit when a later item shares its 4 (like git's short hashes, fold.py):
    # each id `add` printed must still name exactly one listed item, and each item one id.
    named = [[i["uid"] for i in listed if i["uid"].startswith(short.lstrip("#"))] for short in ids]
    assert all(len(uids) == 1 for uids in named), named
    assert sorted(u for (u,) in named) == sorted(i["uid"] for i in listed)
    proc = run(env, repo, "search", "item", "--json")
    assert proc.returncode == 0 and len(json.loads(proc.stdout)["items"]) == 20
