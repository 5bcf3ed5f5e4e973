"""Warm search through a running worker, and the light worker (issue items 6 and 7).

A real ``reflect-jobs worker`` (huey_consumer) serves ``$REFLECT_HOME/run/model.sock``;
the CLI's answer path is read from drain.log (``search_answered``/``via``), never inferred
from timing. The model child's idle exit is observed in the process table.
"""

from __future__ import annotations

import contextlib
import json
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from recall_support import add_note, learning, make_repo
from support import wait_for
from warm_support import answers, children, notes, vias, worker

from reflect_jobs import kb
from reflect_jobs.config import load_settings
from reflect_jobs.index import maintenance
from reflect_jobs.warm import protocol, server, supervisor


@pytest.fixture
def kb_env(env):
    env.update(REFLECT_MODEL_IDLE_SEC="2")
    notes(env.kb)
    env.invoke("reindex")
    return env


def test_cli_search_goes_through_the_worker_and_its_child_exits_when_idle(kb_env, tmp_path):
    env = kb_env
    # Two checkouts whose own learnings answer "docker cache" about as well: asked from
    # inside one, its own comes first (issue 25), whichever path answers.
    checkouts = {}
    for name in ("shop", "admin"):
        checkouts[name] = make_repo(tmp_path / name, f"https://github.com/acme/{name}.git")
        add_note(
            env.kb,
            learning(
                f"Docker cache of the {name} image",
                f"Prune the {name} builder's cache weekly.",  # two lessons: two result slots
                repo=f"github.com/acme/{name}",
            ),
        )
    env.invoke("reindex")

    def from_inside(name: str) -> list[str]:
        with contextlib.chdir(checkouts[name]):
            out = env.invoke("search", "docker cache", "--json")
        return [h["title"] for h in json.loads(out.stdout)["results"]]

    alone = env.invoke("search", "docker", "--json")
    preferred = {name: from_inside(name) for name in checkouts}
    assert set(vias(env)) == {"in_process"}
    for name, titles in preferred.items():
        other = next(n for n in checkouts if n != name)
        assert titles[:2] == [f"Docker cache of the {n} image" for n in (name, other)], titles
    with worker(env) as proc:
        sock = env.home / "run" / "model.sock"
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
        warm = env.invoke("search", "docker", "--json")
        assert vias(env)[-1] == "worker"
        assert warm.stdout == alone.stdout, "--json must not depend on the path that answered"
        assert warm.stderr == alone.stderr
        for name in checkouts:
            assert from_inside(name) == preferred[name]
            assert vias(env)[-1] == "worker"
        # REFLECT_MODEL_IDLE_SEC=2: the child goes away by itself; the consumer stays up.
        wait_for(lambda: not children(proc.pid), timeout=60, what="the idle child exiting")
        assert proc.poll() is None
        again = env.invoke("search", "docker", "--json")  # a new child is started on demand
        assert (vias(env)[-1], again.stdout) == ("worker", alone.stdout)
    assert not answers(sock)


def test_no_worker_or_a_stale_socket_falls_back_quietly_and_a_worker_replaces_it(kb_env):
    env = kb_env
    baseline = env.invoke("search", "docker", "--json")
    run = env.home / "run"
    run.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(run / "model.sock"))  # a consumer killed while listening leaves this
    stale.close()
    fallback = env.invoke("search", "docker", "--json")
    assert (fallback.stdout, fallback.stderr) == (baseline.stdout, baseline.stderr)
    assert vias(env) == ["in_process", "in_process"]
    with worker(env):
        env.invoke("search", "docker", "--json")
        assert vias(env)[-1] == "worker"


def test_one_socket_per_home_and_oversized_requests_are_refused(env, monkeypatch):
    """A second consumer on the same home serves nothing; a line over MAX_LINE gets no answer."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    s = load_settings()
    service = supervisor.ModelService(s)
    first = server.serve(s, service)
    try:
        assert first is not None
        assert server.serve(s, supervisor.ModelService(s)) is None
        with socket.socket(socket.AF_UNIX) as c:
            c.connect(str(s.model_socket))
            c.sendall(b"x" * (protocol.MAX_LINE + 10))
            c.shutdown(socket.SHUT_WR)
            assert c.recv(100) == b"", "an oversized request must not be answered"
        with socket.socket(socket.AF_UNIX) as c:
            c.connect(str(s.model_socket))
            c.sendall(protocol.encode({"op": "reindex_task"}))
            answer = protocol.read_message(c.makefile("rb"))
        assert answer is not None and answer["kind"] == "bad_request"
    finally:
        assert first is not None
        first.close()
        service.close()


def _maps_torch(pid: int) -> bool:
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.slow
def test_with_vectors_the_model_lives_in_the_child_never_in_the_consumer(env):
    # The first search cold-starts the model child: on a loaded machine that can take longer
    # than the default budget, after which the CLI would answer lexically.
    env.update(
        REFLECT_INDEX_VECTORS="1", REFLECT_MODEL_IDLE_SEC="2", REFLECT_SEARCH_WORKER_SEC="300"
    )
    notes(env.kb)
    env.invoke("reindex")
    with worker(env) as proc:
        warm = env.invoke("search", "floating tags", "--json")
        assert vias(env) == ["worker"]
        assert json.loads(warm.stdout)["results"][0]["title"] == "Pin the docker digest"
        assert "vector index unavailable" not in warm.stderr, "it answered without vectors"
        (child,) = wait_for(lambda: children(proc.pid), what="the model child")
        assert _maps_torch(child), "the check below would not see torch"
        assert not _maps_torch(proc.pid), "the consumer itself loaded torch"
        wait_for(lambda: not children(proc.pid), timeout=60, what="the idle child exiting")
        # A reindex through the queue (what a committed add asks for) runs in a new child.
        kb.write_learning(
            env.kb,
            {
                "title": "Bound the socket line",
                "category": "Tools",
                "key_insight": "x",
                "rule": "y",
            },
            created="2026-11-30T00:00:00Z",
            updated="2026-11-30T00:00:00Z",
            source_path="t",
            session_id="s",
        )
        code = "from reflect_jobs import tasks\ntasks.HueyDispatcher().kb_changed()"
        subprocess.run([sys.executable, "-c", code], env=dict(env), check=True, timeout=60)
        wait_for(lambda: _graph_current(env.kb), timeout=120, what="the reindex in the child")
        assert not _maps_torch(proc.pid), "the consumer loaded torch for the reindex"


def _graph_current(kb_path: Path) -> bool:
    m = maintenance.manifest(kb_path)
    try:
        # The graph's debt is recorded before the manifest moves on and cleared only once
        # the graph step succeeded, so "not lagging and nothing owed" means it is done.
        return not maintenance.index_lags(kb_path) and m.graph_owed() is None
    finally:
        m.close()
