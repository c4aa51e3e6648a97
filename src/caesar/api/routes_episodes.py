"""Explicit memory over JSON: `memory.semantic_recall` as POST /v1/memory/semantic_recall."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

from caesar.api.deps import Authenticated, ServicesDep

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
def semantic_recall(body: SemanticRecallRequest, services: ServicesDep) -> dict[str, Any]:
    """Past replies closest to `query` by cosine (no threshold, no decay), best first, each
    with the chat it came from. Needs the `semantic.index` worker to have run."""
    hits = services.semantic.recall(body.query, body.top_k)
    return {"chunks": [h.as_json() for h in hits]}
