"""The dashboard's audit pages: the timeline, rows in words, and one row in full with what went
into a turn's prompt.

    GET /dashboard/audit        newest first; ?event_type= &q= &before_id= | &after_id=
                                (keyset pages both ways)
    GET /dashboard/audit/{id}   one row, with what it refers to and what refers to it; a turn's
                                facts and past conversations
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi import Path as FastAPIPath
from fastapi.responses import Response

from caesar import audit
from caesar.api.dashboard_render import MAX_ID, PAGE_SIZE, HtmlErrors, page, url
from caesar.api.dashboard_session import ViewerDep
from caesar.api.deps import ServicesDep
from caesar.api.turn_memory import read_turn_memory
from caesar.errors import InputError, NotFound
from caesar.memory.render import SPEAKERS
from caesar.memory.scope import Scope
from caesar.memory.transcript import conversation_turns

if TYPE_CHECKING:
    from caesar.db.models import AuditLog

TIMELINE_PAYLOAD_CHARS = 1500

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
router = APIRouter(route_class=HtmlErrors)


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


def _resolve(scope: Scope, rows: list[AuditLog]) -> dict[int, list[dict[str, Any]]]:
    """Each row's references with the event type they point at (None: swept by retention, or
    not `person`'s)."""
    refs = {row.id: references(row) for row in rows}
    targets = (target for pairs in refs.values() for _l, target in pairs)
    types = audit.types_of(scope, targets)
    return {
        row_id: [
            {"label": label, "id": target, "event_type": types.get(target)}
            for label, target in pairs
        ]
        for row_id, pairs in refs.items()
    }


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
        rows, has_newer, has_older = audit.timeline(
            Scope(viewer.person, session),
            event_type=event_type,
            search=q,
            before_id=before_id,
            after_id=after_id,
            limit=limit,
        )
        refs = _resolve(Scope(viewer.person, session), rows)
        types = audit.event_types(Scope(viewer.person, session))
    size = limit if limit != PAGE_SIZE else None
    here = "/dashboard/audit"
    context = {
        "entries": [
            {"row": r, "payload": pretty(r.payload, TIMELINE_PAYLOAD_CHARS), "refs": refs[r.id]}
            for r in rows
        ],
        "types": types,
        "event_type": event_type,
        "q": q,
        "limit": limit,
        "newest": url(here, event_type=event_type, q=q, limit=size) if has_newer else None,
        "newer": url(here, event_type=event_type, q=q, after_id=rows[0].id, limit=size)
        if has_newer and rows
        else None,
        "older": url(here, event_type=event_type, q=q, before_id=rows[-1].id, limit=size)
        if has_older and rows
        else None,
    }
    return page(request, viewer, "audit.html", context)


@router.get("/audit/{audit_id}")
def audit_row(
    request: Request,
    viewer: ViewerDep,
    services: ServicesDep,
    audit_id: Annotated[int, FastAPIPath(ge=1, le=MAX_ID)],
) -> Response:
    with services.db.read() as session:
        row = audit.get(Scope(viewer.person, session), audit_id)
        if row is None:
            raise NotFound(f"no audit row #{audit_id} (it may have been swept by retention)")
        refs = _resolve(Scope(viewer.person, session), [row])[row.id]
        derived = audit.about(Scope(viewer.person, session), audit_id, _DERIVED)
        remembered = read_turn_memory(session, row)
    payload = row.payload if isinstance(row.payload, dict) else {}
    context = {
        "row": row,
        "payload": pretty(row.payload),
        "refs": refs,
        "derived": derived,
        "recalled": remembered.recalled,
        "facts": remembered.facts,
        "memory": remembered.memory,
        "asked": remembered.asked,
        "turns": conversation_turns(payload) if "messages" in payload else [],
        "speakers": SPEAKERS,
    }
    return page(request, viewer, "audit_row.html", context)
