"""The dashboard's facts page: facts ranked by importance (ADR-0034 §5), created, edited and
deleted by the operator; and, after a delete, the offer to forget where the fact came from.

    GET  /dashboard/facts                  ?saved= | ?deleted= [&learned_from=3,7 &more=]
                                           | ?forgot= [&gone=]
    POST /dashboard/facts                  create or edit (form: key, value; back: the chat
                                           page it was edited from, to return to)
    POST /dashboard/facts/{key}/delete
    POST /dashboard/facts/forget-sources   forget conversations (form: conversation_ids=3,7)

and, below the facts, what the person told caesar about themselves (their standing statements,
issue #46), current ones grouped by kind, each with the conversation it was said in:

    GET  /dashboard/facts                  ?memory=added|edited|forgotten (what was done)
    POST /dashboard/memories               add one (form: text, kind)
    POST /dashboard/memories/{id}          correct one (form: text)
    POST /dashboard/memories/{id}/forget   forget one

and below those, the things said in their conversations (their dated memories, issue #45),
the newest `SAID_SHOWN`, each with its conversation:

    GET  /dashboard/facts                       ?said=edited|forgotten (what was done)
    POST /dashboard/memories/said/{id}          correct one (form: text)
    POST /dashboard/memories/said/{id}/forget   forget one

A deleted fact is still said in the conversations it was learned from, and recall can bring it
back from them. So the delete reads them first (`caesar.memory.forget.fact_sources`) and carries
their ids (at most `MAX_OFFERED`, the latest) to the page it redirects to, which offers to
forget those still there through `caesar.memory.forget.forget`, the call the episodes page, the
API and the CLI use too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import Response

from caesar import audit
from caesar.api.dashboard_episodes import forgotten_row
from caesar.api.dashboard_render import MAX_ID, HtmlErrors, back_to, page, redirect, url
from caesar.api.dashboard_session import FormViewerDep, Viewer, ViewerDep
from caesar.api.deps import ServicesDep
from caesar.api.routes_standing import MAX_RAW_TEXT
from caesar.errors import InputError, NotFound
from caesar.memory.forget import ForgetRequest, delete_fact, existing_conversations, forget
from caesar.memory.scope import Scope
from caesar.memory.standing import kinds
from caesar.services import Services

if TYPE_CHECKING:
    from caesar.db.models import AuditLog
    from caesar.memory.standing.store import StandingMemory

MAX_OFFERED = 100
_IDS_CHARS = MAX_OFFERED * 21  # 19 digits and a comma each, and some room for spaces

router = APIRouter(route_class=HtmlErrors)


@dataclass(frozen=True)
class Offer:
    """Forget the conversations a deleted fact was learned from: `ids`, those still there, of
    `total` (more when there were over MAX_OFFERED)."""

    key: str
    ids: list[int]
    total: int


# The page's sections of what the person told caesar, in order: their title and kinds.
MEMORY_GROUPS = (
    ("Instructions", (kinds.INSTRUCTION,)),
    ("Preferences and constraints", (kinds.CONSTRAINT, kinds.PREFERENCE)),
    ("Profile", (kinds.PROFILE,)),
)
MEMORY_DONE = {
    "added": "Kept what you told caesar.",
    "edited": "Saved your correction.",
    "forgotten": "Forgot it.",
}
SAID_SHOWN = 50  # the newest dated memories the page lists
SAID_DONE = {"edited": "Saved your correction.", "forgotten": "Forgot it."}


@dataclass(frozen=True)
class MemoryGroup:
    title: str
    memories: list[StandingMemory]


def parse_ids(text: str, field: str) -> list[int]:
    """Conversation ids written `3,7`: ascending, without repeats, at most MAX_OFFERED. Anything
    else is an InputError naming `field`. Pure."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if len(parts) > MAX_OFFERED:
        raise InputError(f"{field}: at most {MAX_OFFERED} conversation ids at once")
    ids = set()
    for part in parts:
        # isascii: str.isdigit() also takes "²" and other digits int() refuses or reads oddly
        if not (part.isascii() and part.isdigit() and 1 <= int(part) <= MAX_ID):
            raise InputError(f"{field}: {part[:30]!r} is not a conversation id")
        ids.add(int(part))
    return sorted(ids)


def _still_there(scope: Scope, ids: list[int]) -> list[int]:
    """Those of `ids` of `person`'s not yet forgotten (or swept by retention)."""
    return existing_conversations(scope, ids) if ids else []


def _gone(ids: list[int]) -> str:
    which = ", ".join(f"#{i}" for i in ids)
    noun = "conversation" if len(ids) == 1 else "conversations"
    return f"{noun} {which} {'is' if len(ids) == 1 else 'are'} gone already"


@router.get("/facts")
def facts_page(
    request: Request,
    viewer: ViewerDep,
    services: ServicesDep,
    saved: Annotated[str | None, Query(max_length=200)] = None,
    deleted: Annotated[str | None, Query(max_length=200)] = None,
    learned_from: Annotated[str | None, Query(max_length=_IDS_CHARS)] = None,
    more: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    forgot: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    gone: Annotated[int | None, Query(ge=1, le=MAX_OFFERED)] = None,
    memory: Annotated[Literal["added", "edited", "forgotten"] | None, Query()] = None,
    said: Annotated[Literal["edited", "forgotten"] | None, Query()] = None,
) -> Response:
    ids = parse_ids(learned_from, "learned_from") if deleted and learned_from else []
    with services.db.read() as session:
        # a reload after forgetting them offers nothing
        there = _still_there(Scope(viewer.person, session), ids)
        forgotten = forgotten_row(Scope(viewer.person, session), forgot)
    offer = Offer(deleted, there, len(there) + (more or 0)) if deleted and there else None
    notice = f"Saved {saved}." if saved else f"Deleted {deleted}." if deleted else None
    return _facts(
        request,
        viewer,
        services,
        notice=notice,
        memory_notice=MEMORY_DONE[memory] if memory else None,
        said_notice=SAID_DONE[said] if said else None,
        offer=offer,
        forgotten=forgotten,
        gone=gone if forgotten else None,
    )


def _facts(
    request: Request,
    viewer: Viewer,
    services: Services,
    *,
    notice: str | None = None,
    offer: Offer | None = None,
    forgotten: AuditLog | None = None,
    gone: int | None = None,
    error: str | None = None,
    draft: dict[str, str] | None = None,
    memory_notice: str | None = None,
    memory_error: str | None = None,
    memory_draft: dict[str, str] | None = None,
    said_notice: str | None = None,
    said_error: str | None = None,
    status: int = 200,
) -> Response:
    settings = services.settings.memory
    memories = services.standing.list(scope=Scope(viewer.person))
    with services.db.read() as session:
        # the conversation each was said in (its chat row's), for those still there
        said_in = audit.subjects(
            Scope(viewer.person, session),
            [m.source_audit_id for m in memories if m.source_audit_id],
        )
    context = {
        "memory_groups": [
            MemoryGroup(title, [m for m in memories if m.kind in which])
            for title, which in MEMORY_GROUPS
        ],
        "said_in": said_in,
        "memory_kinds": kinds.KINDS,
        "memory_notice": memory_notice,
        "memory_error": memory_error,
        "memory_draft": memory_draft or {"text": "", "kind": kinds.INSTRUCTION},
        "said": services.dated.list(
            scope=Scope(viewer.person), limit=SAID_SHOWN, newest_first=True
        ),
        "said_shown": SAID_SHOWN,
        "said_notice": said_notice,
        "said_error": said_error,
        "facts": services.facts.list_all(scope=Scope(viewer.person)),
        "notice": notice,
        "offer": offer,
        "forgotten": forgotten,
        "gone": gone,
        "error": error,
        "draft": draft or {"key": "", "value": ""},
        "importance": settings.facts_importance,
        "inject": settings.facts_inject,
    }
    return page(request, viewer, "facts.html", context, status)


@router.post("/facts")
def save_fact(
    request: Request,
    viewer: FormViewerDep,
    services: ServicesDep,
    key: Annotated[str, Form(max_length=10_000)] = "",
    value: Annotated[str, Form(max_length=10_000)] = "",
    back: Annotated[str, Form(max_length=100)] = "",
) -> Response:
    try:
        fact, _audit_id = services.facts.set_by_operator(key, value, scope=Scope(viewer.person))
    except InputError as exc:  # show the form again, with what was typed
        draft = {"key": key, "value": value}
        return _facts(request, viewer, services, error=str(exc), draft=draft, status=400)
    return redirect(url(back_to(back, "/dashboard/facts"), saved=fact.key))


@router.post("/facts/{key}/delete")
def delete_fact_form(key: str, viewer: FormViewerDep, services: ServicesDep) -> Response:
    out = delete_fact(services, key, scope=Scope(viewer.person))
    key, sources = out["deleted"], out["learned_from"]
    offered = sources[-MAX_OFFERED:]
    return redirect(
        url(
            "/dashboard/facts",
            deleted=key,
            learned_from=",".join(map(str, offered)),
            more=len(sources) - len(offered) or None,
        )
    )


@router.post("/facts/forget-sources")
def forget_sources_form(
    request: Request,
    viewer: FormViewerDep,
    services: ServicesDep,
    conversation_ids: Annotated[str, Form(max_length=_IDS_CHARS)] = "",
) -> Response:
    """Forget the conversations a deleted fact came from, those still there, then back to the
    facts page, which says what went. None left there: the facts page says so (404)."""
    ids = parse_ids(conversation_ids, "conversation_ids")
    if not ids:
        raise InputError("conversation_ids: say which conversations to forget")
    with services.db.read() as session:
        there = _still_there(Scope(viewer.person, session), ids)
    try:
        if not there:
            raise NotFound(_gone(ids))
        # another tab or client may forget one of them meanwhile: forget() then refuses all
        result = forget(services, ForgetRequest(conversation_ids=there, person=viewer.person))
    except NotFound as exc:
        error = f"Nothing was forgotten: {exc} (forgotten before, or swept by retention)."
        return _facts(request, viewer, services, error=error, status=404)
    gone = len(ids) - len(there)
    return redirect(url("/dashboard/facts", forgot=result.audit_id, gone=gone or None))


# -- what the person told caesar about themselves ---------------------------------------------
MemoryId = Annotated[int, Path(ge=1, le=MAX_ID)]
MemoryText = Annotated[str, Form(max_length=MAX_RAW_TEXT)]


@router.post("/memories")
def add_memory_form(
    request: Request,
    viewer: FormViewerDep,
    services: ServicesDep,
    text: MemoryText = "",
    kind: Annotated[str, Form(max_length=40)] = "",
) -> Response:
    try:
        services.standing.add(services.audit, text, kind=kind, scope=Scope(viewer.person))
    except InputError as exc:  # the form again, with what was typed
        draft = {"text": text, "kind": kind}
        return _facts(
            request,
            viewer,
            services,
            memory_error=f"Not kept: {exc}.",
            memory_draft=draft,
            status=400,
        )
    return redirect(url("/dashboard/facts", memory="added") + "#memories")


@router.post("/memories/{memory_id}")
def edit_memory_form(
    request: Request,
    memory_id: MemoryId,
    viewer: FormViewerDep,
    services: ServicesDep,
    text: MemoryText = "",
) -> Response:
    """Correct one of the viewer's (another's, or one gone: the 404 page)."""
    try:
        services.standing.edit(services.audit, memory_id, text, scope=Scope(viewer.person))
    except InputError as exc:
        error = f"Not saved: {exc}."
        return _facts(request, viewer, services, memory_error=error, status=400)
    return redirect(url("/dashboard/facts", memory="edited") + "#memories")


@router.post("/memories/{memory_id}/forget")
def forget_memory_form(
    memory_id: MemoryId, viewer: FormViewerDep, services: ServicesDep
) -> Response:
    services.standing.delete(services.audit, memory_id, scope=Scope(viewer.person))
    return redirect(url("/dashboard/facts", memory="forgotten") + "#memories")


# -- the things said in their conversations ---------------------------------------------------
@router.post("/memories/said/{memory_id}")
def edit_said_form(
    request: Request,
    memory_id: MemoryId,
    viewer: FormViewerDep,
    services: ServicesDep,
    text: MemoryText = "",
) -> Response:
    """Correct one of the viewer's dated memories (another's, or one gone: the 404 page)."""
    try:
        services.dated.edit(services.audit, memory_id, text, scope=Scope(viewer.person))
    except InputError as exc:
        error = f"Not saved: {exc}."
        return _facts(request, viewer, services, said_error=error, status=400)
    return redirect(url("/dashboard/facts", said="edited") + "#said")


@router.post("/memories/said/{memory_id}/forget")
def forget_said_form(memory_id: MemoryId, viewer: FormViewerDep, services: ServicesDep) -> Response:
    services.dated.delete(services.audit, memory_id, scope=Scope(viewer.person))
    return redirect(url("/dashboard/facts", said="forgotten") + "#said")
