"""The one guarded way to run a child process: the model CLIs and the data boundary command.

A child we start may cost money (``claude -p``, ``codex exec``) or hold a transcript open (the
boundary command), so every one of them gets the same guards (ARCHITECTURE §5):

* **its own process group** (a new session), so a timeout or a stop kills the whole group —
  the CLIs start helpers that would otherwise keep the pipes open and the money flowing;
* **it never outlives its worker**: on Linux the kernel sends it SIGKILL when the thread that
  started it dies (``prctl(PR_SET_PDEATHSIG)`` in ``preexec_fn``; the thread waits for the
  child, so it lives exactly as long as the call); elsewhere a small watchdog process kills
  its group when the worker's end of a pipe closes (macOS has no parent-death signal);
* **the live registry**: a consumer stopping on SIGINT/SIGTERM kills every live child's group
  (:func:`kill_live_children`) and the interrupted call raises :class:`ChildCancelled`;
* **always reaped**, after a normal exit, a timeout (group killed, output read so far kept)
  or a kill.

Before this module there were three spawners: the Claude writer had these guards, the Codex
writer had only the process group (a killed worker left ``codex exec`` running and billing),
and the boundary command had its own group kill. The warm model child (``warm/supervisor.py``)
is deliberately not run here: it outlives the thread that starts it (a parent-death signal is
per *thread* on Linux), and it is tied to the consumer by its stdin instead (EOF → exit).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

#: Seconds to wait for pipes to close and the child to be reaped after a kill.
REAP_SEC = 5.0
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_libc: ctypes.CDLL | None = None

# Every guarded child running in this process, so a stopping consumer can kill them all.
_live: dict[int, subprocess.Popen[bytes]] = {}
_cancelled: set[int] = set()
_live_lock = threading.Lock()


class ChildCancelled(KeyboardInterrupt):
    """The child was killed by :func:`kill_live_children` (this process is stopping).

    A ``KeyboardInterrupt``, so no stage handler turns it into an outcome (Huey logs the task
    as interrupted): a half-done model call is settled as ``interrupted`` by the write stage
    or by the hand-back, and a boundary check that was cut short restricts nothing.
    """


@dataclass(frozen=True)
class Finished:
    """How a guarded child ended.

    Attributes:
        stdout: What it printed (empty when not captured; what was read before a kill).
        stderr: Its stderr (same rules).
        returncode: Its exit status (negative: killed by that signal); None only if it
            could not be reaped.
        timed_out: Our timeout killed its group.
    """

    stdout: bytes
    stderr: bytes
    returncode: int | None
    timed_out: bool


def orphan_guard() -> str:
    """How children are tied to their worker on this platform.

    Returns:
        ``"pdeathsig"`` on Linux, ``"watchdog"`` elsewhere (macOS has no parent-death signal).
    """
    return "pdeathsig" if sys.platform.startswith("linux") else "watchdog"


def _pdeathsig_preexec() -> Callable[[], None]:
    """A ``preexec_fn`` asking the kernel to SIGKILL the child when its parent dies.

    libc is loaded here, before the fork, so the child only makes one ``prctl`` call. The
    parent may die between the fork and that call: then the child is already re-parented
    and exits at once instead of running unguarded.
    """
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    libc, parent = _libc, os.getpid()

    def preexec() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


# Reads its stdin until EOF; EOF with no byte means the worker died: kill the child's group.
_WATCHDOG = (
    "import os, signal, sys\n"
    "if not os.read(0, 1):\n"
    "    try:\n"
    "        os.killpg(int(sys.argv[1]), signal.SIGKILL)\n"
    "    except OSError:\n"
    "        pass\n"
)


def _start_watchdog(pgid: int) -> tuple[subprocess.Popen[bytes], int]:
    """A process that kills group ``pgid`` if this process dies before :func:`_stop_watchdog`.

    It holds the read end of a pipe whose write end only this process has: when this
    process dies, however, the kernel closes it and the watchdog reads EOF. It runs in its
    own session so a signal to the worker's group does not take it along.
    """
    r, w = os.pipe()
    try:
        dog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(pgid)],
            stdin=r,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    finally:
        os.close(r)
    return dog, w


def _stop_watchdog(dog: subprocess.Popen[bytes], w: int) -> None:
    """Tell the watchdog the call ended normally (one byte, then EOF) and reap it."""
    with contextlib.suppress(OSError):
        os.write(w, b"x")
    os.close(w)
    with contextlib.suppress(subprocess.TimeoutExpired):
        dog.wait(timeout=REAP_SEC)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's whole process group (it leads its own session).

    Args:
        proc: A child started by :func:`run` (its pid is its group id).
    """
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


def kill_live_children() -> int:
    """SIGKILL the process group of every guarded child this process is running.

    Called by a consumer stopping on SIGINT/SIGTERM: it does not wait for the task in
    flight. Each interrupted :func:`run` raises :class:`ChildCancelled`.

    Returns:
        How many children were signalled.
    """
    with _live_lock:
        procs = list(_live.values())
        _cancelled.update(_live)
    for proc in procs:
        kill_group(proc)
    return len(procs)


def live_pids() -> list[int]:
    """The pids of the guarded children running now (for tests and ``status``).

    Returns:
        Sorted pids.
    """
    with _live_lock:
        return sorted(_live)


def run(
    argv: Sequence[str],
    *,
    input: bytes = b"",
    timeout: float,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    capture: bool = True,
    guard: str | None = None,
) -> Finished:
    """Run ``argv`` once under every guard of this module and wait for it.

    Args:
        argv: The program and its arguments (never run through a shell).
        input: Bytes for its stdin (then closed).
        timeout: Seconds before its whole process group is killed.
        cwd: Its working directory (``None``: ours).
        env: Its environment (``None``: ours).
        capture: Read stdout and stderr (else they go to ``/dev/null``).
        guard: ``"pdeathsig"`` or ``"watchdog"``; ``None`` picks :func:`orphan_guard`.

    Returns:
        How it ended. After a timeout the output read before the kill is kept (none if the
        pipes were still open :data:`REAP_SEC` after the kill: a grandchild escaped the
        group holding them).

    Raises:
        OSError: It could not be started (``FileNotFoundError``, ``PermissionError``…).
        ChildCancelled: :func:`kill_live_children` killed it (this process is stopping).
    """
    guard = guard or orphan_guard()
    out_to = subprocess.PIPE if capture else subprocess.DEVNULL
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=out_to,
        stderr=out_to,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        start_new_session=True,  # its own process group: a timeout kills all of it
        close_fds=True,
        preexec_fn=_pdeathsig_preexec() if guard == "pdeathsig" else None,  # noqa: PLW1509
    )
    watchdog = _start_watchdog(proc.pid) if guard == "watchdog" else None
    with _live_lock:
        _live[proc.pid] = proc
    try:
        out, err, timed_out = _communicate(proc, input, timeout)
    finally:
        with _live_lock:
            _live.pop(proc.pid, None)
            cancelled = proc.pid in _cancelled
            _cancelled.discard(proc.pid)
        if watchdog is not None:
            _stop_watchdog(*watchdog)
    if cancelled:
        raise ChildCancelled(f"{argv[0]} killed: this process is stopping")
    return Finished(out or b"", err or b"", proc.returncode, timed_out)


def _communicate(
    proc: subprocess.Popen[bytes], data: bytes, timeout: float
) -> tuple[bytes, bytes, bool]:
    """Send ``data``, read both pipes, kill the group at the timeout; always reap.

    Returns:
        ``(stdout, stderr, timed_out)``.
    """
    try:
        out, err = proc.communicate(data, timeout=timeout)
        return out, err, False
    except subprocess.TimeoutExpired:
        pass
    except OSError:
        # A child that exits without reading stdin (a broken pipe on the write) still has
        # an exit status worth reading; a bounded wait keeps the timeout's promise.
        try:
            proc.wait(timeout=timeout)
            return b"", b"", False
        except subprocess.TimeoutExpired:
            pass
    kill_group(proc)
    try:  # retrying communicate() loses no output already read
        out, err = proc.communicate(timeout=REAP_SEC)
    except (subprocess.TimeoutExpired, OSError):  # a grandchild escaped with our pipes
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        out, err = b"", b""
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        # Reap it: the child is dead, but without a wait it stays a zombie.
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=REAP_SEC)
    return out, err, True
