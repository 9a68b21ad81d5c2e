"""The review page's routes: approvals, dreams, memory stores and run trees.

Server-rendered (Starlette with Jinja2 templates, autoescaped: every string an agent
wrote, a command, a diff, a file name, is HTML-escaped, and none is ever placed in a
script, since the page has none, or in a URL but as an encoded query value). A
decision made here goes through the same calls as the command line
(``approvals approve|deny``, ``dream approve|reject``) with the reviewer's name: the
one the form asks for, or the proxy's user.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from temporalio.client import Client

from .._approvals._audit import recorded
from .._approvals._client import ApprovalRefused, decide, list_approvals
from .._live import fetch_tree
from .._taint import TaintBook
from ..dreaming._client import approve_dream, list_dreams, reject_dream, show_dream
from ..dreaming._records import QUERY_STATE, DreamState
from ..memory._manifest import read_manifest
from ..memory._names import StoreNotFound
from ..memory._stores import MemoryStores
from ._guard import SECURITY_HEADERS, Guard, Refused, Viewer
from ._views import (
    AUDIT_SHOWN,
    LISTED,
    PENDING_SHOWN,
    SHOWN_BYTES,
    diff_lines,
    dream_files,
    held_views,
    recent_runs,
    version_diff,
    whole_arguments,
)

Handler = Callable[[Request, Viewer], Awaitable[Response]]
_log = logging.getLogger(__name__)


@dataclass
class Review:
    """What the page reads and decides through: the server and the data dir."""

    client: Client
    stores: MemoryStores
    guard: Guard


def _templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resources.files(__package__) / "templates")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["q"] = lambda params: urlencode(params)
    return env


def build_app(review: Review) -> Starlette:
    guard = review.guard
    templates = _templates()
    css = (resources.files(__package__) / "static" / "style.css").read_bytes()

    def page(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                viewer = guard.viewer(request)
                if isinstance(viewer, Response):
                    response = viewer  # just signed in: on to the page without the token
                else:
                    response = await handler(request, viewer)
            except Refused as err:
                response = guard.refusal(err)
            except Exception as err:  # one line, never a traceback, for the reviewer
                _log.warning("review page %s failed", request.url.path, exc_info=True)
                text = f"lw-temporal review page: {request.url.path} failed: {err}\n"
                response = PlainTextResponse(text, status_code=500)
            response.headers.update(SECURITY_HEADERS)
            return response

        return endpoint

    def render(
        name: str, request: Request, viewer: Viewer, status: int = 200, **context: Any
    ) -> HTMLResponse:
        reviewer = viewer.name or guard.names.get(viewer.key, "")
        html = templates.get_template(name).render(
            csrf=guard.csrf(viewer),
            reviewer=reviewer,
            proxy=viewer.name is not None,
            notice=request.query_params.get("done", ""),
            here=request.url.path,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    def reviewer_of(fields: dict[str, list[str]], viewer: Viewer) -> str:
        if viewer.name is not None:
            return viewer.name
        name = (fields.get("reviewer") or [""])[0].strip()
        if not name or len(name) > 200:
            raise Refused(400, "lw-temporal review page: give your name (1 to 200 characters)\n")
        guard.names[viewer.key] = name
        return name

    def done(where: str, message: str) -> Response:
        return RedirectResponse(f"{where}?{urlencode({'done': message})}", status_code=303)

    # -- approvals ----------------------------------------------------------------------
    async def approvals(request: Request, viewer: Viewer, error: str = "") -> Response:
        listing = await list_approvals(review.client)
        decided, _ = recorded(review.stores.layout)
        pending = listing.pending[:PENDING_SHOWN]
        whole = {
            (r.workflow_id, r.id): whole_arguments(review.stores, r)
            for r in pending
            if r.arguments_cut
        }
        book = TaintBook(review.stores.layout)
        tainted = {
            r.workflow_id: found.line()
            for r in pending
            if (found := book.status(r.workflow_id, materialize=False)) is not None
        }
        return render(
            "approvals.html",
            request,
            viewer,
            status=409 if error else 200,
            listing=listing,
            pending=pending,
            hidden=len(listing.pending) - len(pending),
            whole=whole,
            tainted=tainted,
            decided=list(reversed(decided))[:50],
            error=error,
        )

    async def decide_approval(request: Request, viewer: Viewer) -> Response:
        fields = await guard.form(request, viewer)
        by = reviewer_of(fields, viewer)
        workflow_id = (fields.get("workflow_id") or [""])[0]
        request_id = (fields.get("request_id") or [""])[0]
        approve = (fields.get("decision") or [""])[0] == "approve"
        why = (fields.get("why") or [""])[0]
        try:
            record = await decide(
                review.client, workflow_id, request_id, approve=approve, by=by, why=why
            )
        except ApprovalRefused as err:
            return await approvals(request, viewer, error=str(err))
        return done("/", f"{workflow_id} {record.request.id}: {record.outcome.value} by {by}")

    # -- dreams -------------------------------------------------------------------------
    async def dreams(request: Request, viewer: Viewer) -> Response:
        return render("dreams.html", request, viewer, dreams=await list_dreams(review.client))

    async def dream(request: Request, viewer: Viewer, error: str = "") -> Response:
        workflow_id = request.query_params.get("id", "")
        state: DreamState = await review.client.get_workflow_handle(workflow_id).query(
            QUERY_STATE, result_type=DreamState
        )
        # The form decides the dream that answered, whatever ID its answer names.
        state = state.model_copy(update={"workflow_id": workflow_id})
        shown = await show_dream(review.client, workflow_id, max_bytes=SHOWN_BYTES)
        return render(
            "dream.html",
            request,
            viewer,
            status=409 if error else 200,
            state=state,
            files=dream_files(state, shown.text),
            truncated=shown.truncated,
            error=error,
        )

    async def decide_dream(request: Request, viewer: Viewer) -> Response:
        fields = await guard.form(request, viewer)
        by = reviewer_of(fields, viewer)
        workflow_id = (fields.get("workflow_id") or [""])[0]
        why = (fields.get("why") or [""])[0]
        chosen = fields.get("file", [])
        try:
            if (fields.get("decision") or [""])[0] == "reject":
                await reject_dream(review.client, workflow_id, by, why)
                return done("/dreams", f"{workflow_id}: rejected by {by}")
            if not chosen:
                raise ValueError("check the files to approve (or reject the proposal)")
            outcome = await approve_dream(review.client, workflow_id, by, why, only=chosen)
        except Exception as err:
            return await dream(_with_id(request, workflow_id), viewer, error=str(err))
        if outcome.conflicts:
            return await dream(
                _with_id(request, workflow_id), viewer, error="; ".join(outcome.conflicts)
            )
        promoted = ", ".join(outcome.promoted)
        return done("/dreams", f"{workflow_id}: {promoted} promoted by {by}")

    # -- quarantine ---------------------------------------------------------------------
    async def quarantine(request: Request, viewer: Viewer, error: str = "") -> Response:
        held, total = await asyncio.to_thread(held_views, review.stores)
        return render(
            "quarantine.html", request, viewer, status=409 if error else 200, held=held,
            total=total, error=error,
        )  # fmt: skip

    async def decide_quarantine(request: Request, viewer: Viewer) -> Response:
        fields = await guard.form(request, viewer)
        by = reviewer_of(fields, viewer)
        workflow_id = (fields.get("workflow_id") or [""])[0]
        store = (fields.get("store") or [""])[0]
        why = (fields.get("why") or [""])[0]
        decide_held = (
            review.stores.release_quarantined
            if (fields.get("decision") or [""])[0] == "release"
            else review.stores.reject_quarantined
        )
        try:
            outcome = await asyncio.to_thread(decide_held, workflow_id, by=by, why=why, store=store)
        except ValueError as err:
            return await quarantine(request, viewer, error=str(err))
        if not outcome.stores:
            return await quarantine(
                request, viewer, error=f"{workflow_id} holds nothing in {store} (decided already?)"
            )
        conflicts = [c for s in outcome.stores for c in s.conflicts]
        if conflicts:
            return await quarantine(
                request,
                viewer,
                error="nothing released, these moved since: " + "; ".join(conflicts),
            )
        decided = "released" if outcome.decision == "release" else "rejected"
        return done("/quarantine", f"{workflow_id} {store}: {decided} by {by}")

    # -- memory -------------------------------------------------------------------------
    async def memory(request: Request, viewer: Viewer) -> Response:
        stores = review.stores
        rows = [(s, stores.label(s), stores.usage(s)) for s in stores.stores()]
        return render("memory.html", request, viewer, stores=rows)

    async def store(request: Request, viewer: Viewer) -> Response:
        stores = review.stores
        ref = _store(stores, request)
        audit = stores.audit(ref)
        return render(
            "store.html",
            request,
            viewer,
            store=str(ref),
            label=stores.label(ref),
            listing=stores.list_files(ref, limit=LISTED),
            audit=list(reversed(audit))[:AUDIT_SHOWN],
            audit_count=len(audit),
        )

    async def memory_file(request: Request, viewer: Viewer) -> Response:
        stores = review.stores
        ref = _store(stores, request)
        path = request.query_params.get("path", "")
        try:
            rel, where = stores.admin_path(ref, path)
        except (StoreNotFound, ValueError) as err:
            raise Refused(404, f"lw-temporal review page: {err}\n") from None
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        diff = version_diff(stores, ref, rel, a, b) if a and b else ""
        return render(
            "file.html",
            request,
            viewer,
            store=str(ref),
            path=rel,
            where=where,
            versions=list(reversed(stores.versions(ref, rel))),
            current=stores.read(ref, rel, max_bytes=SHOWN_BYTES, shown=where),
            diff=diff_lines(diff),
            a=a,
            b=b,
        )

    # -- runs ---------------------------------------------------------------------------
    async def runs(request: Request, viewer: Viewer) -> Response:
        workflow_id = request.query_params.get("id", "")
        if not workflow_id:
            return render("runs.html", request, viewer, runs=recent_runs(review.stores))
        nodes = await fetch_tree(review.client, workflow_id) or []
        layout = review.stores.layout
        return render(
            "tree.html",
            request,
            viewer,
            root=workflow_id,
            nodes=[(n, read_manifest(layout, n.workflow_id)) for n in nodes],
        )

    async def stylesheet(request: Request, viewer: Viewer) -> Response:
        return Response(css, media_type="text/css")

    routes = [
        Route("/", page(approvals)),
        Route("/approvals/decide", page(decide_approval), methods=["POST"]),
        Route("/dreams", page(dreams)),
        Route("/dream", page(dream)),
        Route("/dreams/decide", page(decide_dream), methods=["POST"]),
        Route("/quarantine", page(quarantine)),
        Route("/quarantine/decide", page(decide_quarantine), methods=["POST"]),
        Route("/memory", page(memory)),
        Route("/memory/store", page(store)),
        Route("/memory/file", page(memory_file)),
        Route("/runs", page(runs)),
        Route("/static/style.css", page(stylesheet)),
    ]

    async def unknown(request: Request, exc: Exception) -> Response:
        """A path (or method) the page has not: turned away like any request first,
        then answered with the page's headers too."""
        status = getattr(exc, "status_code", 404)
        try:
            viewer = guard.viewer(request)
            response = (
                viewer
                if isinstance(viewer, Response)
                else PlainTextResponse("lw-temporal review page: no such page\n", status)
            )
        except Refused as err:
            response = guard.refusal(err)
        response.headers.update(SECURITY_HEADERS)
        return response

    return Starlette(routes=routes, exception_handlers={404: unknown, 405: unknown})


def _store(stores: MemoryStores, request: Request) -> Any:
    try:
        return stores.find_store(request.query_params.get("store", ""))
    except (StoreNotFound, ValueError) as err:
        raise Refused(404, f"lw-temporal review page: {err}\n") from None


def _with_id(request: Request, workflow_id: str) -> Request:
    """The request as the dream page reads it (the dream's ID in its query)."""
    scope = dict(request.scope)
    scope["query_string"] = urlencode({"id": workflow_id}).encode()
    scope["method"] = "GET"
    return Request(scope)
