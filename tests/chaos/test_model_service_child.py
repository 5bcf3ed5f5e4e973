"""The model child killed in the middle of a request (failpoint ``model_child:request``).

Killed once, the request is sent again to a fresh child and answered; killed every time,
the caller gets a :class:`ServiceError` — and the CLI, through a real worker, still prints
the same hits from an in-process search.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
from support import wait_for
from warm_support import notes, vias, worker

from reflect_jobs.config import load_settings
from reflect_jobs.warm.supervisor import ModelService, ServiceError

pytestmark = pytest.mark.chaos


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_a_child_killed_mid_request_is_replaced_and_the_request_retried_once(
    env, tmp_path, monkeypatch
):
    pause_dir = tmp_path / "fp"
    pause_dir.mkdir()
    env.update(REFLECT_FAILPOINTS="model_child:request=pause", REFLECT_FAILPOINT_DIR=str(pause_dir))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    service = ModelService(load_settings())
    marker = pause_dir / "model_child:request.paused"
    answers: list[dict] = []
    caller = threading.Thread(target=lambda: answers.append(service.call("ping", timeout=120)))
    caller.start()
    try:
        first = int(wait_for(lambda: marker.exists() and marker.read_text(), what="1st pause"))
        os.kill(first, signal.SIGKILL)  # dies holding the request
        wait_for(lambda: _gone(first), what="the first child gone")
        # The replacement may pause (overwriting the dead child's marker with its own pid)
        # before this line runs: wait for another pid, never delete a marker not yet read.
        second = int(
            wait_for(
                lambda: (
                    marker.exists()
                    and marker.read_text() not in ("", str(first))
                    and marker.read_text()
                ),
                what="2nd pause",
            )
        )
        assert second != first
        marker.unlink()  # let the replacement answer
        caller.join(timeout=60)
        assert answers and answers[0]["ok"] and answers[0]["pid"] == second
    finally:
        marker.unlink(missing_ok=True)
        caller.join(timeout=60)
        service.close()


def test_a_child_that_always_dies_fails_the_call_and_the_cli_falls_back(env, monkeypatch):
    notes(env.kb)
    env.cli("reindex")
    baseline = env.cli("search", "docker", "--json")
    env.update(REFLECT_FAILPOINTS="model_child:request")  # SIGKILL at every request
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    service = ModelService(load_settings())
    try:
        with pytest.raises(ServiceError, match="died twice"):
            service.call("ping", timeout=120)
    finally:
        service.close()
    with worker(env) as proc:
        out = env.cli("search", "docker", "--json")
        assert out.stdout == baseline.stdout
        # A worker that is there but cannot answer: the CLI answers lexically (no model load
        # in the CLI) and says so, rather than loading the model in-process.
        assert vias(env)[-1] == "lexical_fallback"
        assert "lexical results only" in out.stderr
        assert proc.poll() is None, "the consumer survives its child's deaths"
