"""Ask the running worker to search: the CLI's warm path (and any other entry point's).

:func:`search_via_worker` answers through ``$REFLECT_HOME/run/model.sock`` when a worker
serves it, scoped (``--repo``/``--global``) or not. It returns ``None`` when there is no
worker — no socket, nobody listening (a stale file), a worker serving another KB — so the
caller searches in-process, silently. A worker that *is* there but answers garbage, an
error, or nothing within ``REFLECT_SEARCH_WORKER_SEC`` raises :class:`WorkerFailed`: the
caller answers lexically (no model load in the CLI) and says so. Light by design: the
standard library and the lexical-side modules only, so the warm path costs an interpreter
start and one round trip.
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


class WorkerFailed(RuntimeError):
    """A worker is there but gave no usable answer in time (the message says what)."""


def search_via_worker(
    query: str,
    k: int = 5,
    mode: str = "hybrid",
    repo: str | None = None,
    *,
    only_global: bool = False,
    prefer_repo: str | None = None,
    settings: Settings | None = None,
    budget_sec: float | None = None,
) -> SearchResult | None:
    """Search through the running worker, or say it cannot (``None``: search in-process).

    Args:
        query: Free text.
        k: At most this many hits.
        mode: As :func:`reflect_jobs.index.search.search`.
        repo: A repository key to scope to (``None``: no repository scope).
        only_global: Global learnings only.
        prefer_repo: Without a scope, the repository whose learnings go first at equal
            relevance (a worker from before this field ignores it: its answer is unscoped).
        settings: The caller's settings; ``None`` reads the environment.
        budget_sec: How long to wait for the answer (default
            ``Settings.search_worker_sec``).

    Returns:
        The same :class:`~reflect_jobs.index.search.SearchResult` in-process search would
        give, or ``None`` when no worker serves this KB (no socket, refused, another KB).

    Raises:
        SearchError: The worker found the lexical index damaged (the same one line
            in-process search raises).
        WorkerFailed: The worker did not answer within the budget, or answered garbage or
            an error.
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
        request["repo_key"] = repo
    if only_global:
        request["only_global"] = True
    if prefer_repo is not None:
        request["prefer_repo_key"] = prefer_repo
    budget = s.search_worker_sec if budget_sec is None else budget_sec
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        return None
    with sock:
        try:
            sock.settimeout(CONNECT_TIMEOUT_SEC)
            sock.connect(str(path))
        except OSError:
            return None  # nobody listening (a stale file): in-process answers
        try:
            sock.settimeout(budget)
            sock.sendall(encode(request))
            with sock.makefile("rb") as rf:
                answer = read_message(rf)
        except TimeoutError:
            raise WorkerFailed(f"the worker did not answer within {budget:g} s") from None
        except (OSError, ProtocolError) as exc:
            raise WorkerFailed(f"the worker's answer was unusable ({exc})"[:300]) from None
    if answer is None:
        raise WorkerFailed("the worker closed the connection without an answer")
    if answer.get("ok"):
        hits = answer.get("hits")
        if not isinstance(hits, list) or not all(
            isinstance(h, dict) and isinstance(h.get("id"), str) for h in hits
        ):
            raise WorkerFailed("the worker's answer was unusable (hits are not a list of hits)")
        reason = answer.get("reason")
        return SearchResult(
            hits,
            [str(w) for w in answer.get("warnings") or []],
            str(reason) if reason else None,
        )
    if answer.get("kind") == "SearchError":
        raise SearchError(str(answer.get("error")))
    if answer.get("kind") == "mismatch":
        return None  # a worker for another KB or index setting: in-process answers
    raise WorkerFailed(
        f"the worker could not answer ({answer.get('kind')}: {answer.get('error')})"[:300]
    )
