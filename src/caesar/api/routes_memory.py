"""Audit log, facts and recall over JSON."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from caesar import audit
from caesar.api.deps import Authenticated, ScopeDep, ServicesDep
from caesar.clock import to_naive_utc, utcnow
from caesar.memory.facts.store import MAX_VALUE, normalise_key
from caesar.memory.forget import delete_fact as delete_fact_and_say
from caesar.memory.recall.pipeline import preview
from caesar.memory.scope import Scope
from caesar.named_time import asked_json

router = APIRouter(dependencies=[Authenticated])

# The largest id SQLite can store: a bigger one is a 422, not an OverflowError (a 500).
MAX_ID = 2**63 - 1


def event_json(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "event_type": row.event_type,
        "created_at": row.created_at.isoformat(),
        "payload": row.payload,
    }


@router.get("/v1/audit")
def list_audit(
    services: ServicesDep,
    scope: ScopeDep,
    event_type: Annotated[str | None, Query(max_length=64)] = None,
    after_id: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    """The caller's events after `after_id`, oldest first (newest last)."""
    person = scope.person
    with services.db.read() as session:
        rows = audit.list_events(
            Scope(person, session), event_type=event_type, after_id=after_id, limit=limit
        )
        return {"events": [event_json(r) for r in rows]}


@router.get("/v1/facts")
def list_facts(services: ServicesDep, scope: ScopeDep) -> dict[str, Any]:
    """Every fact of the caller's, most important first; `importance` is computed now
    (ADR-0034 §4)."""
    return {"facts": [f.as_json() for f in services.facts.list_all(scope=scope)]}


class FactValue(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: StrictStr = Field(min_length=1, max_length=MAX_VALUE)


@router.put("/v1/facts/{key}")
def set_fact(
    key: Annotated[str, Path(max_length=200)],
    body: FactValue,
    services: ServicesDep,
    scope: ScopeDep,
) -> dict[str, Any]:
    """Create or edit (confidence 1.0, audited as `memory.fact.user_edited`). The key is
    normalised to snake_case ("Dog Name" → dog_name); the response carries the stored key."""
    fact, audit_id = services.facts.set_by_operator(key, body.value, scope=scope)
    return {"fact": services.facts.get(fact.key, scope=scope).as_json(), "audit_id": audit_id}


@router.get("/v1/facts/{key}/history")
def fact_history(
    key: Annotated[str, Path(max_length=200)], services: ServicesDep, scope: ScopeDep
) -> dict[str, Any]:
    """Every value the key held, oldest first: when, by whom, what replaced it (`until`), and
    extractions that contradicted an operator's value (`memory.fact.conflict`, not applied).
    404 if the key never existed."""
    changes = services.facts.history(key, scope=scope)
    return {"key": normalise_key(key), "history": [c.as_json() for c in changes]}


@router.delete("/v1/facts/{key}")
def delete_fact(
    key: Annotated[str, Path(max_length=200)],
    services: ServicesDep,
    scope: ScopeDep,
    forget_sources: bool = False,
) -> dict[str, Any]:
    """Audited as `memory.fact.user_deleted`; 404 if there is no such fact. The conversations it
    was learned from still say it: they are listed, and `forget_sources=true` forgets them too
    (memory/forget.py) — otherwise recall can bring the deleted value back."""
    return delete_fact_and_say(services, key, scope=scope, forget_sources=forget_sources)


class RecallRequest(BaseModel):
    """Null for `max_age_days` or `similarity_threshold` disables that filter."""

    model_config = ConfigDict(extra="forbid")
    query: StrictStr = Field(min_length=1, max_length=10_000)
    top_k: int | None = Field(default=None, ge=1, le=100)
    now: datetime | None = None
    # Omitted: the configured value. Null: that filter is off (which is why the default
    # cannot simply be None — "not sent" and "sent as null" mean different things).
    max_age_days: float | None = Field(
        default=None,
        gt=0,
        le=36_500,
        description="omit for memory.episodes_recall.max_age_days (off unless set); null = no limit",
    )
    similarity_threshold: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="omit for memory.episodes_recall.similarity_threshold; null = no threshold",
    )


@router.post("/v1/memory/recall")
def recall_preview(body: RecallRequest, services: ServicesDep, scope: ScopeDep) -> dict[str, Any]:
    """What auto-recall would surface for `query`, with every score component and, for the
    episodes that would reach the prompt, the excerpts shown with them. Read-only.

    `asked`: what the query says besides its topic — the spans of time it names (UTC bounds,
    and `local`: the dates on the operator's clock, in `zone`), whether it asks about the time
    alone (`time_only`) or gathers across conversations (`gathers`). Each episode's `in_span`
    says whether it was held within one of those spans."""
    person = scope.person
    overrides: dict[str, Any] = {}
    sent = body.model_fields_set
    if body.top_k is not None:
        overrides["top_k"] = body.top_k
    if "max_age_days" in sent:
        overrides["max_age_days"] = body.max_age_days
    if "similarity_threshold" in sent:
        overrides["similarity_threshold"] = body.similarity_threshold
    now = to_naive_utc(body.now) if body.now else utcnow()
    settings = services.settings.memory.episodes_recall
    with services.episodes.reading(person, now) as scope:
        episodes = preview(services.episodes, scope, settings, body.query, **overrides)
    asked = services.episodes.read(body.query, now)
    return {
        "episodes": [
            {**e.as_json(), "in_span": asked.time.contains(e.created_at)} for e in episodes
        ],
        "asked": asked_json(asked, services.episodes.zone),
    }
