"""Model backends: one ``call(prompt) -> ModelResult`` per way of reaching a model.

``ClaudeCliBackend`` runs the Claude Code CLI exactly as ARCHITECTURE §5 says. Differences from the
original, all deliberate (SPEC-drain §4.2, §10 B11):

* the prompt goes on STDIN (argv hit E2BIG on multi-byte slices);
* no ``--permission-mode bypassPermissions``: the call is tool-free (``--allowedTools ""``);
* cwd is really ``REFLECT_DRAIN_CWD`` (the original silently ran in ``$HOME``);
* a timeout kills the whole process GROUP (the CLI spawns helpers that would otherwise keep
  the pipes open and the money flowing) and still returns what stdout there was;
* the child never outlives its worker: on Linux it asks the kernel for SIGKILL when its
  parent dies (``prctl(PR_SET_PDEATHSIG)`` in ``preexec_fn``), elsewhere a small watchdog
  process kills its group when the worker's end of a pipe closes; and a drain stopped by a
  signal kills every live child's group (:func:`kill_live_children`). Before, a SIGKILLed
  worker left the CLI running in its own session: it finished and billed while the
  restarted job called again;
* nothing raises except ``BackendMissing``: any output becomes a ``ModelResult`` so the
  telemetry reaches the ledger before anything parses it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from reflect_jobs.markers import CHILD_ENV
from reflect_jobs.writer.heuristic import heuristic_actions
from reflect_jobs.writer.prompt import slice_of
from reflect_jobs.writer.result import (
    TIMEOUT_EXIT_CODE,
    BackendMissing,
    ModelResult,
    coerce_usage,
    result_from_cli,
)

_REAP_SEC = 5.0


@runtime_checkable
class Backend(Protocol):
    """Anything that turns a prompt into a ``ModelResult``.

    ``name`` labels the attempt in the ledger. ``call(prompt)`` returns a ``ModelResult`` for
    whatever happened (errors and timeouts included) and raises only ``BackendMissing``.
    """

    name: str

    def call(self, prompt: str) -> ModelResult: ...


def resolve_binary(binary: str) -> str:
    """Absolute path of an executable, or ``BackendMissing`` (an install fault: halt, free).

    Args:
        binary: A name looked up on ``PATH``, or a path (anything containing ``os.sep``;
            ``~`` is expanded, a relative path is taken from the current directory).

    Returns:
        The executable's absolute path.

    Raises:
        BackendMissing: ``binary`` is empty, not found, or not an executable file.
    """
    if not binary:
        raise BackendMissing("no model binary configured")
    if os.sep in binary:
        path = os.path.abspath(os.path.expanduser(binary))
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        raise BackendMissing(f"model binary not found or not executable: {binary}")
    found = shutil.which(binary)
    if not found:
        raise BackendMissing(f"model binary not on PATH: {binary}")
    return found


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


# Every model child running in this process, so a stopping drain can kill them all.
_live: dict[int, subprocess.Popen] = {}
_cancelled: set[int] = set()
_live_lock = threading.Lock()


class CallCancelled(KeyboardInterrupt):
    """The call's child was killed by :func:`kill_live_children` (the process is stopping).

    A ``KeyboardInterrupt`` (Huey logs the task as interrupted): no stage handler turns it
    into an outcome, so the half-done call is neither recorded nor charged (its reserved
    budget unit is refunded) and the job keeps its lease for recovery.
    """


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_libc: ctypes.CDLL | None = None


def orphan_guard() -> str:
    """How model children are tied to their worker on this platform.

    Returns:
        ``"pdeathsig"`` on Linux, ``"watchdog"`` elsewhere (macOS has no parent-death
        signal).
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


def _start_watchdog(pgid: int) -> tuple[subprocess.Popen, int]:
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


def _stop_watchdog(dog: subprocess.Popen, w: int) -> None:
    """Tell the watchdog the call ended normally (one byte, then EOF) and reap it."""
    with contextlib.suppress(OSError):
        os.write(w, b"x")
    os.close(w)
    with contextlib.suppress(subprocess.TimeoutExpired):
        dog.wait(timeout=_REAP_SEC)


def kill_live_children() -> int:
    """SIGKILL the process group of every model child this process is running.

    Called by a drain stopping on SIGINT/SIGTERM: it does not wait for the task in flight,
    and the job's lease brings it back. Each interrupted :meth:`ClaudeCliBackend.call`
    raises :class:`CallCancelled`, so the killed call is never recorded as an attempt.

    Returns:
        How many children were signalled.
    """
    with _live_lock:
        procs = list(_live.values())
        _cancelled.update(_live)
    for proc in procs:
        _kill_group(proc)
    return len(procs)


def _encode(prompt: str) -> bytes:
    """UTF-8; lone surrogates (from JSON ``\\ud800`` escapes in transcripts) become ``?``
    instead of crashing the call."""
    return prompt.encode("utf-8", errors="replace")


def _decode(data: bytes | None) -> str:
    return data.decode("utf-8", errors="replace") if data else ""


class ClaudeCliBackend:
    """``claude -p --output-format json`` with the prompt on stdin (ARCHITECTURE §5).

    Args:
        binary: The ``claude`` executable, a name or a path (resolved at every call).
        model: The ``--model`` value, e.g. ``sonnet``.
        cwd: The call's working directory (``REFLECT_DRAIN_CWD``); must exist at call time.
        timeout_sec: Seconds before the whole process group is killed.
        max_turns: The ``--max-turns`` value: 1 for extract, more for the agentic writer.
        extra_env: Variables added to the inherited environment (keys and values made
            strings).
        guard: How the child is tied to this process (``"pdeathsig"`` or
            ``"watchdog"``); ``None`` picks :func:`orphan_guard` for the platform.
    """

    name = "claude"

    def __init__(
        self,
        binary: str,
        model: str,
        cwd: str,
        timeout_sec: float,
        max_turns: int = 1,
        extra_env: dict | None = None,
        guard: str | None = None,
    ) -> None:
        """Store the call's settings; nothing is checked until :meth:`call`."""
        self.guard = guard
        self.binary = binary
        self.model = model
        self.cwd = cwd
        self.timeout_sec = timeout_sec
        self.max_turns = max_turns
        self.extra_env = dict(extra_env or {})

    def argv(self, binary: str | None = None) -> list[str]:
        """The exact command line (no prompt: that goes on stdin).

        Args:
            binary: The executable to put first (the resolved path); ``None`` means
                ``self.binary`` as configured.

        Returns:
            The argv list: tool-free (``--allowedTools ""``), JSON output, the model and
            ``--max-turns``.
        """
        return [
            binary or self.binary,
            "-p",
            "--output-format",
            "json",
            "--model",
            self.model,
            "--allowedTools",
            "",
            "--max-turns",
            str(self.max_turns),
        ]

    def env(self) -> dict[str, str]:
        """Inherited env + extras + the child guard that makes our own hooks no-ops.

        Returns:
            A new dict: ``os.environ``, updated with ``extra_env``, then
            ``REFLECT_DRAIN_CHILD=1``.
        """
        env = dict(os.environ)
        env.update({str(k): str(v) for k, v in self.extra_env.items()})
        env[CHILD_ENV] = "1"
        return env

    def call(self, prompt: str) -> ModelResult:
        """Run the CLI once with ``prompt`` on stdin and wrap whatever came back.

        Args:
            prompt: The full prompt (``build_prompt``); lone surrogates are sent as ``?``.

        Returns:
            The ``ModelResult`` of ``result_from_cli``. After a timeout the exit code is
            ``TIMEOUT_EXIT_CODE`` (124), ``timed_out`` is set and the output read before
            the kill is kept (none if the pipes still were not closed 5 s after the kill).

        Raises:
            BackendMissing: The binary is missing or not executable, ``cwd`` does not
                exist, or the process cannot be started.
            CallCancelled: :func:`kill_live_children` killed the child (shutdown).
        """
        binary = resolve_binary(self.binary)
        if not os.path.isdir(self.cwd):
            raise BackendMissing(f"writer cwd does not exist: {self.cwd}")
        started = time.monotonic()
        guard = self.guard or orphan_guard()
        try:
            proc = subprocess.Popen(
                self.argv(binary),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                env=self.env(),
                start_new_session=True,  # own process group: a timeout kills all of it
                preexec_fn=_pdeathsig_preexec() if guard == "pdeathsig" else None,  # noqa: PLW1509
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            raise BackendMissing(f"cannot start {binary}: {exc}") from exc
        watchdog = _start_watchdog(proc.pid) if guard == "watchdog" else None
        with _live_lock:
            _live[proc.pid] = proc
        try:
            out, err, timed_out = self._communicate(proc, prompt)
        finally:
            with _live_lock:
                _live.pop(proc.pid, None)
                cancelled = proc.pid in _cancelled
                _cancelled.discard(proc.pid)
            if watchdog is not None:
                _stop_watchdog(*watchdog)
        if cancelled:
            raise CallCancelled(f"model call cancelled: {binary} killed on shutdown")
        duration_ms = int((time.monotonic() - started) * 1000)
        exit_code = TIMEOUT_EXIT_CODE if timed_out else proc.returncode
        return result_from_cli(
            _decode(out),
            _decode(err),
            backend=self.name,
            model=self.model,
            exit_code=exit_code,
            timed_out=timed_out,
            duration_ms=duration_ms,
        )

    def _communicate(self, proc: subprocess.Popen, prompt: str) -> tuple[bytes, bytes, bool]:
        """Send the prompt, read both pipes, kill the group at the timeout; always reap.

        Returns:
            ``(stdout, stderr, timed_out)``.
        """
        try:
            out, err = proc.communicate(_encode(prompt), timeout=self.timeout_sec)
            return out, err, False
        except subprocess.TimeoutExpired:
            pass
        _kill_group(proc)
        try:  # retrying communicate() loses no output already read
            out, err = proc.communicate(timeout=_REAP_SEC)
        except subprocess.TimeoutExpired:  # a grandchild escaped the group with our pipes
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            out, err = b"", b""
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
            # Reap it: the child is dead, but without a wait it stays a zombie.
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=_REAP_SEC)
        return out, err, True


class HeuristicBackend:
    """No model at all: explicit corrections become low-confidence CREATEs (free, offline)."""

    name = "heuristic"
    model = "heuristic"

    def call(self, prompt: str) -> ModelResult:
        """Answer as the CLI would, from the slice part of ``prompt``, with no model at all.

        Args:
            prompt: A prompt from ``build_prompt`` (or bare slice text).

        Returns:
            A successful ``ModelResult`` (one turn, no tokens, no cost) whose text is the
            ``{"actions": [...]}`` of ``heuristic_actions`` and whose stdout is a matching
            CLI envelope.
        """
        started = time.monotonic()
        text = json.dumps({"actions": heuristic_actions(slice_of(prompt))}, ensure_ascii=False)
        envelope = {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "num_turns": 1,
            "result": text,
            "total_cost_usd": 0,
            "usage": coerce_usage(None),
        }
        return ModelResult(
            backend=self.name,
            model=self.model,
            text=text,
            raw_stdout=json.dumps(envelope, ensure_ascii=False),
            stderr="",
            exit_code=0,
            timed_out=False,
            num_turns=1,
            is_error=False,
            subtype="success",
            envelope_ok=True,
            duration_ms=int((time.monotonic() - started) * 1000),
        )
