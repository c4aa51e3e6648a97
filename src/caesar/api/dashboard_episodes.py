"""The dashboard's episodes page: past conversations, and forgetting one.

    GET  /dashboard/episodes          newest first; ?q= &before= | &after= (cursors);
                                      ?forgot= a memory.forgotten row to report
    POST /dashboard/episodes/forget   forget one (form: conversation_id, csrf; back: the chat
                                      page it was sent from, to return to)

Forgetting is `caesar.memory.forget.forget`, the one call the API and the CLI use too; the page
it returns to says what went (`forgotten_row`, the `forgotten_notice` macro), as the facts page
does after forgetting the conversations a deleted fact came from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import Response

from caesar import audit
from caesar.api.dashboard_render import (
    MAX_ID,
    PAGE_SIZE,
    HtmlErrors,
    back_to,
    page,
    redirect,
    url,
)
from caesar.api.dashboard_session import FormViewerDep, ViewerDep
from caesar.api.deps import ServicesDep
from caesar.memory.episodes.listing import Cursor, list_episodes
from caesar.memory.forget import ForgetRequest, forget
from caesar.memory.scope import Scope

if TYPE_CHECKING:
    from caesar.db.models import AuditLog

router = APIRouter(route_class=HtmlErrors)


def forgotten_row(scope: Scope, audit_id: int | None) -> AuditLog | None:
    """The memory.forgotten row a page was sent back with (`?forgot=`), to say what went; None
    for any other row (another person's too), so a tampered id says nothing."""
    row = audit.get(scope, audit_id)
    return row if row is not None and row.event_type == audit.MEMORY_FORGOTTEN else None


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
        found = list_episodes(
            Scope(viewer.person, session),
            search=q,
            before=Cursor.decode(before) if before else None,
            after=Cursor.decode(after) if after else None,
            limit=limit,
        )
        forgotten = forgotten_row(Scope(viewer.person, session), forgot)
    size = limit if limit != PAGE_SIZE else None
    here = "/dashboard/episodes"
    context = {
        "page": found,
        "q": q,
        "forgotten": forgotten,
        "limit": limit,
        "newest": url(here, q=q, limit=size) if found.has_newer else None,
        "newer": url(here, q=q, after=found.newer.encode(), limit=size) if found.newer else None,
        "older": url(here, q=q, before=found.older.encode(), limit=size) if found.older else None,
    }
    return page(request, viewer, "episodes.html", context)


@router.post("/episodes/forget")
def forget_form(
    viewer: FormViewerDep,
    services: ServicesDep,
    conversation_id: Annotated[int, Form(ge=1, le=MAX_ID)],
    q: Annotated[str, Form(max_length=200)] = "",
    back: Annotated[str, Form(max_length=100)] = "",
) -> Response:
    """Forget one conversation for good (memory/forget.py), then back to the list (or the chat
    page it was sent from), which says what went. One that is not there (forgotten already) is
    a 404 page."""
    request = ForgetRequest(conversation_ids=[conversation_id], person=viewer.person)
    result = forget(services, request)
    where = back_to(back, "/dashboard/episodes")
    return redirect(url(where, q=q.strip(), forgot=result.audit_id))
