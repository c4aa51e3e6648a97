"""Worker `memory.dated`: the chats from before dated memories existed (migration 0020), read
again for them.

The `memory.extract` worker writes the dated memories of every chat it extracts from after the
upgrade; the chats before were extracted already. This worker reads those (chat rows up to
`memory_dated_cursor.until_audit_id`, the extract worker's cursor when the migration ran) with
no LLM, whatever `memory_extract` is routed to, each row as the extract worker reads it (the
turns it added; an imported conversation whole). Once past `until_audit_id` it is idle. Like
every cursor worker: exactly once across processes, its outcomes in the transaction that moves
its cursor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from caesar import audit
from caesar.db.models import AuditLog, MemoryDatedCursor
from caesar.memory.dated import offline
from caesar.memory.facts.extract import new_turns
from caesar.memory.scope import Scope
from caesar.workers import CursorWorker

BATCH = 32


@dataclass
class _Read:
    audit_id: int
    said_at: datetime
    person: int
    conversation_id: int | None
    first_turn: int = 0
    said: list[offline.DatedMemory] = field(default_factory=list)
    vectors: list[Any] = field(default_factory=list)


class DatedBackfillWorker(CursorWorker[list[_Read]]):
    name = "memory.dated"
    cursor_model = MemoryDatedCursor
    source_events = (audit.CHAT_COMPLETED,)

    @property
    def enabled(self) -> bool:
        return bool(self.services.settings.memory.facts_extract.enabled)

    @property
    def interval_seconds(self) -> float:
        return float(self.services.settings.memory.facts_extract.interval_seconds)

    @property
    def batch_size(self) -> int:
        return BATCH

    def _until(self, session: Session) -> int:
        value = session.scalar(
            select(MemoryDatedCursor.until_audit_id).where(MemoryDatedCursor.id == 1)
        )
        return int(value or 0)

    def _waiting(self, after_id: int, until: int) -> Any:
        return (
            AuditLog.id > after_id,
            AuditLog.id <= until,
            AuditLog.event_type.in_(self.source_events),
        )

    def pending(self, session: Session, after_id: int, limit: int) -> Sequence[AuditLog]:
        return session.scalars(
            select(AuditLog)
            .where(*self._waiting(after_id, self._until(session)))
            .order_by(AuditLog.id)
            .limit(limit)
        ).all()

    def backlog(self) -> int:
        with self.db.read() as session:
            waiting = self._waiting(self.cursor(session), self._until(session))
            return int(
                session.scalar(select(func.count()).select_from(AuditLog).where(*waiting)) or 0
            )

    def prepare(self, rows: Sequence[AuditLog]) -> list[_Read]:
        read = []
        zone = self.services.settings.zone
        for row in rows:
            outcome = _Read(row.id, row.created_at, row.person_id, row.subject_id)
            read.append(outcome)
            outcome.first_turn, turns = new_turns(row.payload)
            outcome.said = offline.extract(turns, row.created_at, zone)
            outcome.vectors = self.services.dated.vectors([m.text for m in outcome.said])
        return read

    def apply(self, session: Session, rows: Sequence[AuditLog], prepared: list[_Read]) -> None:
        for outcome in prepared:
            self.services.dated.learn(
                Scope(outcome.person, session),
                self.audit,
                outcome.said,
                outcome.vectors,
                source_audit_id=outcome.audit_id,
                conversation_id=outcome.conversation_id,
                said_at=outcome.said_at,
                first_turn=outcome.first_turn,
            )
