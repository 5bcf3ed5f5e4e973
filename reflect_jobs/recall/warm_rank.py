"""The worker's warm model for per-prompt recall, within a strict time budget (stdlib only).

Per-prompt recall runs in the UserPromptSubmit hook, before the agent sees the prompt, so it
must stay within a few interpreter start-ups whatever the worker does. When a worker serves
``$REFLECT_HOME/run/model.sock``, its model child already holds the embedder and the note
vectors: one ``recall_similar`` request gives the cosine of the prompt to its nearest notes
(``warm/server.py``). The whole exchange — connect, send, read one line — gets
``REFLECT_RECALL_WORKER_MS`` (default 30 ms, the socket module's import included) of wall time; no socket, a refused connection,
a timeout, a line that is not the answer (garbage, too long, the wrong shape) all mean "no
similarities" and the lexical score decides alone. A worker that answered badly is logged
once per call to ``hook-errors.log``; one that is merely absent or slow is not an error.
"""

from __future__ import annotations

import json
import os
import time

BUDGET_ENV = "REFLECT_RECALL_WORKER_MS"
DEFAULT_BUDGET_MS = 30
#: A broken worker is logged at most once per this many seconds (logging imports the
#: redaction engine: a hook must not pay for it on every prompt of a broken week).
LOG_EVERY_SEC = 600.0
#: Notes asked for: enough to cover a repository's own among the whole KB's nearest.
K = 200
#: The longest answer line read (200 ids and scores are ~12 KiB).
MAX_ANSWER = 256 * 1024
#: The prompt text sent (the model reads ~256 tokens anyway).
MAX_TEXT = 2000


def budget_sec() -> float:
    """The budget in seconds (the variable, else the config file, else the default).

    Returns:
        ``REFLECT_RECALL_WORKER_MS`` / 1000 (a bad value reads as the default; never < 0).
    """
    from reflect_jobs.envpaths import get

    raw = get(BUDGET_ENV)
    try:
        ms = int(raw) if raw else DEFAULT_BUDGET_MS
    except ValueError:
        ms = DEFAULT_BUDGET_MS
    return max(ms, 0) / 1000.0


def similar(text: str, kb_root: str, *, socket_path: str | None = None) -> dict[str, float]:
    """Cosine similarity of ``text`` to its nearest notes, from the running worker, or ``{}``.

    Args:
        text: The prompt (bounded to :data:`MAX_TEXT` characters).
        kb_root: The KB the hook reads (the worker answers only for its own KB).
        socket_path: The socket (default ``$REFLECT_HOME/run/model.sock``).

    Returns:
        ``{note id: cosine}``; empty when no worker answered well within the budget.
    """
    started = time.monotonic()  # the budget covers the import and connect too
    budget = budget_sec()
    if budget <= 0 or not text.strip():
        return {}
    if socket_path is None:
        from reflect_jobs.envpaths import home_dir_str

        socket_path = os.path.join(home_dir_str(), "run", "model.sock")
    if not os.path.exists(socket_path):
        return {}
    import socket

    deadline = started + budget
    request = {"op": "recall_similar", "text": text[:MAX_TEXT], "k": K, "kb_path": kb_root}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            sock.connect(socket_path)
            sock.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0:
                    return {}  # slow: the lexical score decides (not an error)
                sock.settimeout(left)
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
                if len(data) > MAX_ANSWER:
                    raise ValueError("answer too long")
    except (OSError, TimeoutError):
        return {}
    except ValueError as exc:
        _log(str(exc))
        return {}
    return _parse(data)


def _parse(data: bytes) -> dict[str, float]:
    """The answer's hits as ``{id: cosine}``; anything else is logged and ignored."""
    try:
        answer = json.loads(data)
    except ValueError:
        _log("the worker's answer is not JSON")
        return {}
    if not isinstance(answer, dict):
        _log("the worker's answer is not an object")
        return {}
    if not answer.get("ok"):
        return {}  # another KB, no vectors, a child that could not answer: not ours to log
    out: dict[str, float] = {}
    hits = answer.get("hits")
    for hit in hits if isinstance(hits, list) else []:
        if (
            isinstance(hit, list)
            and len(hit) == 2
            and isinstance(hit[0], str)
            and isinstance(hit[1], (int, float))
            and not isinstance(hit[1], bool)
        ):
            out[hit[0]] = max(-1.0, min(1.0, float(hit[1])))
    if hits and not out:
        _log("the worker's hits have the wrong shape")
    return out


def _log(what: str) -> None:
    """One line to ``hook-errors.log``, at most once per :data:`LOG_EVERY_SEC`."""
    from reflect_jobs.envpaths import home_dir_str

    mark = os.path.join(home_dir_str(), "recall", "worker-answer-bad")
    try:
        if time.time() - os.stat(mark).st_mtime < LOG_EVERY_SEC:
            return
    except OSError:
        pass
    try:
        os.makedirs(os.path.dirname(mark), mode=0o700, exist_ok=True)
        os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
        os.utime(mark)
    except OSError:
        pass
    from reflect_jobs.hook_log import log_error

    log_error(f"per-prompt recall: {what}; lexical ranking used")
