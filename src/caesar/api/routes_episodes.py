"""Episodes over JSON: GET /v1/episodes (a page at a time), and `memory.semantic_recall` as
POST /v1/memory/semantic_recall."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

from caesar.api.deps import Authenticated, ScopeDep, ServicesDep
from caesar.memory.episodes.listing import MAX_LIMIT, Cursor, list_episodes
from caesar.memory.scope import Scope

router = APIRouter(dependencies=[Authenticated])


class SemanticRecallRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: StrictStr = Field(min_length=1, max_length=10_000)
    top_k: int = Field(default=5, ge=1, le=50)

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query must not be empty or whitespace")
        return value


@router.post("/v1/memory/semantic_recall")
def semantic_recall(
    body: SemanticRecallRequest, services: ServicesDep, scope: ScopeDep
) -> dict[str, Any]:
    """Past replies closest to `query` by cosine (no threshold, no decay), best first, each
    with the chat it came from. Needs the `semantic.index` worker to have run."""
    hits = services.semantic.recall(body.query, body.top_k, scope=scope)
    return {"chunks": [h.as_json() for h in hits]}


@router.get("/v1/episodes")
def episodes_page(
    services: ServicesDep,
    scope: ScopeDep,
    search: Annotated[str | None, Query(max_length=1000)] = None,
    before: Annotated[str | None, Query(max_length=100, description="`older` of a page")] = None,
    after: Annotated[str | None, Query(max_length=100, description="`newer` of a page")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
) -> dict[str, Any]:
    """Episodes newest first, with recall counts; `search` matches summaries. `older` /
    `newer` are the cursors of the next pages (null at either end). Forget one with DELETE
    /v1/conversations/{conversation_id}."""
    person = scope.person
    with services.db.read() as session:
        page = list_episodes(
            Scope(person, session),
            search=search,
            before=Cursor.decode(before) if before else None,
            after=Cursor.decode(after) if after else None,
            limit=limit,
        )
    return {
        "episodes": [
            {
                **asdict(e),
                "created_at": e.created_at.isoformat(),
                "last_recalled_at": e.last_recalled_at.isoformat() if e.last_recalled_at else None,
            }
            for e in page.items
        ],
        "older": page.older.encode() if page.older else None,
        "newer": page.newer.encode() if page.newer else None,
    }
