"""The operator's dashboard: its router, and logging in. Server-rendered with Jinja2
(dashboard_render.py), no JavaScript but the chat page's own script; auth and CSRF live in
dashboard_session.py.

    GET  /dashboard                        → /dashboard/facts
    GET  /dashboard/login, POST            the API token, once → session cookie
    POST /dashboard/logout
    GET  /dashboard/facts, POST, …         facts and deleting them: dashboard_facts.py
    GET  /dashboard/audit, /audit/{id}     the timeline and one row: dashboard_audit.py
    GET  /dashboard/episodes, POST forget  past conversations: dashboard_episodes.py
    GET  /dashboard/chat, POST send, …     chat, with what was remembered: dashboard_chat.py
    GET  /dashboard/import, POST           import a history export: dashboard_import.py
    GET  /dashboard/static/{name}          the stylesheet, the chat and import pages' scripts
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import FileResponse, Response

from caesar import people
from caesar.api import (
    dashboard_audit,
    dashboard_chat,
    dashboard_episodes,
    dashboard_facts,
    dashboard_import,
)
from caesar.api.auth_limit import AuthLocked, client_address, limiter_of
from caesar.api.dashboard_render import HERE, HtmlErrors, page, redirect, set_session
from caesar.api.dashboard_session import COOKIE_PATH, FormViewerDep, codec_for
from caesar.api.deps import SESSION_COOKIE, ServicesDep, check_person
from caesar.errors import NotFound
from caesar.memory.scope import Scope

router = APIRouter(prefix="/dashboard", include_in_schema=False, route_class=HtmlErrors)


def _safe_next(target: str | None) -> str:
    """Only back into the dashboard: never an open redirect to another host."""
    if (
        target
        and target.startswith("/dashboard/")
        and not target.startswith("//")
        and "\\" not in target
    ):
        return target
    return "/dashboard/facts"


def _login_page(
    request: Request, next: str | None, error: str | None, status: int = 200
) -> Response:
    return page(request, None, "login.html", {"next": _safe_next(next), "error": error}, status)


def _locked_out(request: Request, next: str | None, locked: AuthLocked) -> Response:
    response = _login_page(request, next, locked.message, 429)
    response.headers["Retry-After"] = str(locked.retry_after)
    return response


# Everything a dashboard page loads, shipped in the package (no build step, no CDN).
_STATIC = {
    "dashboard.css": "text/css",
    "chat.js": "text/javascript",
    "import.js": "text/javascript",
}
# Routes that read their own request body as it arrives, under a limit of their own: the
# app's BodySizeLimit (max_request_bytes) passes them by.
STREAMED = frozenset({dashboard_import.UPLOAD_PATH})


@router.get("/static/{name}")
def static_file(name: str) -> Response:
    media_type = _STATIC.get(name)
    if media_type is None:
        raise NotFound(f"no file {name!r} here")
    return FileResponse(HERE / "static" / name, media_type=media_type)


@router.get("")
def home() -> Response:
    return redirect("/dashboard/facts")


@router.get("/login")
def login_form(
    request: Request,
    services: ServicesDep,
    next: Annotated[str | None, Query(max_length=500)] = None,
) -> Response:
    if services.settings.api_token is None:  # loopback-only mode: nothing to log in to
        return redirect(_safe_next(next))
    limiter = limiter_of(request)
    if limiter is not None:  # say so before the operator types the token in vain
        try:
            limiter.check(client_address(request))
        except AuthLocked as locked:
            return _locked_out(request, next, locked)
    return _login_page(request, next, None)


@router.post("/login")
def login(
    request: Request,
    services: ServicesDep,
    token: Annotated[str, Form(max_length=1000)] = "",
    next: Annotated[str, Form(max_length=500)] = "",
) -> Response:
    if services.settings.api_token is None:
        return redirect(_safe_next(next))
    try:
        person = check_person(request, token, via="dashboard login", frontend=False)
    except AuthLocked as locked:
        return _locked_out(request, next, locked)
    if person is None:
        return _login_page(request, next, "That is not the API token.", 401)
    with services.db.read() as session:
        stamp = people.session_stamp(Scope(person, session))
    _sid, cookie = codec_for(request).issue(person, stamp)
    response = redirect(_safe_next(next))
    set_session(response, request, cookie)
    return response


@router.post("/logout")
def logout(request: Request, viewer: FormViewerDep) -> Response:
    response = redirect("/dashboard/login")
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
    return response


for _pages in (
    dashboard_facts,
    dashboard_audit,
    dashboard_episodes,
    dashboard_chat,
    dashboard_import,
):
    router.include_router(_pages.router)
