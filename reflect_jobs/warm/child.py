"""The model-service child: owns the embedder and graph index, exits when idle.

Run as ``python -m reflect_jobs.warm.child`` by :mod:`reflect_jobs.warm.supervisor` in the
consumer. It reads requests (JSON lines with an ``id``) on stdin and answers on stdout, one
thread per request so a search is not queued behind a reindex. After
``REFLECT_MODEL_IDLE_SEC`` with no request in flight, or when stdin closes (the consumer
died or stopped), it exits — and with it torch, the model and every allocator arena, which
is why this is a process and not a cache (ARCHITECTURE §8.1).

Anything a library prints goes to stderr: fd 1 is re-pointed there at start and the
protocol keeps a private duplicate of the original stdout.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import IO, Any

from .protocol import ProtocolError, encode, read_message

#: Requests the child serves; everything else is answered with an error.
OPS = ("ping", "search", "similar", "reindex_task", "communities")


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Answer one request in this process (the heavy imports happen here, on first use).

    Args:
        request: ``{"op": ..., ...}``; see :data:`OPS`. ``search`` and ``similar`` carry
            the caller's ``kb_path``, ``vectors`` and ``embed_model``, which must match this
            process's settings (a CLI pointed at another KB falls back to in-process).

    Returns:
        ``{"ok": True, ...}`` with the op's result, or ``{"ok": False, "kind": ...,
        "error": ...}``; ``kind`` is ``SearchError`` for a damaged lexical index (the
        caller raises it as in-process search would) and ``mismatch`` for another KB.
    """
    from reflect_jobs.config import load_settings
    from reflect_jobs.faults import failpoint

    failpoint("model_child:request")
    s = load_settings()
    op = request.get("op")
    if op == "ping":
        return {"ok": True, "pid": os.getpid()}
    if op in ("search", "similar"):
        asked = (request.get("kb_path"), request.get("vectors"), request.get("embed_model"))
        if asked != (str(s.kb_path), s.index_vectors, s.embed_model):
            return {"ok": False, "kind": "mismatch", "error": "another KB or index setting"}
    if op == "search":
        from reflect_jobs.index.search import SearchError, search

        repo_key = request.get("repo_key")
        prefer = request.get("prefer_repo_key")
        try:
            result = search(
                s.kb_path,
                str(request["query"]),
                mode=str(request.get("mode", "hybrid")),
                k=int(request.get("k", 5)),
                vectors=s.index_vectors,
                embed_model=s.embed_model,
                repo_key=str(repo_key) if repo_key is not None else None,
                only_global=bool(request.get("only_global")),
                prefer_repo_key=str(prefer) if prefer is not None else None,
            )
        except SearchError as exc:
            return {"ok": False, "kind": "SearchError", "error": str(exc)}
        return {
            "ok": True,
            "hits": result.hits,
            "warnings": result.warnings,
            "reason": result.reason,
        }
    if op == "similar":
        from reflect_jobs.index import semantic

        hits = semantic.similar(
            s.kb_path,
            str(request["text"]),
            k=int(request.get("k", 5)),
            vectors=s.index_vectors,
            embed_model=s.embed_model,
        )
        return {"ok": True, "hits": [[doc, float(score)] for doc, score in hits]}
    if op == "reindex_task":
        from reflect_jobs import kb_jobs

        huey = _queue(s)
        return {"ok": True, "result": kb_jobs.reindex(huey, s, force=bool(request.get("force")))}
    if op == "communities":
        from reflect_jobs import kb_jobs

        return {"ok": True, "result": kb_jobs.communities(_queue(s), s)}
    return {"ok": False, "kind": "bad_request", "error": f"unknown op {op!r}"}


_huey: Any = None


def _queue(settings: Any) -> Any:
    """This child's handle on the queue (the reindex flags and the graph-writer lock), made
    once, with logging configured as the consumer's (its lines go to ``drain.log``)."""
    global _huey
    if _huey is None:
        from reflect_jobs.logging import configure_logging
        from reflect_jobs.queue import make_huey

        configure_logging(settings)
        _huey = make_huey(settings)
    return _huey


class Child:
    """The request loop: a reader thread, one thread per request, idle accounting."""

    def __init__(self, inp: IO[bytes], out: IO[bytes], idle_sec: float) -> None:
        """Wire the loop to its streams.

        Args:
            inp: Requests (the pipe from the consumer).
            out: Answers (a private duplicate of the original stdout).
            idle_sec: Seconds with nothing in flight before :meth:`run` returns.
        """
        self.inp, self.out, self.idle_sec = inp, out, idle_sec
        self.cond = threading.Condition()
        self.write_lock = threading.Lock()
        self.inflight = 0
        self.eof = False
        self.last = time.monotonic()

    def _reply(self, rid: Any, answer: dict[str, Any]) -> None:
        try:
            line = encode({**answer, "id": rid})
        except ProtocolError as exc:
            line = encode({"ok": False, "kind": "too_large", "error": str(exc), "id": rid})
        with self.write_lock:
            self.out.write(line)
            self.out.flush()

    def _serve(self, request: dict[str, Any]) -> None:
        try:
            try:
                answer = handle(request)
            except Exception as exc:  # noqa: BLE001 - one failed request is one error answer
                answer = {"ok": False, "kind": type(exc).__name__, "error": str(exc)[:2000]}
            self._reply(request.get("id"), answer)
        finally:
            with self.cond:
                self.inflight -= 1
                self.last = time.monotonic()
                self.cond.notify_all()

    def _read(self) -> None:
        try:
            while True:
                request = read_message(self.inp)
                if request is None:
                    break
                with self.cond:
                    self.inflight += 1
                threading.Thread(target=self._serve, args=(request,), daemon=True).start()
        except (ProtocolError, OSError):
            pass  # a broken pipe from the consumer: treat as its end
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def run(self) -> None:
        """Serve until stdin closes or the idle time passes with nothing in flight."""
        threading.Thread(target=self._read, daemon=True).start()
        with self.cond:
            while True:
                if self.inflight == 0 and self.eof:
                    return
                idle_for = time.monotonic() - self.last
                if self.inflight == 0 and idle_for >= self.idle_sec:
                    return
                self.cond.wait(timeout=max(self.idle_sec - idle_for, 0.05))


def main() -> None:
    """Entry point: keep the protocol on a private fd, serve, then exit hard.

    ``os._exit`` skips interpreter teardown: torch's and nano-graphrag's threads and atexit
    hooks cannot hold the exit up, and the consumer only waits on the process ending.
    """
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print() from a library must not corrupt the protocol
    inp = os.fdopen(os.dup(0), "rb")
    from reflect_jobs.config import load_settings

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    settings = load_settings()
    Path(settings.home).mkdir(parents=True, exist_ok=True)
    Child(inp, out, settings.model_idle_sec).run()
    out.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
