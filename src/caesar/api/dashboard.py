"""The operator's dashboard: facts ranked by importance (ADR-0034 §5), episodes, the audit log.

Server-rendered with Jinja2 (autoescape on, no `|safe` anywhere), no JavaScript; a strict
Content-Security-Policy backs the escaping up. Auth and CSRF live in `dashboard_session`.

    GET  /dashboard                    → /dashboard/facts
    GET  /dashboard/login, POST        the API token, once → session cookie
    POST /dashboard/logout
    GET  /dashboard/facts              facts, most important first; create / edit / delete
    POST /dashboard/facts              create or edit (form: key, value)
    POST /dashboard/facts/{key}/delete
    GET  /dashboard/audit              timeline, newest first, rows in words; ?event_type= &q=
                                       &before_id= | &after_id= (keyset pages both ways)
    GET  /dashboard/audit/{id}         one row in full, with what it refers to and what refers to
                                       it; a turn's facts and past conversations
    GET  /dashboard/episodes           past conversations, newest first; ?q= &before= | &after=
    POST /dashboard/episodes/forget    forget one (form: conversation_id)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlencode

import jinja2
from fastapi import APIRouter, Form, Query, Request
from fastapi import Path as FastAPIPath
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from sqlalchemy import Text, cast, exists, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from caesar import audit
from caesar.api.auth_limit import AuthLocked, client_address, limiter_of
from caesar.api.dashboard_session import (
    COOKIE_PATH,
    SESSION_MAX_AGE,
    Denied,
    FormViewerDep,
    LoginRequired,
    Viewer,
    ViewerDep,
    codec_for,
)
from caesar.api.deps import SESSION_COOKIE, ServicesDep, check_token
from caesar.clock import utcnow
from caesar.db.models import AuditLog, Fact
from caesar.errors import InputError, NotFound
from caesar.memory.context.render import SPEAKERS, relative_time
from caesar.memory.episodes.listing import Cursor, like_pattern, list_episodes
from caesar.memory.facts.store import normalise_key
from caesar.memory.forget import ForgetRequest, forget
from caesar.memory.transcript import conversation_turns
from caesar.services import Services

HERE = Path(__file__).resolve().parent
PAGE_SIZE = 50
# The largest id SQLite can store: a bigger one is a 422 page, not an OverflowError (a 500).
MAX_ID = 2**63 - 1
TIMELINE_PAYLOAD_CHARS = 1500

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

# Rows that point at the chat they came from, and where: (label, payload key or "subject_id").
_REFERENCES = (
    ("source chat", "audit_log_id"),
    ("source", "source_audit_id"),
    ("subject", "subject_id"),
    ("turn", "turn_audit_id"),
)
# Rows whose subject_id is their conversation's id (memory/conversations.py).
_CHAT_ROWS = (audit.CHAT_COMPLETED, audit.CHAT_FAILED)
# Rows written *about* a chat (subject_id = the chat's id), listed on its detail page.
_DERIVED = (
    audit.FACT_EXTRACTED,
    audit.FACT_UPDATED,
    audit.EXTRACT_FAILED,
    audit.EPISODE_SUMMARISED,
    audit.EPISODE_SUMMARISE_SKIPPED,
    audit.EPISODE_SUMMARISE_FAILED,
    audit.EPISODE_RECALLED,
)


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,  # every template, whatever its name
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["ago"] = lambda then, now: relative_time(then, now)
    env.filters["iso"] = lambda moment: moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    env.filters["said"] = operator_said
    return env


def operator_said(payload: Any) -> str:
    """A chat row's message from the operator: the last user turn it sent. Pure."""
    messages = payload.get("messages") if isinstance(payload, dict) else None
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, dict) and message.get("role") == "user":
            return str(message.get("content", ""))
    return ""


templates = Jinja2Templates(env=_env())


class _HtmlErrors(APIRoute):
    """Dashboard failures answer as HTML pages (or a redirect to log in), not the JSON errors
    the API routes give; the app-wide handlers stay untouched."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except LoginRequired:
                if request.method == "GET":
                    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                    return _redirect(f"/dashboard/login?next={quote(here)}")
                return _problem(request, 401, "log in first")
            except Denied as exc:
                return _problem(request, exc.status, exc.message)
            except AuthLocked as locked:  # too many wrong bearer tokens from this address
                response = _problem(request, 429, locked.message)
                response.headers["Retry-After"] = str(locked.retry_after)
                return response
            except NotFound as exc:
                return _problem(request, 404, str(exc))
            except InputError as exc:
                return _problem(request, 400, str(exc))
            except RequestValidationError as exc:
                where = "; ".join(
                    f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}"
                    for e in exc.errors()
                )
                return _problem(request, 422, f"invalid request: {where}"[:500])

        return guarded


router = APIRouter(prefix="/dashboard", include_in_schema=False, route_class=_HtmlErrors)


# -- rendering --------------------------------------------------------------------------------
def _set_session(response: Response, request: Request, cookie: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=SESSION_MAX_AGE,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def _page(
    request: Request, viewer: Viewer | None, name: str, context: dict[str, Any], status: int = 200
) -> Response:
    response = templates.TemplateResponse(
        request,
        name,
        {"viewer": viewer, "now": utcnow(), **context},
        status_code=status,
        headers=SECURITY_HEADERS,
    )
    if viewer is not None and viewer.new_cookie is not None:
        _set_session(response, request, viewer.new_cookie)
    return response


def _problem(request: Request, status: int, message: str) -> Response:
    return _page(request, None, "error.html", {"status": status, "message": message}, status)


def _login_page(
    request: Request, next: str | None, error: str | None, status: int = 200
) -> Response:
    return _page(request, None, "login.html", {"next": _safe_next(next), "error": error}, status)


def _locked_out(request: Request, next: str | None, locked: AuthLocked) -> Response:
    response = _login_page(request, next, locked.message, 429)
    response.headers["Retry-After"] = str(locked.retry_after)
    return response


def _redirect(location: str) -> Response:
    return RedirectResponse(location, status_code=303, headers=SECURITY_HEADERS)


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


# -- pages ------------------------------------------------------------------------------------
@router.get("/static/dashboard.css")
def stylesheet() -> FileResponse:
    return FileResponse(HERE / "static" / "dashboard.css", media_type="text/css")


@router.get("")
def home() -> Response:
    return _redirect("/dashboard/facts")


@router.get("/login")
def login_form(
    request: Request,
    services: ServicesDep,
    next: Annotated[str | None, Query(max_length=500)] = None,
) -> Response:
    if services.settings.api_token is None:  # loopback-only mode: nothing to log in to
        return _redirect(_safe_next(next))
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
        return _redirect(_safe_next(next))
    try:
        ok = check_token(request, token, via="dashboard login")
    except AuthLocked as locked:
        return _locked_out(request, next, locked)
    if not ok:
        return _login_page(request, next, "That is not the API token.", 401)
    _sid, cookie = codec_for(request).issue()
    response = _redirect(_safe_next(next))
    _set_session(response, request, cookie)
    return response


@router.post("/logout")
def logout(request: Request, viewer: FormViewerDep) -> Response:
    response = _redirect("/dashboard/login")
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
    return response


@router.get("/facts")
def facts_page(
    request: Request,
    viewer: ViewerDep,
    services: ServicesDep,
    saved: Annotated[str | None, Query(max_length=200)] = None,
    deleted: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    return _facts(request, viewer, services, notice=_notice(saved, deleted))


def _notice(saved: str | None, deleted: str | None) -> str | None:
    if saved:
        return f"Saved {saved}."
    if deleted:
        return f"Deleted {deleted}."
    return None


def _facts(
    request: Request,
    viewer: Viewer,
    services: Services,
    *,
    notice: str | None = None,
    error: str | None = None,
    draft: dict[str, str] | None = None,
    status: int = 200,
) -> Response:
    settings = services.settings.memory
    context = {
        "facts": services.facts.list_all(),
        "notice": notice,
        "error": error,
        "draft": draft or {"key": "", "value": ""},
        "importance": settings.facts_importance,
        "inject": settings.facts_inject,
    }
    return _page(request, viewer, "facts.html", context, status)


@router.post("/facts")
def save_fact(
    request: Request,
    viewer: FormViewerDep,
    services: ServicesDep,
    key: Annotated[str, Form(max_length=10_000)] = "",
    value: Annotated[str, Form(max_length=10_000)] = "",
) -> Response:
    try:
        fact, _audit_id = services.facts.set_by_operator(key, value)
    except InputError as exc:  # show the form again, with what was typed
        draft = {"key": key, "value": value}
        return _facts(request, viewer, services, error=str(exc), draft=draft, status=400)
    return _redirect(f"/dashboard/facts?saved={quote(fact.key)}")


@router.post("/facts/{key}/delete")
def delete_fact_form(key: str, viewer: FormViewerDep, services: ServicesDep) -> Response:
    services.facts.delete(key)
    return _redirect(f"/dashboard/facts?deleted={quote(normalise_key(key))}")


# -- audit ------------------------------------------------------------------------------------
def pretty(payload: Any, limit: int | None = None) -> str:
    text = json.dumps(payload, indent=2, ensure_ascii=False, default=str)
    if limit is not None and len(text) > limit:
        return text[:limit] + "\n…"
    return text


def references(row: AuditLog) -> list[tuple[str, int]]:
    """(label, audit id) of the rows this one points at: the chat a fact was extracted from, the
    chat a recalled episode summarises, the episodes a chat turn recalled. Pure."""
    payload = row.payload if isinstance(row.payload, dict) else {}
    found: list[tuple[str, int]] = []
    for label, field in _REFERENCES:
        if field == "subject_id" and row.event_type in _CHAT_ROWS:
            continue  # a chat row's subject is its conversation, not another row
        value = row.subject_id if field == "subject_id" else payload.get(field)
        if isinstance(value, int) and not isinstance(value, bool):
            found.append((label, value))
    memory = payload.get("memory")
    if isinstance(memory, dict) and isinstance(memory.get("episodes_recalled"), list):
        found += [
            ("recalled", v)
            for v in memory["episodes_recalled"]
            if isinstance(v, int) and not isinstance(v, bool)
        ]
    seen: set[int] = {row.id}
    unique = []
    for label, target in found:
        if target not in seen:
            seen.add(target)
            unique.append((label, target))
    return unique


def _resolve(session: Any, rows: list[AuditLog]) -> dict[int, list[dict[str, Any]]]:
    """Each row's references with the event type they point at (None: swept by retention)."""
    refs = {row.id: references(row) for row in rows}
    wanted = {target for pairs in refs.values() for _label, target in pairs}
    types: dict[int, str] = {}
    if wanted:
        found = session.execute(
            select(AuditLog.id, AuditLog.event_type).where(AuditLog.id.in_(wanted))
        )
        types = {i: t for i, t in found}
    return {
        row_id: [
            {"label": label, "id": target, "event_type": types.get(target)}
            for label, target in pairs
        ]
        for row_id, pairs in refs.items()
    }


def _timeline(
    session: Session,
    *,
    event_type: str | None,
    search: str | None,
    before_id: int | None,
    after_id: int | None,
    limit: int,
) -> tuple[list[AuditLog], bool, bool]:
    """One page of the timeline, newest first, keyset-paginated by id both ways:
    (rows, has_newer, has_older). `search` is a LIKE over the payload's JSON text (no index:
    it scans, newest first, until the page is full)."""
    matching: list[ColumnElement[bool]] = []
    if event_type:
        matching.append(AuditLog.event_type == event_type)
    if search and search.strip():
        text = search.strip()
        # JSON text escapes quotes, and SQLite's non-ASCII too: look for either spelling.
        spellings = {text, json.dumps(text)[1:-1]}
        payload = cast(AuditLog.payload, Text)
        matching.append(
            or_(
                AuditLog.subject_key.ilike(like_pattern(text), escape="\\"),
                *(payload.ilike(like_pattern(s), escape="\\") for s in spellings),
            )
        )

    def beyond(condition: ColumnElement[bool]) -> bool:
        return bool(session.scalar(select(exists().where(*matching, condition))))

    query = select(AuditLog).where(*matching)
    if after_id is None:
        if before_id is not None:
            query = query.where(AuditLog.id < before_id)
        rows = list(session.scalars(query.order_by(AuditLog.id.desc()).limit(limit + 1)))
        has_older, rows = len(rows) > limit, rows[:limit]
        has_newer = before_id is not None and beyond(AuditLog.id >= before_id)
    else:
        query = query.where(AuditLog.id > after_id).order_by(AuditLog.id).limit(limit + 1)
        rows = list(session.scalars(query))
        has_newer, rows = len(rows) > limit, rows[:limit][::-1]
        has_older = beyond(AuditLog.id <= after_id)
    return rows, has_newer, has_older


def _url(path: str, **params: object) -> str:
    """`path?…` with the parameters that are set, in the order given."""
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{path}?{query}" if query else path


@router.get("/audit")
def audit_page(
    request: Request,
    viewer: ViewerDep,
    services: ServicesDep,
    event_type: Annotated[str | None, Query(max_length=64)] = None,
    q: Annotated[str | None, Query(max_length=200)] = None,
    before_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    after_id: Annotated[int | None, Query(ge=0, le=MAX_ID)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = PAGE_SIZE,
) -> Response:
    if before_id is not None and after_id is not None:
        raise InputError("give before_id or after_id, not both")
    event_type, q = event_type or None, (q or "").strip() or None
    with services.db.read() as session:
        rows, has_newer, has_older = _timeline(
            session,
            event_type=event_type,
            search=q,
            before_id=before_id,
            after_id=after_id,
            limit=limit,
        )
        refs = _resolve(session, rows)
        types = audit.event_types(session)
    size = limit if limit != PAGE_SIZE else None
    context = {
        "entries": [
            {"row": r, "payload": pretty(r.payload, TIMELINE_PAYLOAD_CHARS), "refs": refs[r.id]}
            for r in rows
        ],
        "types": types,
        "event_type": event_type,
        "q": q,
        "limit": limit,
        "newest": _url("/dashboard/audit", event_type=event_type, q=q, limit=size)
        if has_newer
        else None,
        "newer": _url(
            "/dashboard/audit", event_type=event_type, q=q, after_id=rows[0].id, limit=size
        )
        if has_newer and rows
        else None,
        "older": _url(
            "/dashboard/audit", event_type=event_type, q=q, before_id=rows[-1].id, limit=size
        )
        if has_older and rows
        else None,
    }
    return _page(request, viewer, "audit.html", context)


def _facts_in_prompt(session: Session, row: AuditLog) -> list[dict[str, Any]] | None:
    """The facts a turn's prompt held, by the keys its row recorded, each with the fact as it
    is now (None: deleted since). None when the row predates the record of keys."""
    memory = row.payload.get("memory") if isinstance(row.payload, dict) else None
    keys = memory.get("fact_keys") if isinstance(memory, dict) else None
    if not isinstance(keys, list):
        return None
    keys = [k for k in keys if isinstance(k, str)]
    now = {f.key: f for f in session.scalars(select(Fact).where(Fact.key.in_(keys)))}
    return [{"key": k, "fact": now.get(k)} for k in keys]


@router.get("/audit/{audit_id}")
def audit_row(
    request: Request,
    viewer: ViewerDep,
    services: ServicesDep,
    audit_id: Annotated[int, FastAPIPath(ge=1, le=MAX_ID)],
) -> Response:
    with services.db.read() as session:
        row = session.get(AuditLog, audit_id)
        if row is None:
            raise NotFound(f"no audit row #{audit_id} (it may have been swept by retention)")
        refs = _resolve(session, [row])[row.id]
        derived = session.execute(
            select(AuditLog.id, AuditLog.event_type, AuditLog.created_at, AuditLog.subject_key)
            .where(AuditLog.event_type.in_(_DERIVED), AuditLog.subject_id == audit_id)
            .order_by(AuditLog.id)
        ).all()
        recalled = _recalled_in_turn(session, row)
        facts = _facts_in_prompt(session, row)
    payload = row.payload if isinstance(row.payload, dict) else {}
    context = {
        "row": row,
        "payload": pretty(row.payload),
        "refs": refs,
        "derived": derived,
        "recalled": recalled,
        "facts": facts,
        "memory": payload.get("memory") if isinstance(payload.get("memory"), dict) else None,
        "turns": conversation_turns(payload) if "messages" in payload else [],
        "speakers": SPEAKERS,
    }
    return _page(request, viewer, "audit_row.html", context)


# -- episodes ---------------------------------------------------------------------------------
@router.get("/episodes")
def episodes_page(
    request: Request,
    viewer: ViewerDep,
    services: ServicesDep,
    q: Annotated[str | None, Query(max_length=200)] = None,
    before: Annotated[str | None, Query(max_length=100)] = None,
    after: Annotated[str | None, Query(max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = PAGE_SIZE,
    forgot: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> Response:
    q = (q or "").strip() or None
    with services.db.read() as session:
        page = list_episodes(
            session,
            search=q,
            before=Cursor.decode(before) if before else None,
            after=Cursor.decode(after) if after else None,
            limit=limit,
        )
        forgotten = session.get(AuditLog, forgot) if forgot else None
    size = limit if limit != PAGE_SIZE else None
    here = "/dashboard/episodes"
    context = {
        "page": page,
        "q": q,
        "forgotten": forgotten
        if forgotten and forgotten.event_type == audit.MEMORY_FORGOTTEN
        else None,
        "limit": limit,
        "newest": _url(here, q=q, limit=size) if page.has_newer else None,
        "newer": _url(here, q=q, after=page.newer.encode(), limit=size) if page.newer else None,
        "older": _url(here, q=q, before=page.older.encode(), limit=size) if page.older else None,
    }
    return _page(request, viewer, "episodes.html", context)


@router.post("/episodes/forget")
def forget_form(
    viewer: FormViewerDep,
    services: ServicesDep,
    conversation_id: Annotated[int, Form(ge=1, le=MAX_ID)],
    q: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Forget one conversation for good (memory/forget.py), then back to the list, which says
    what went."""
    result = forget(services, ForgetRequest(conversation_ids=[conversation_id]))
    return _redirect(_url("/dashboard/episodes", q=q.strip(), forgot=result.audit_id))


# A turn's memory.episode.recalled rows are written in its transaction, right after it.
_RECALLED_SPAN = 200


def _recalled_in_turn(session: Any, row: AuditLog) -> list[dict[str, Any]]:
    """The episodes (with their excerpts) that went into this turn's prompt: the
    memory.episode.recalled rows that name it, read from just after it."""
    memory = row.payload.get("memory") if isinstance(row.payload, dict) else None
    if not isinstance(memory, dict) or not memory.get("episodes_recalled"):
        return []
    found = session.execute(
        select(AuditLog.payload)
        .where(
            AuditLog.event_type == audit.EPISODE_RECALLED,
            AuditLog.id > row.id,
            AuditLog.id <= row.id + _RECALLED_SPAN,
        )
        .order_by(AuditLog.id)
    ).scalars()
    return [p for p in found if isinstance(p, dict) and p.get("turn_audit_id") == row.id]
