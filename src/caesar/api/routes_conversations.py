"""Conversations over JSON (issue #13): list them, read one, forget one or many.

Forgetting is `caesar.memory.forget.forget`, the one service call the CLI and the dashboard use
too; each forget is one `memory.forgotten` audit row with ids and counts.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from caesar.api.deps import Authenticated, ScopeDep, ServicesDep
from caesar.clock import to_naive_utc
from caesar.errors import NotFound
from caesar.memory import conversations
from caesar.memory import forget as forgetting
from caesar.memory.forget import MAX_MATCHING_CHARS, ForgetRequest, forget
from caesar.memory.scope import Scope

router = APIRouter(dependencies=[Authenticated])

ConversationIdPath = Annotated[int, Path(ge=1, le=2**31 - 1)]


@router.get("/v1/conversations")
def list_conversations(
    services: ServicesDep,
    scope: ScopeDep,
    before: datetime | None = None,
    matching: Annotated[str | None, Query(max_length=MAX_MATCHING_CHARS)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> dict[str, Any]:
    """Newest first; `before` / `matching` select as a forget would (so a client can show what
    a forget by filter takes before it sends it)."""
    person = scope.person
    with services.db.read() as session:
        listed = forgetting.listed(
            Scope(person, session), before=_naive(before), matching=matching, limit=limit
        )
    return {"conversations": [c.as_json() for c in listed]}


@router.get("/v1/conversations/{conversation_id}")
def get_conversation(
    conversation_id: ConversationIdPath, services: ServicesDep, scope: ScopeDep
) -> dict[str, Any]:
    """The conversation, its episode's summary and its turns (its latest turn's row); 404 for
    one that is not the caller's."""
    person = scope.person
    with services.db.read() as session:
        found = conversations.recent(Scope(person, session), [conversation_id], 1)
        if not found:
            raise NotFound(f"no conversation with id {conversation_id}")
        turns = conversations.transcript_by_id(Scope(person, session), conversation_id)
    return {**found[0].as_json(), "messages": turns}


@router.delete("/v1/conversations/{conversation_id}")
def forget_conversation(
    conversation_id: ConversationIdPath, services: ServicesDep, scope: ScopeDep
) -> dict[str, Any]:
    """Forget one conversation and everything learned from it; 404 if the caller has none."""
    person = scope.person
    request = ForgetRequest(conversation_ids=[conversation_id], person=person)
    return forget(services, request).as_json()


class ForgetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    conversation_ids: list[Annotated[int, Field(ge=1, le=2**31 - 1)]] = Field(
        default_factory=list, max_length=10_000
    )
    before: datetime | None = None
    matching: StrictStr | None = Field(default=None, max_length=MAX_MATCHING_CHARS)
    dry_run: bool = False


@router.post("/v1/conversations/forget")
def forget_conversations(
    body: ForgetBody, services: ServicesDep, scope: ScopeDep
) -> dict[str, Any]:
    """Forget by ids and/or a filter (last turn before a date, a turn containing a text),
    among the caller's conversations; `dry_run` counts what would go."""
    person = scope.person
    request = ForgetRequest(
        body.conversation_ids, _naive(body.before), body.matching, person=person
    )
    return forget(services, request, dry_run=body.dry_run).as_json()


def _naive(value: datetime | None) -> datetime | None:
    return None if value is None else to_naive_utc(value)
