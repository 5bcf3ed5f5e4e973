"""The consumer's side of the model service: start the child on demand, talk to it, retry once.

The consumer process itself never imports torch, sentence-transformers or nano-graphrag
once :func:`activate` ran (``workers/consumer.py`` does so at start-up): search, the
pipeline's similarity lookups (``index/semantic.py``), the coalesced reindex and the
community rebuild are sent to one child process (:mod:`reflect_jobs.warm.child`), started at
the first request and gone after ``REFLECT_MODEL_IDLE_SEC`` idle. A child that dies with
requests in flight (idle exit racing a new request, a crash, an OOM kill) is replaced and
each of those requests is sent once more; a second death is a :class:`ServiceError`.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
from typing import Any

from ..config import Settings
from .protocol import ProtocolError, encode, read_message


class ServiceError(RuntimeError):
    """The model service could not answer (its child died twice, or timed out)."""


class ChildDied(RuntimeError):
    """The child ended before it answered this request."""


class _Slot:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.answer: dict[str, Any] | None = None


class _Child:
    """One running child: its process, the requests waiting on it, the reader thread."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "reflect_jobs.warm.child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(os.environ),
            start_new_session=True,  # a terminal's ^C reaches the consumer, which ends it
        )
        self.pending: dict[int, _Slot] = {}
        self.lock = threading.Lock()
        self.dead = False
        threading.Thread(target=self._read, daemon=True, name="model-child-reader").start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            while True:
                answer = read_message(self.proc.stdout)
                if answer is None:
                    break
                with self.lock:
                    slot = self.pending.pop(answer.get("id"), None)  # type: ignore[arg-type]
                if slot is not None:
                    slot.answer = answer
                    slot.event.set()
        except (ProtocolError, OSError, ValueError):
            pass
        with self.lock:
            self.dead = True
            orphans, self.pending = list(self.pending.values()), {}
        for slot in orphans:
            slot.event.set()  # answer stays None: the caller sees ChildDied
        self.proc.wait()

    def request(self, rid: int, message: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        slot = _Slot()
        with self.lock:
            if self.dead:
                raise ChildDied("the child has exited")
            self.pending[rid] = slot
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(encode({**message, "id": rid}))
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                self.pending.pop(rid, None)
                raise ChildDied("the child's pipe is closed") from None
        if not slot.event.wait(timeout):
            with self.lock:
                self.pending.pop(rid, None)
            raise ServiceError(f"the model service did not answer within {timeout} s")
        if slot.answer is None:
            raise ChildDied("the child exited before answering")
        return slot.answer

    def close(self) -> None:
        with self.lock:
            self.dead = True
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()  # EOF: the child finishes what it has, then exits
        except OSError:
            pass


class ModelService:
    """The consumer's handle on the model child (thread-safe; one per process)."""

    def __init__(self, settings: Settings) -> None:
        """Nothing starts until the first :meth:`call`.

        Args:
            settings: The consumer's settings (the child reads the same environment).
        """
        self.settings = settings
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self._ids = itertools.count(1)

    def _current(self) -> _Child:
        with self._lock:
            if self._child is None or self._child.dead or self._child.proc.poll() is not None:
                self._child = _Child()
            return self._child

    def child_pid(self) -> int | None:
        """The running child's pid, if one is running (for status and the bench).

        Returns:
            The pid, or ``None`` when no child is alive.
        """
        with self._lock:
            child = self._child
        if child is None or child.dead or child.proc.poll() is not None:
            return None
        return child.proc.pid

    def call(self, op: str, *, timeout: float | None = None, **args: Any) -> dict[str, Any]:
        """Send one request to the child (starting it if needed) and wait for its answer.

        Args:
            op: One of :data:`reflect_jobs.warm.child.OPS`.
            timeout: Seconds to wait for the answer; ``None`` waits as long as it takes
                (the reindex runs under the consumer's task timeout anyway).
            **args: The request's fields.

        Returns:
            The child's answer (``{"ok": ...}``).

        Raises:
            ServiceError: The child died twice in a row before answering, or timed out.
        """
        message = {"op": op, **args}
        for attempt in (1, 2):
            child = self._current()
            try:
                return child.request(next(self._ids), message, timeout)
            except ChildDied as exc:
                if attempt == 2:
                    raise ServiceError(f"the model service died twice: {exc}") from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Let the child go (it exits once its in-flight requests are answered)."""
        with self._lock:
            child, self._child = self._child, None
        if child is not None:
            child.close()


_service: ModelService | None = None


def activate(settings: Settings) -> ModelService:
    """Route this process's model work through a child from now on (the consumer calls it).

    Args:
        settings: The process's settings.

    Returns:
        The process's :class:`ModelService` (the same one on every call).
    """
    global _service
    if _service is None:
        from reflect_jobs.index import semantic

        _service = ModelService(settings)
        semantic.route_to(_service.call)  # the pipeline's similarity lookups go to the child
    return _service


def current() -> ModelService | None:
    """The active service, or ``None`` in processes that do model work in-process.

    Returns:
        What :func:`activate` set; ``None`` in the CLI, ``drain`` and the child itself.
    """
    return _service
