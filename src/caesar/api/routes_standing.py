"""What the person told caesar about themselves (their standing statements, issue #46), over
JSON: seen, searched, added, corrected and forgotten by them.

    GET    /v1/memories              ?kind= &history=true | ?q= (search the current ones)
    POST   /v1/memories              {text, kind, slot?} → 201
    PUT    /v1/memories/{memory_id}  {text}
    DELETE /v1/memories/{memory_id}  → 204

Every read and write is `caesar.memory.standing.store.StandingStore`'s (`services.standing`),
scoped to the caller: another person's id is not found (404). `remember` and `correct` are also
what the dashboard, the CLI and the MCP server call: each embeds the statement's bearing vector
(outside any transaction) before it is written, as the `memory.extract` worker does.
"""

from __future__ import annotations

from typing import Annotated, Any, cast

from fastapi import APIRouter, Path, Query, Response, status
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from caesar.api.deps import Authenticated, ScopeDep, ServicesDep
from caesar.api.routes_memory import MAX_ID
from caesar.errors import InputError
from caesar.memory.standing import kinds
from caesar.memory.standing.store import MAX_TEXT, StandingMemory

router = APIRouter(dependencies=[Authenticated])

# What a hand-written statement is filed under when the person names no slot: the store's own
# choice (StandingStore.add), needed here first to embed it with the words its slot bears on.
# A raw text may hold runs of spaces the store folds away; past this it is refused unread.
MAX_RAW_TEXT = MAX_TEXT * 4


@router.get("/v1/memories")
def list_memories(
    services: ServicesDep,
    scope: ScopeDep,
    kind: Annotated[
        str | None, Query(max_length=kinds.MAX_NAME, description=f"one of {', '.join(kinds.KINDS)}")
    ] = None,
    history: Annotated[
        bool, Query(description="the replaced statements too (with `superseded_by`)")
    ] = False,
    q: Annotated[
        str | None, Query(max_length=MAX_TEXT, description="the current ones holding these words")
    ] = None,
) -> dict[str, Any]:
    """What the caller told caesar about themselves, newest first: the statements that hold
    (`history=true`: the replaced ones too), of one `kind`, or those whose text holds `q`."""
    kinds.check_kind(kind)
    if q is not None:
        if history:
            raise InputError("q searches the statements that hold: leave out history=true")
        # cast: the store's `list` method shadows the builtin in its own annotations (mypy)
        hits = cast("list[StandingMemory]", services.standing.search(q, scope=scope))
        found = [m for m in hits if kind is None or m.kind == kind]
    else:
        found = services.standing.list(scope=scope, kind=kind, history=history)
    return {"memories": [m.as_json() for m in found]}


class NewMemory(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: StrictStr = Field(min_length=1, max_length=MAX_RAW_TEXT)
    kind: StrictStr = Field(
        min_length=1, max_length=kinds.MAX_NAME, description=f"one of {', '.join(kinds.KINDS)}"
    )
    slot: StrictStr | None = Field(
        default=None,
        max_length=kinds.MAX_NAME,
        description="what it is about (units, diet, family, …); default: the kind's general one",
    )


class MemoryText(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: StrictStr = Field(min_length=1, max_length=MAX_RAW_TEXT)


MemoryId = Annotated[int, Path(ge=1, le=MAX_ID)]


@router.post("/v1/memories", status_code=status.HTTP_201_CREATED)
def add_memory(body: NewMemory, services: ServicesDep, scope: ScopeDep) -> dict[str, Any]:
    """A statement in the caller's own words (confidence 1), audited as `memory.user_added`."""
    memory = services.standing.add(
        services.audit, body.text, kind=body.kind, slot=body.slot, scope=scope
    )
    return {"memory": memory.as_json()}


@router.put("/v1/memories/{memory_id}")
def edit_memory(
    memory_id: MemoryId, body: MemoryText, services: ServicesDep, scope: ScopeDep
) -> dict[str, Any]:
    """Correct one: its new text, counted as the caller's edit (`memory.user_edited`); 404 if
    the caller has no such statement."""
    return {
        "memory": services.standing.edit(
            services.audit, memory_id, body.text, scope=scope
        ).as_json()
    }


@router.delete(
    "/v1/memories/{memory_id}", status_code=status.HTTP_204_NO_CONTENT, response_class=Response
)
def delete_memory(memory_id: MemoryId, services: ServicesDep, scope: ScopeDep) -> Response:
    """Forget one for good (`memory.user_deleted` says which, never what it said); a statement
    it had replaced holds again. 404 if the caller has no such statement."""
    services.standing.delete(services.audit, memory_id, scope=scope)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
