"""``make install`` reinstalls only when pyproject.toml's content (or a pin) changed.

The stamp used to be a file compared by mtime with pyproject.toml, so a fresh clone (every
file as new as the checkout) reinstalled on every ``make demo``. The real Makefile runs here
against a stand-in venv whose ``pip`` only records its arguments: no network, no install.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _checkout(tmp_path: Path) -> Path:
    work = tmp_path / "checkout"
    bin_dir = work / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(ROOT / name, work / name)
    (bin_dir / "python").symlink_to(sys.executable)
    pip = bin_dir / "pip"
    pip.write_text(f'#!/bin/sh\necho "$*" >> {work / "pip.log"}\n')
    pip.chmod(pip.stat().st_mode | stat.S_IXUSR)
    return work


def _make(work: Path, target: str = "install") -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    proc = subprocess.run(
        ["make", "-s", target, f"PY={sys.executable}"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _pip_runs(work: Path) -> int:
    log = work / "pip.log"
    return sum("-e .[" in line for line in log.read_text().splitlines()) if log.exists() else 0


def test_install_runs_once_then_only_when_the_content_changes(tmp_path):
    work = _checkout(tmp_path)
    _make(work)
    assert _pip_runs(work) == 1, "the first make install installs"
    stamp = (work / ".venv" / ".installed").read_text().strip()
    assert len(stamp) == 64, "the stamp holds a sha256, not nothing"
    out = _make(work)
    assert _pip_runs(work) == 1 and "up to date" in out
    # a fresh clone: pyproject.toml newer than the stamp, same content -> no reinstall
    later = time.time() + 60
    os.utime(work / "pyproject.toml", (later, later))
    _make(work)
    assert _pip_runs(work) == 1, "an mtime alone does not reinstall"
    with (work / "pyproject.toml").open("a") as fh:
        fh.write("\n# a dependency changed\n")
    _make(work)
    assert _pip_runs(work) == 2, "changed content reinstalls"
    _make(work)
    assert _pip_runs(work) == 2
