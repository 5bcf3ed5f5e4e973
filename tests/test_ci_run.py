"""CI's entry (.ci/run) runs lint, typecheck and the tests, and fails when any of them fails.

The real script runs with a stand-in ``make`` (and server probes) first on PATH, which records
each target and exits as told, so the test sees what CI would run and what it would report
without installing or running the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_MAKE = """#!/bin/sh
echo "$1" >> "$CALLS"
case "$1" in
  lint) exit "${LINT_RC:-0}" ;;
  typecheck) exit "${TYPECHECK_RC:-0}" ;;
  test) exit "${TEST_RC:-0}" ;;
esac
exit 0
"""


def _run_ci(tmp_path: Path, **rcs: int) -> tuple[int, list[str], str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "make").write_text(FAKE_MAKE, encoding="utf-8")
    for probe in ("redis-cli", "pg_isready", "apt-get"):  # servers "up", nothing to install
        (bin_dir / probe).write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    calls = tmp_path / "calls"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "CALLS": str(calls),
        **{f"{k.upper()}_RC": str(v) for k, v in rcs.items()},
    }
    done = subprocess.run(
        ["bash", str(ROOT / ".ci" / "run")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    made = calls.read_text(encoding="utf-8").split() if calls.exists() else []
    return done.returncode, made, done.stdout + done.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="a bash script")
def test_ci_runs_lint_and_typecheck_before_the_tests(tmp_path: Path) -> None:
    rc, made, _ = _run_ci(tmp_path)
    assert rc == 0
    assert made == ["install", "lint", "typecheck", "test"]


@pytest.mark.skipif(sys.platform == "win32", reason="a bash script")
@pytest.mark.parametrize("failing", ["lint", "typecheck", "test"])
def test_one_failure_fails_ci_and_every_step_still_runs(tmp_path: Path, failing: str) -> None:
    rc, made, out = _run_ci(tmp_path, **{failing: 2})
    assert rc != 0
    assert made == ["install", "lint", "typecheck", "test"]  # one run reports all three
    assert f"{failing} exit 2" in out


@pytest.mark.skipif(sys.platform == "win32", reason="a bash script")
def test_a_run_that_collected_no_test_fails(tmp_path: Path) -> None:
    rc, _, out = _run_ci(tmp_path, test=5)
    assert rc == 1 and "no tests ran" in out
