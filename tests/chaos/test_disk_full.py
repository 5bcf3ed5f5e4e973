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
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support import transcripts_dir

PAGE = 4096
TMPFS_BYTES = 256 * 1024
NOTE_ID = "lrn-use-pnpm-not-npm-in-the-web-workspace-d96def"


def _mount_small_tmpfs(target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root and mount(8) to create a small tmpfs for a real ENOSPC")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(target)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"mount -t tmpfs not permitted here: {proc.stderr.strip()}")


@pytest.fixture
def full_kb(env, tmp_path: Path) -> Iterator[Path]:
    kb = tmp_path / "kb"
    _mount_small_tmpfs(kb)
    env["GLOBAL_LEARNINGS_PATH"] = str(kb)
    try:
        yield kb
    finally:
        subprocess.run(["umount", "-l", str(kb)], check=False)


def _fill(kb: Path, free_pages: int) -> Path:
    """Fill the filesystem, then give back ``free_pages`` pages."""
    filler = kb / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * PAGE)  # unbuffered: ENOSPC surfaces here, not at close
    except OSError:
        pass
    finally:
        os.close(fd)
    used = os.path.getsize(filler)
    if free_pages:
        os.truncate(filler, used - free_pages * PAGE)
    st = os.statvfs(kb)
    assert st.f_bavail * st.f_frsize == free_pages * PAGE
    return filler


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
    filler = _fill(full_kb, free_pages)

    env.cli("enqueue", str(transcripts_dir() / "python-to-rust-port.jsonl"))
    env.cli("drain", "--until-idle", "--max-seconds", "60")
    (job,) = json.loads(env.cli("jobs", "--json").stdout)
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
    time.sleep(2.2)
    env.cli("drain", "--until-idle", "--max-seconds", "60")
    (job,) = json.loads(env.cli("jobs", "--json").stdout)
    assert (job["state"], job["outcome"]) == ("done", "ok"), job
    assert _leftovers(full_kb) == [f"{NOTE_ID}.entities.yaml", f"{NOTE_ID}.md"]
    calls_after = len(Path(env["STUB_CLAUDE_LOG"]).read_text().splitlines())
    assert calls_before == calls_after == 1, "the recorded answer is reused, never re-paid"
    assert json.loads(env.cli("cost", "--json").stdout)["total"]["entries"] == 1
