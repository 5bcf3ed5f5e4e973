"""Ask the running worker to search: the CLI's warm path (and any other entry point's).

:func:`search_via_worker` answers through ``$REFLECT_HOME/run/model.sock`` when a worker
serves it and returns ``None`` otherwise — no socket, nobody listening (a stale file), a
worker serving another KB, a child that could not answer — so the caller searches
in-process, silently. Light by design: the standard library and the lexical-side modules
only, so the warm path costs an interpreter start and one round trip.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

from ..config import Settings, load_settings
from .protocol import ProtocolError, encode, read_message

if TYPE_CHECKING:
    from ..index.search import SearchResult

#: Connecting to a local socket is instant; a worker that does not accept is wedged.
CONNECT_TIMEOUT_SEC = 2.0
#: The child's cold start (torch, the model) plus the query, on a loaded machine.
ANSWER_TIMEOUT_SEC = 120.0


def search_via_worker(
    query: str,
    k: int = 5,
    mode: str = "hybrid",
    repo: str | None = None,
    *,
    settings: Settings | None = None,
) -> SearchResult | None:
    """Search through the running worker, or say it cannot (``None``: search in-process).

    Args:
        query: Free text.
        k: At most this many hits.
        mode: As :func:`reflect_jobs.index.search.search`.
        repo: A repository scope, forwarded as is (``None``: no scope).
        settings: The caller's settings; ``None`` reads the environment.

    Returns:
        The same :class:`~reflect_jobs.index.search.SearchResult` in-process search would
        give, or ``None`` when no worker answered.

    Raises:
        SearchError: The worker found the lexical index damaged (the same one line
            in-process search raises).
    """
    from ..index.search import SearchError, SearchResult

    s = settings or load_settings()
    path = s.model_socket
    if not path.exists():
        return None
    request = {
        "op": "search",
        "query": query,
        "k": k,
        "mode": mode,
        "kb_path": str(s.kb_path),
        "vectors": s.index_vectors,
        "embed_model": s.embed_model,
    }
    if repo is not None:
        request["repo"] = repo
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CONNECT_TIMEOUT_SEC)
            sock.connect(str(path))
            sock.settimeout(ANSWER_TIMEOUT_SEC)
            sock.sendall(encode(request))
            with sock.makefile("rb") as rf:
                answer = read_message(rf)
    except (OSError, ProtocolError):
        return None  # no worker (refused: a stale file), or it broke: in-process answers
    if answer is None:
        return None
    if answer.get("ok"):
        return SearchResult(list(answer.get("hits") or []), list(answer.get("warnings") or []))
    if answer.get("kind") == "SearchError":
        raise SearchError(str(answer.get("error")))
    return None
