"""Test helpers importable from any test module (``tests`` is on pytest's pythonpath)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUB_CLAUDE = ROOT / "tests" / "stubs" / "claude"
BIN = Path(sys.executable).parent
DATA = ROOT / "tests" / "data"
SAMPLES = ROOT / "samples"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def transcripts_dir() -> Path:
    """The real Claude Code transcripts bundled with the tests (see tests/data/SOURCES.md)."""
    return DATA / "transcripts" / "claude-code"


class Env(dict):
    """Environment for one isolated installation; also builds in-process Settings."""

    @property
    def home(self) -> Path:
        return Path(self["REFLECT_HOME"])

    @property
    def kb(self) -> Path:
        return Path(self["GLOBAL_LEARNINGS_PATH"])

    def settings(self):  # type: ignore[no-untyped-def]
        from reflect_jobs.config import load_settings

        return load_settings(dict(self))

    def run(
        self, *args: str, input: str | None = None, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        exe = args[0]
        argv = [str(BIN / exe), *args[1:]] if (BIN / exe).exists() else list(args)
        proc = subprocess.run(
            argv, env=dict(self), input=input, capture_output=True, text=True, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{args} exited {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    def cli(self, *args: str, **kw) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
        """``reflect-jobs ARGS`` as a real process: for tests where the process boundary is
        the point (signals, kills, exit of the process, what a fresh interpreter imports)."""
        return self.run("reflect-jobs", *args, **kw)

    def invoke(
        self, *args: str, input: str | None = None, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """``reflect-jobs ARGS`` in this process (click's CliRunner), answering like
        :meth:`cli`: a ``CompletedProcess`` with the exit code, stdout and stderr.

        It skips the ~1-4 s interpreter start and imports of a real process; the command
        still runs against this installation's real files. For the call it sees exactly
        this environment (every other variable of ``os.environ`` is hidden, all restored
        after) and the per-process state a fresh ``reflect-jobs`` would start with (see
        :func:`fresh_cli_process`). ``timeout`` is a hang guard as in :meth:`cli`: past it
        a SIGALRM interrupts the call and ``subprocess.TimeoutExpired`` is raised."""
        from click.testing import CliRunner

        from reflect_jobs.cli import main

        armed = [
            p for p in self.get("REFLECT_FAILPOINTS", "").split(",") if p.strip() and
            p.partition("=")[2].strip() in ("", "kill")
        ]  # fmt: skip
        if armed:  # it would SIGKILL the test process itself
            raise AssertionError(f"failpoints {armed} kill the process: use env.cli for {args}")
        overlay: dict[str, str | None] = {k: None for k in os.environ if k not in self}
        overlay.update(self)
        try:
            with fresh_cli_process(), _alarm(timeout):
                result = CliRunner().invoke(
                    main, list(args), input=input, env=overlay, prog_name="reflect-jobs"
                )
        except _HangGuard:
            raise subprocess.TimeoutExpired(["reflect-jobs", *args], timeout) from None
        stderr = result.stderr
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            import traceback

            stderr += "".join(traceback.format_exception(*result.exc_info))  # as Python prints it
        proc = subprocess.CompletedProcess(
            ["reflect-jobs", *args], result.exit_code, result.stdout, stderr
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{args} exited {proc.returncode} (in-process)\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc


class _HangGuard(BaseException):
    """Raised by SIGALRM in an in-process call that outlived its timeout (a BaseException:
    no ``except Exception`` of the command swallows it)."""


@contextlib.contextmanager
def _alarm(timeout: float) -> Iterator[None]:
    """Interrupt the main thread with :class:`_HangGuard` after ``timeout`` seconds."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):  # type: ignore[no-untyped-def]
        raise _HangGuard(f"still running after {timeout}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


#: Modules whose import reads the settings (``tasks``: the Huey instance, ``runtime()``
#: cached) — a fresh process imports them anew for its own environment.
_PER_PROCESS_MODULES = ("reflect_jobs.tasks", "workers.consumer")


@contextlib.contextmanager
def fresh_cli_process() -> Iterator[None]:
    """Give an in-process CLI call the state a new ``reflect-jobs`` process starts with, and
    give the caller its own state back after.

    A real process imports ``reflect_jobs.tasks`` for its own environment, has no pooled
    ledger engine, has printed no config warning yet and has set no queue file aside; the
    same modules in this process may hold another test's or an earlier call's values.
    """
    saved = {name: sys.modules.pop(name) for name in _PER_PROCESS_MODULES if name in sys.modules}
    package = sys.modules.get("reflect_jobs")
    saved_attr = package.__dict__.pop("tasks", None) if package is not None else None
    from huey.storage import BaseSqlStorage

    from reflect_jobs import queue
    from reflect_jobs.cli import common
    from reflect_jobs.ledger import db

    # Every Huey SQLite storage the call opens (the tasks module's, status's, enqueue's) is
    # closed after it, as a process's exit closes them: a connection left open in this
    # process kept a later reader of queue.db from seeing another process's messages.
    opened: weakref.WeakSet[BaseSqlStorage] = weakref.WeakSet()
    real_init = BaseSqlStorage.__init__

    def tracked_init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        real_init(self, *args, **kwargs)
        opened.add(self)

    warned, repairs = set(common._WARNED), list(queue.REPAIRS)
    common._WARNED.clear()
    queue.REPAIRS.clear()
    db.dispose_all()
    BaseSqlStorage.__init__ = tracked_init  # type: ignore[method-assign]
    try:
        yield
    finally:
        BaseSqlStorage.__init__ = real_init  # type: ignore[method-assign]
        for storage in list(opened):
            storage.close()
        db.dispose_all()  # no engine of this call's home outlives it (file handles, pools)
        fresh = sys.modules.pop("reflect_jobs.tasks", None)
        if fresh is not None:
            fresh.runtime.cache_clear()
        sys.modules.pop("workers.consumer", None)
        sys.modules.update(saved)
        if package is not None:
            package.__dict__.pop("tasks", None)
            if saved_attr is not None:
                package.tasks = saved_attr  # type: ignore[attr-defined]
        common._WARNED.clear()
        common._WARNED.update(warned)
        queue.REPAIRS[:] = repairs


@contextlib.contextmanager
def running_worker(env: Env, threads: int = 1) -> Iterator[subprocess.Popen[bytes]]:
    """``reflect-jobs worker -w threads`` (execs huey_consumer), stopped with SIGTERM after
    the block (killed if it has not exited 20 s later)."""
    import signal

    proc = subprocess.Popen(
        [str(BIN / "reflect-jobs"), "worker", "-w", str(threads)],
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def recent(days: float = 1.0) -> str:
    """A timestamp ``days`` before now: a fixed date in a helper's default is a time bomb
    (180 days after it, every note it wrote is dormant and no longer told)."""
    from datetime import UTC, datetime, timedelta

    return f"{datetime.now(UTC) - timedelta(days=days):%Y-%m-%dT%H:%M:%SZ}"


def write_note(root: Path, title: str, insight: str, *, at: str | None = None):  # type: ignore[no-untyped-def]
    """One learning note in the KB at ``root`` (category Tools, its title as the rule),
    written a day ago unless ``at`` (never a fixed date: it would fall dormant)."""
    from reflect_jobs import kb

    at = at or recent()

    return kb.write_learning(
        root,
        {"title": title, "category": "Tools", "key_insight": insight, "rule": title},
        created=at,
        updated=at,
        source_path="t",
        session_id="s",
    )


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.1, what: str = ""):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it returns something truthy and return that; the timeout is a
    hang guard, never a performance claim (fail with ``what`` if it is reached)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"{what or 'condition'} not met within {timeout}s")


def write_claude_transcript(
    path: Path,
    corrections: list[str],
    *,
    filler: int = 3,
    session: str = "s-test",
    trailing: bool = False,
) -> Path:
    """A synthetic Claude Code session: filler exchanges around explicit human corrections."""
    import json

    lines = []
    n = 0

    def rec(role: str, text: str) -> None:
        nonlocal n
        n += 1
        lines.append(
            json.dumps(
                {
                    "type": role,
                    "uuid": f"u{n}",
                    "sessionId": session,
                    "timestamp": f"2026-11-01T10:{n // 60:02d}:{n % 60:02d}Z",
                    "message": {
                        "role": role,
                        "content": text if role == "user" else [{"type": "text", "text": text}],
                    },
                }
            )
        )

    for i, correction in enumerate(corrections):
        for j in range(filler):
            rec("user", f"Open module m{i}_{j}.py next.")
            rec("assistant", f"Opened m{i}_{j}.py; it has {40 + j} lines.")
        rec("user", correction)
        rec("assistant", "Noted.")
    if trailing:  # the filler that a later correction would follow: windows stay stable
        for j in range(filler):
            rec("user", f"Open module m{len(corrections)}_{j}.py next.")
            rec("assistant", f"Opened m{len(corrections)}_{j}.py; it has {40 + j} lines.")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def hang_first_model_call(env: Env, state_dir: Path, *, lease_sec: int) -> None:
    """The stub's first call hangs (a worker can be killed inside it), later calls answer ok;
    a short lease so recovery happens within the test."""
    env.update(
        STUB_CLAUDE_MODE="sequence",
        STUB_CLAUDE_SEQUENCE="sleep,ok",
        STUB_CLAUDE_STATE=str(state_dir / "seq"),
        STUB_CLAUDE_SLEEP="60",
        REFLECT_LEASE_SEC=str(lease_sec),
        REFLECT_DRAIN_TIMEOUT="120",
    )


PAGE = 4096


@contextlib.contextmanager
def small_tmpfs(target: Path, size: int) -> Iterator[Path]:
    """Mount a ``size``-byte tmpfs at ``target`` for a real ENOSPC; skip without root/mount."""
    import pytest

    target.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root and mount(8) to create a small tmpfs for a real ENOSPC")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"mount -t tmpfs not permitted here: {proc.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


def fill_fs(directory: Path, free_pages: int) -> Path:
    """Fill ``directory``'s filesystem, then give back ``free_pages`` pages; return the filler."""
    filler = directory / "filler.bin"
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
    st = os.statvfs(directory)
    assert st.f_bavail * st.f_frsize == free_pages * PAGE
    return filler


def lease_expired(db_url: str, job_id: str) -> bool:
    """True once the ledger shows ``job_id`` still ``running`` under a lease that has run out —
    exactly the rows ``recover_expired`` re-queues. Wait on this, never sleep past a lease."""
    from sqlalchemy import select

    from reflect_jobs.ledger.db import session_scope
    from reflect_jobs.ledger.models import Job, utcnow

    with session_scope(db_url) as s:
        found = s.scalar(
            select(Job.id).where(
                Job.id == job_id, Job.state == "running", Job.lease_expires_at < utcnow()
            )
        )
    return found is not None


def job_due(db_url: str, job_id: str) -> bool:
    """True once the ledger lists ``job_id`` among the jobs runnable now (``due_jobs``)."""
    from reflect_jobs.ledger.db import session_scope
    from reflect_jobs.ledger.jobs import due_jobs

    with session_scope(db_url) as s:
        return any(j.id == job_id for j in due_jobs(s))


def job_state(db_url: str, job_id: str) -> str | None:
    from reflect_jobs.ledger.db import session_scope
    from reflect_jobs.ledger.models import Job

    with session_scope(db_url) as s:
        job = s.get(Job, job_id)
        return job.state if job is not None else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (bound, read, released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def private_redis(directory: Path, *, password: str, port: int | None = None) -> Iterator[int]:
    """A ``redis-server --requirepass`` of the test's own on 127.0.0.1 (a free port unless
    given), nothing persisted; yields its port and stops it (the process we started) after.
    Skips when ``redis-server`` is not installed."""
    import pytest

    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("needs redis-server for a private password-protected server")
    port = port or free_port()
    directory.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--requirepass", password]
        + ["--save", "", "--appendonly", "no", "--dir", str(directory)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port, password=password)

        def up() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        wait_for(up, timeout=20, interval=0.05, what="the private redis-server accepting")
        client.close()
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def flushable_redis_db() -> int:
    """A Redis logical database this test process may flush: one per xdist worker.

    The Redis tests that only key by prefix share ``RJ_TEST_REDIS_DB`` (default 11); a test
    that flushes its database at start must not share it — a flush dropped a running
    write-lease test's slot key, and two flushing tests on one database emptied each other's
    queue. So each xdist worker gets the base + 1 + its number (mod 4): 12–15 by default.

    Returns:
        The database number.
    """
    import os

    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or "0"
    return int(os.environ.get("RJ_TEST_REDIS_DB", "11")) + 1 + int(worker) % 4
