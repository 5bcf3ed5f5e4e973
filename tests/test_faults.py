"""The failpoint forms themselves: kill, raise, oserror and pause, in real processes."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys

import pytest
from support import wait_for

from reflect_jobs.faults import FailpointError, failpoint

pytestmark = pytest.mark.chaos  # the failpoints themselves: kill, raise, pause

REACH = "from reflect_jobs.faults import failpoint; failpoint({name!r}); print('passed')"


def _reach(name: str, armed: str | None, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFLECT_FAILPOINT")}
    if armed is not None:
        env["REFLECT_FAILPOINTS"] = armed
    env.update(extra)
    return subprocess.run(
        [sys.executable, "-c", REACH.format(name=name)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_unarmed_and_other_points_pass_through():
    assert _reach("after_record", None).stdout == "passed\n"
    assert _reach("after_record", "").stdout == "passed\n"
    assert _reach("after_record", "after_notes,after_claim:write=raise").stdout == "passed\n"


@pytest.mark.parametrize("armed", ["after_record", " after_notes , after_record=kill"])
def test_kill_is_a_real_sigkill(armed):
    proc = _reach("after_record", armed)
    assert proc.returncode == -signal.SIGKILL and proc.stdout == ""


def test_raise_and_oserror_forms(monkeypatch):
    monkeypatch.setenv("REFLECT_FAILPOINTS", "a=raise,b=oserror:ENOSPC,c=oserror:NOPE,d=what")
    with pytest.raises(FailpointError, match="failpoint a"):
        failpoint("a")
    with pytest.raises(OSError) as info:
        failpoint("b")
    assert info.value.errno == errno.ENOSPC and "failpoint b" in str(info.value)
    with pytest.raises(ValueError, match="unknown errno"):
        failpoint("c")
    with pytest.raises(ValueError, match="unknown action"):
        failpoint("d")
    failpoint("e")  # not armed


def test_pause_holds_the_process_until_the_marker_is_removed(tmp_path):
    code = (
        "from reflect_jobs.faults import failpoint\n"
        "for i in range(2):\n"
        "    failpoint('p:x')\n"
        "    print('pass', i, flush=True)\n"
    )
    env = dict(os.environ, REFLECT_FAILPOINTS="p:x=pause", REFLECT_FAILPOINT_DIR=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True
    )
    marker = tmp_path / "p:x.paused"
    try:
        for i in range(2):
            wait_for(marker.exists, timeout=60)
            assert proc.poll() is None, "the process went on while paused"
            marker.unlink()
            assert proc.stdout is not None
            assert proc.stdout.readline() == f"pass {i}\n"
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_pause_without_a_directory_is_refused(monkeypatch):
    monkeypatch.setenv("REFLECT_FAILPOINTS", "p=pause")
    monkeypatch.delenv("REFLECT_FAILPOINT_DIR", raising=False)
    with pytest.raises(ValueError, match="REFLECT_FAILPOINT_DIR"):
        failpoint("p")
