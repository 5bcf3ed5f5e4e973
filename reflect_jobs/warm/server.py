"""The running worker's search socket: ``$REFLECT_HOME/run/model.sock`` (0600, in a 0700 dir).

A unix socket, never a network port. One consumer per ``REFLECT_HOME`` serves it: the first
to take the ``flock`` on ``run/model.lock`` binds it; a second consumer on the same home
serves nothing (its CLI users reach the first). Holding that lock also proves any socket
file already there is stale (left by a killed consumer), so it is unlinked and re-bound.

A connection carries one request line (bounded by :data:`~.protocol.MAX_LINE`) and gets
one answer line. Only ``ping``, ``search`` and ``recall_similar`` (per-prompt recall's
cosines, ``recall/warm_rank.py``: ``text``, ``k``, ``kb_path``; the worker adds its own vector
settings) are accepted from the socket: reindexing stays with the queue, under the
graph-writer lock.
"""

from __future__ import annotations

import fcntl
import os
import socket
import threading
from pathlib import Path

import structlog

from ..config import Settings
from .protocol import ProtocolError, encode, read_message
from .supervisor import ModelService, ServiceError

log = structlog.get_logger("reflect_jobs.warm")

SOCKET_OPS = ("ping", "search", "recall_similar")
#: The request fields passed on to the child; anything else a client sends is dropped.
SEARCH_FIELDS = (
    "query",
    "k",
    "mode",
    "repo_key",
    "only_global",
    "prefer_repo_key",
    "kb_path",
    "vectors",
    "embed_model",
)
#: A client must send its request within this long (it is local: a slow one is stuck).
READ_TIMEOUT_SEC = 10
#: How long a search may take, the child's cold start included.
SEARCH_TIMEOUT_SEC = 300


def _private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)


def serve(settings: Settings, service: ModelService) -> socket.socket | None:
    """Bind the socket and answer on a daemon thread, unless another consumer already does.

    Args:
        settings: Where the socket lives (``Settings.model_socket``).
        service: The model service that answers the requests.

    Returns:
        The listening socket, or ``None`` when another consumer holds this home's socket
        (or it cannot be bound; the CLI then searches in-process).
    """
    path = settings.model_socket
    try:
        _private_dir(path.parent)
        lock_fd = os.open(path.parent / "model.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_fd)
            log.info("model_socket_elsewhere", path=str(path))
            return None
        # We hold the lock: any socket file here belongs to a consumer that died.
        path.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))  # inside a 0700 dir, so nobody else can reach it before chmod
        os.chmod(path, 0o600)
        sock.listen(16)
    except OSError as exc:
        log.warning("model_socket_unavailable", path=str(path), error=str(exc))
        return None
    # The lock fd stays open for the life of the process (the kernel drops it on death).
    threading.Thread(
        target=_accept, args=(sock, service, lock_fd, settings), daemon=True, name="model-socket"
    ).start()
    log.info("model_socket_listening", path=str(path))
    return sock


def _accept(
    sock: socket.socket, service: ModelService, lock_fd: int, settings: Settings | None = None
) -> None:
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return  # closed
        threading.Thread(target=_answer, args=(conn, service, settings), daemon=True).start()


def _recall_fields(request: dict, settings: Settings | None) -> dict:
    """A ``recall_similar`` request as the child's ``similar`` (the hook is stdlib-only and
    cannot resolve the vector settings; the worker's own are the ones its index was built
    with, and the child still refuses another KB)."""
    try:
        k = min(max(int(request.get("k", 50)), 1), 500)
    except (TypeError, ValueError):
        k = 50
    return {
        "text": str(request.get("text") or "")[:4000],
        "k": k,
        "kb_path": str(request.get("kb_path") or ""),
        "vectors": settings.index_vectors if settings is not None else True,
        "embed_model": settings.embed_model if settings is not None else None,
    }


def _answer(conn: socket.socket, service: ModelService, settings: Settings | None = None) -> None:
    with conn:
        try:
            conn.settimeout(READ_TIMEOUT_SEC)
            with conn.makefile("rb") as rf:
                request = read_message(rf)
            if request is None:
                return
            op = request.get("op")
            if op not in SOCKET_OPS:
                answer = {"ok": False, "kind": "bad_request", "error": f"unknown op {op!r}"}
            else:
                if op == "recall_similar":
                    op, fields = "similar", _recall_fields(request, settings)
                else:
                    fields = {k: v for k, v in request.items() if k in SEARCH_FIELDS}
                try:
                    answer = service.call(str(op), timeout=SEARCH_TIMEOUT_SEC, **fields)
                except ServiceError as exc:
                    answer = {"ok": False, "kind": "unavailable", "error": str(exc)}
            answer = {k: v for k, v in answer.items() if k != "id"}
            conn.settimeout(SEARCH_TIMEOUT_SEC)
            conn.sendall(encode({**answer, "via": "worker"}))
        except (ProtocolError, OSError) as exc:
            log.info("model_socket_bad_request", error=str(exc)[:200])
