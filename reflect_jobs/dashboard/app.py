"""The dashboard's web app (Starlette): the page, its two views, the JSON API and the POSTs.

Only ``reflect-jobs ui`` imports this module (it needs the ``ui`` extra). Security, in the
order a request meets it (:class:`LocalOnly`): the peer must be ``127.0.0.1`` (the server
binds only there; this also holds behind an unexpected proxy), and the ``Host`` header must
name ``127.0.0.1`` or ``localhost`` so a DNS-rebinding page cannot talk to it under its own
name. Every POST (retry, resume, review accept/reject, forget/restore, item done/drop) needs this
run's token in the ``X-Reflect-Token`` header (else 403): the page carries it, other sites cannot read it. Every
response forbids framing and caching, and the Content-Security-Policy allows scripts and
styles from this origin only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any

import structlog
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..config import Settings
from . import data, memory, render
from .token import HEADER, token_ok

#: Peers allowed to connect (the server binds 127.0.0.1 only).
ALLOWED_CLIENTS = frozenset({"127.0.0.1"})
#: Host names a request may address (anything else is a rebinding attempt or a mistake).
ALLOWED_HOSTS = frozenset({"127.0.0.1", "localhost"})

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class LocalOnly:
    """ASGI middleware: 403 unless the peer is 127.0.0.1 and ``Host`` names loopback."""

    def __init__(self, app: ASGIApp) -> None:
        """Wrap an app.

        Args:
            app: The app requests go to once they pass.
        """
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check an HTTP request's peer and Host, then pass it on or answer 403.

        Args:
            scope: The ASGI scope.
            receive: The ASGI receive channel.
            send: The ASGI send channel.
        """
        if scope["type"] == "http":
            client = scope.get("client") or ("", 0)
            headers = dict(scope.get("headers") or [])
            host = headers.get(b"host", b"").decode("latin-1")
            if client[0] not in ALLOWED_CLIENTS:
                await _forbidden("only 127.0.0.1 may connect")(scope, receive, send)
                return
            if not host_allowed(host):
                await _forbidden("Host must be 127.0.0.1 or localhost")(scope, receive, send)
                return
        await self.app(scope, receive, send)


def host_allowed(host: str) -> bool:
    """Whether a ``Host`` header names this machine's loopback by an allowed name.

    Args:
        host: The header's value, with or without a port (empty when absent).

    Returns:
        ``True`` for ``127.0.0.1``/``localhost`` with or without a numeric port.
    """
    name = host.strip().lower()
    if not name or name.startswith("["):
        return False  # absent, or an IPv6 literal: this server never binds one
    if ":" in name:
        name, port = name.rsplit(":", 1)
        if not port.isdigit():
            return False
    return name in ALLOWED_HOSTS


def _forbidden(message: str) -> Response:
    return PlainTextResponse(message + "\n", status_code=403, headers=SECURITY_HEADERS)


def _static(name: str) -> bytes:
    return (resources.files(__package__) / "static" / name).read_bytes()


def create_app(
    settings: Settings, *, token: str, schedule: Callable[[str, str], None]
) -> Starlette:
    """Build the dashboard for one run of the server.

    Args:
        settings: The settings (ledger, queue, KB, caps).
        token: This run's token (:func:`reflect_jobs.dashboard.token.new_token`).
        schedule: ``schedule(stage, job_id)``, called for each job a retry or resume
            re-queues, after the ledger commits (``HueyDispatcher.schedule``).

    Returns:
        The ASGI app, wrapped in :class:`LocalOnly`.
    """
    from ..ledger import admin
    from ..ledger.jobs import IllegalTransition

    statics = {
        "page.js": (_static("page.js"), "text/javascript; charset=utf-8"),
        "page.css": (_static("page.css"), "text/css; charset=utf-8"),
    }

    def html(content: str) -> HTMLResponse:
        return HTMLResponse(content, headers=SECURITY_HEADERS)

    def js(content: Any, status_code: int = 200) -> JSONResponse:
        return JSONResponse(content, status_code=status_code, headers=SECURITY_HEADERS)

    def overview(request: Request) -> dict[str, Any]:
        state = request.query_params.get("state") or None
        stage = request.query_params.get("stage") or None
        snapshot = data.overview(settings)
        snapshot["jobs"] = memory.jobs(settings, state=state, stage=stage)
        snapshot["jobs_filter"] = {"state": state or "", "stage": stage or ""}
        return snapshot

    def page(request: Request) -> Response:
        try:
            snapshot = overview(request)
        except ValueError as exc:  # a bad ?state= in a bookmarked address
            return PlainTextResponse(f"{exc}\n", status_code=400, headers=SECURITY_HEADERS)
        return html(render.render_page(snapshot, token=token))

    def fragment(request: Request) -> Response:
        try:
            return html(render.render_sections(overview(request)))
        except ValueError as exc:
            return PlainTextResponse(f"{exc}\n", status_code=400, headers=SECURITY_HEADERS)

    def fragment_memory(request: Request) -> Response:
        from .render_memory import render_memory

        return html(render_memory(memory.memory(settings)))

    def api_memory(request: Request) -> Response:
        return js(memory.memory(settings))

    def api_jobs(request: Request) -> Response:
        try:
            return js(
                memory.jobs(
                    settings,
                    state=request.query_params.get("state") or None,
                    stage=request.query_params.get("stage") or None,
                )
            )
        except ValueError as exc:
            return js({"error": str(exc)}, status_code=400)

    def static(request: Request) -> Response:
        found = statics.get(request.path_params["name"])
        if found is None:
            return PlainTextResponse("not found\n", status_code=404, headers=SECURITY_HEADERS)
        return Response(found[0], media_type=found[1], headers=SECURITY_HEADERS)

    def api_status(request: Request) -> Response:
        from ..status import collect_status

        return js(collect_status(settings))

    def api_overview(request: Request) -> Response:
        return js(data.overview(settings))

    def api_chart(request: Request) -> Response:
        from .chart import spend_chart_svg

        svg = spend_chart_svg(data.spend_series(settings.db_url), cap=settings.daily_max)
        return Response(svg, media_type="image/svg+xml", headers=SECURITY_HEADERS)

    def api_search(request: Request) -> Response:
        query = request.query_params.get("q", "")
        mode = request.query_params.get("mode", "lexical")
        try:
            return js(data.search_notes(settings, query, mode=mode))
        except ValueError as exc:
            return js({"error": str(exc)}, status_code=400)

    def api_open_items(request: Request) -> Response:
        return js(data.open_items_by_repository(settings))

    def authorized(request: Request) -> bool:
        return token_ok(token, request.headers.get(HEADER))

    def api_retry(request: Request) -> Response:
        if not authorized(request):
            return js({"error": f"missing or wrong {HEADER} header"}, status_code=403)
        job_id = request.path_params["job_id"]
        try:
            done = admin.retry_jobs(settings.db_url, [job_id], schedule=schedule)
        except admin.JobNotFound as exc:
            return js({"error": str(exc)}, status_code=404)
        except IllegalTransition as exc:
            return js({"error": str(exc)}, status_code=409)
        return js(
            {
                "retried": [{"id": j, "stage": st} for j, st in done],
                "message": "; ".join(f"{j}: queued at {st}" for j, st in done),
            }
        )

    def api_resume(request: Request) -> Response:
        if not authorized(request):
            return js({"error": f"missing or wrong {HEADER} header"}, status_code=403)
        done = admin.resume(settings.db_url, schedule=schedule)
        return js(
            {
                "was_halted": done.reason,
                "requeued": [{"id": j, "stage": st} for j, st in done.requeued],
                "message": f"write stage resumed (was: {done.reason or 'not halted'}); "
                f"{len(done.requeued)} job(s) re-queued",
            }
        )

    def api_review(request: Request) -> Response:
        if not authorized(request):
            return js({"error": f"missing or wrong {HEADER} header"}, status_code=403)
        from ..ledger.review import ReviewError
        from ..pipeline import note_edits

        learning_id, verb = request.path_params["learning_id"], request.path_params["verb"]
        if verb not in ("accept", "reject"):
            return js({"error": "verb must be accept or reject"}, status_code=404)
        try:
            shown = note_edits.review_decide(settings.db_url, learning_id, verb, by="dashboard")
        except ReviewError as exc:
            return js({"error": str(exc)}, status_code=409)
        kb_changed()
        return js(
            {
                "id": learning_id,
                "status": shown["status"],
                "message": f"{learning_id}: {shown['status']} ({shown['title']})",
            }
        )

    def api_learning(request: Request) -> Response:
        if not authorized(request):
            return js({"error": f"missing or wrong {HEADER} header"}, status_code=403)
        from ..pipeline import curation

        learning_id, verb = request.path_params["learning_id"], request.path_params["verb"]
        if verb not in ("forget", "restore"):
            return js({"error": "verb must be forget or restore"}, status_code=404)
        act = curation.forget if verb == "forget" else curation.restore
        try:
            state = act(settings.kb_path, settings.db_url, learning_id, by="dashboard")
        except curation.CurationError as exc:
            return js({"error": str(exc).splitlines()[0]}, status_code=409)
        kb_changed()
        return js({"id": learning_id, "status": state, "message": f"{learning_id}: {state}"})

    async def api_item_change(request: Request) -> Response:
        if not authorized(request):
            return js({"error": f"missing or wrong {HEADER} header"}, status_code=403)
        from ..reflections.store import StoreError

        raw = await request.body()
        if len(raw) > 16384:
            return js({"error": "request body over 16 KB"}, status_code=413)
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            status = memory.change_item(
                settings,
                str(body.get("repository") or ""),
                str(body.get("id") or ""),
                str(body.get("op") or ""),
                str(body.get("note") or ""),
            )
        except (ValueError, StoreError) as exc:
            return js({"error": str(exc).splitlines()[0] if str(exc) else "bad request"}, 400)
        return js({"id": body["id"], "status": status, "message": f"{body['id']}: {status}"})

    def kb_changed() -> None:
        """Tell the worker the KB changed (the context store learns of it at the reindex)."""
        if settings.skip_reindex:
            return
        from .. import tasks

        try:
            tasks.HueyDispatcher().kb_changed()
        except Exception as exc:  # noqa: BLE001 - the decision is committed; a later reindex
            # (any add, or `reindex`) brings the context store in line
            structlog.get_logger("reflect_jobs.dashboard").warning(
                "reindex_request_failed", error=str(exc)[:200]
            )

    routes = [
        Route("/", page),
        Route("/fragment", fragment),
        Route("/fragment/memory", fragment_memory),
        Route("/api/memory", api_memory),
        Route("/api/jobs", api_jobs),
        Route("/api/review/{learning_id}/{verb}", api_review, methods=["POST"]),
        Route("/api/learnings/{learning_id}/{verb}", api_learning, methods=["POST"]),
        Route("/api/items/change", api_item_change, methods=["POST"]),
        Route("/static/{name}", static),
        Route("/api/status", api_status),
        Route("/api/overview", api_overview),
        Route("/api/chart.svg", api_chart),
        Route("/api/search", api_search),
        Route("/api/open-items", api_open_items),
        Route("/api/retry/{job_id:path}", api_retry, methods=["POST"]),
        Route("/api/resume", api_resume, methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(LocalOnly)
    return app
