"""What went into one turn's prompt, read back from its audit rows: the facts (by the keys its
`chat.completed` row recorded, with their values now), the past conversations with their
excerpts and scores (its `memory.episode.recalled` rows) and the spans of time its message
named. The audit page of a turn and the chat page's "remembered for this reply" panel both
show it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from caesar import audit
from caesar.memory.facts.store import by_keys
from caesar.memory.scope import Scope
from caesar.named_time import span_said

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from caesar.db.models import AuditLog


@dataclass(frozen=True)
class TurnMemory:
    """`memory`: the row's own record (None for rows that are not turns); `facts`: each key
    with the fact as it is now (None: deleted since), None when the row predates the record of
    keys; `recalled`: each recalled episode's row payload, with `span` (see `in_span`);
    `asked`: what the message named (memory/search), None when it named nothing."""

    memory: dict[str, Any] | None
    facts: list[dict[str, Any]] | None
    recalled: list[dict[str, Any]]
    asked: Mapping[str, Any] | None


def read_turn_memory(session: Session, row: AuditLog) -> TurnMemory:
    payload = row.payload if isinstance(row.payload, dict) else {}
    memory = payload.get("memory") if isinstance(payload.get("memory"), dict) else None
    asked = memory.get("asked") if memory is not None else None
    asked = asked if isinstance(asked, Mapping) else None
    return TurnMemory(
        memory,
        _facts_in_prompt(Scope(row.person_id, session), memory),
        in_span(_recalled_in_turn(session, row, memory), asked),
        asked,
    )


def _facts_in_prompt(scope: Scope, memory: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    keys = memory.get("fact_keys") if memory is not None else None
    if not isinstance(keys, list):
        return None
    keys = [k for k in keys if isinstance(k, str)]
    now = by_keys(scope, keys)
    return [{"key": k, "fact": now.get(k)} for k in keys]


def _recalled_in_turn(
    session: Session, row: AuditLog, memory: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The memory.episode.recalled rows that name this turn (none to look for when its own
    record names no episode)."""
    if memory is None or not memory.get("episodes_recalled"):
        return []
    return audit.recalled_in_turn(Scope(row.person_id, session), row.id)


def _held(payload: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(payload.get("created_at")))
    except ValueError:
        return None


def in_span(
    recalled: list[dict[str, Any]], asked: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """Each recalled episode's payload with `span`: the words of the span the turn's message
    named that it was held in (None: outside them, or the message named none). Pure."""
    if asked is None:
        return [{**p, "span": None} for p in recalled]
    return [{**p, "span": span_said(asked, held) if (held := _held(p)) else None} for p in recalled]
