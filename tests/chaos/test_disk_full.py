"""The KB's filesystem is full while the add stage writes a note (ENOSPC, for real).

The KB directory is a 256 KiB tmpfs filled by a big file, so every write the add stage
makes fails with a genuine ``OSError(ENOSPC)`` from the kernel — no mock, no monkeypatch.
The paid answer is already recorded, so the job must wait in ``retrying`` at the add stage
(never re-pay, never lose the answer), leave no partial note and no temp file, and finish
``ok`` with exactly one note once space is freed.

Two fill levels: nothing free (the first write fails) and one page free (the sidecar, which
is written first, fits; the note does not).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support import fill_fs, job_due, small_tmpfs, transcripts_dir, wait_for

pytestmark = pytest.mark.chaos

TMPFS_BYTES = 256 * 1024
NOTE_ID = "lrn-use-pnpm-not-npm-in-the-web-workspace-d96def"


@pytest.fixture
def full_kb(env, tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "kb", TMPFS_BYTES) as kb:
        env["GLOBAL_LEARNINGS_PATH"] = str(kb)
        yield kb


def _leftovers(kb: Path) -> list[str]:
    return (
        sorted(p.name for p in (kb / "documents").iterdir()) if (kb / "documents").is_dir() else []
    )


@pytest.mark.parametrize("free_pages", [0, 1], ids=["nothing-free", "one-page-free"])
def test_disk_full_add_retries_then_finishes_with_one_note(
    env, full_kb: Path, free_pages: int
) -> None:
    env["REFLECT_RETRY_BASE_SEC"] = "2"  # first add retry due 2 s later: drain 1 stops before it
    (full_kb / "documents").mkdir()
    (full_kb / "index" / "graph").mkdir(parents=True)
    filler = fill_fs(full_kb, free_pages)

    job_id = env.invoke(
        "enqueue", str(transcripts_dir() / "python-to-rust-port.jsonl")
    ).stdout.strip()
    env.cli("drain", "--until-idle", "--max-seconds", "60")
    (job,) = json.loads(env.invoke("jobs", "--json").stdout)
    assert (job["stage"], job["state"]) == ("add", "retrying"), job
    assert "No space left on device" in (job.get("error") or ""), job
    left = _leftovers(full_kb)
    assert not [n for n in left if n.endswith(".md")], f"a partial note is visible: {left}"
    assert not [n for n in left if n.endswith(".tmp")], f"a temp file was left behind: {left}"
    # The sidecar is written before the note; when only it fits, it stays as an orphan
    # (harmless: reindex reads notes, and the retry overwrites it). It must be complete.
    for name in left:
        sidecar = yaml.safe_load((full_kb / "documents" / name).read_text())
        assert sidecar["document_id"] == NOTE_ID
    calls_before = len(Path(env["STUB_CLAUDE_LOG"]).read_text().splitlines())

    filler.unlink()
    wait_for(lambda: job_due(env.settings().db_url, job_id), timeout=60)  # the retry is due
    env.cli("drain", "--until-idle", "--max-seconds", "60")
    (job,) = json.loads(env.invoke("jobs", "--json").stdout)
    assert (job["state"], job["outcome"]) == ("done", "ok"), job
    assert _leftovers(full_kb) == [f"{NOTE_ID}.entities.yaml", f"{NOTE_ID}.md"]
    calls_after = len(Path(env["STUB_CLAUDE_LOG"]).read_text().splitlines())
    assert calls_before == calls_after == 1, "the recorded answer is reused, never re-paid"
    assert json.loads(env.invoke("cost", "--json").stdout)["total"]["entries"] == 1
