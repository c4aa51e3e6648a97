"""The dated memories of what was said in the person's conversations (issue #45,
docs/memories.md), over JSON: seen, searched, corrected and deleted by them.

    GET    /v1/memories/said              ?q= &conversation_id= &limit= (newest first)
    PATCH  /v1/memories/said/{memory_id}  {text}
    DELETE /v1/memories/said/{memory_id}  → 204

Every read and write is `caesar.memory.dated.store.DatedStore`'s (`services.dated`), scoped to
the caller: another person's id, or a standing statement's (/v1/memories), is not found (404).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response, status

from caesar.api.deps import Authenticated, ScopeDep, ServicesDep
from caesar.api.routes_memory import MAX_ID
from caesar.api.routes_standing import MemoryText
from caesar.memory.standing.store import MAX_TEXT

router = APIRouter(dependencies=[Authenticated])

MAX_LIMIT = 1000
SaidId = Annotated[int, Path(ge=1, le=MAX_ID)]


@router.get("/v1/memories/said")
def list_said(
    services: ServicesDep,
    scope: ScopeDep,
    q: Annotated[
        str | None, Query(max_length=MAX_TEXT, description="only those holding these words")
    ] = None,
    conversation_id: Annotated[
        int | None, Query(ge=1, le=MAX_ID, description="only this conversation's")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 200,
) -> dict[str, Any]:
    """The things said in the caller's conversations, one sentence each, newest first: every
    one, one conversation's, or those whose text holds `q` (any case)."""
    if q is not None:
        found = services.dated.search(q, scope=scope, conversation_id=conversation_id, limit=limit)
    else:
        found = services.dated.list(
            scope=scope, conversation_id=conversation_id, limit=limit, newest_first=True
        )
    return {"memories": [m.as_json() for m in found]}


@router.patch("/v1/memories/said/{memory_id}")
def edit_said(
    memory_id: SaidId, body: MemoryText, services: ServicesDep, scope: ScopeDep
) -> dict[str, Any]:
    """Correct one: its new text, embedded again and counted as the caller's edit
    (`memory.user_edited`); its date and conversation stay. 404 if the caller has no such
    said memory."""
    memory = services.dated.edit(services.audit, memory_id, body.text, scope=scope)
    return {"memory": memory.as_json()}


@router.delete(
    "/v1/memories/said/{memory_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
)
def delete_said(memory_id: SaidId, services: ServicesDep, scope: ScopeDep) -> Response:
    """Delete one for good, with the audit rows that quote it (`memory.user_deleted` says
    which, never what it said). 404 if the caller has no such said memory."""
    services.dated.delete(services.audit, memory_id, scope=scope)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
