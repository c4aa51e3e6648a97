"""Worker `memory.standing`: the chats from before the standing statements existed (migration
0019), read again for what the person said about themselves in them.

The `memory.extract` worker learns standing statements from every chat it extracts from after
the upgrade; the chats before were extracted already, for facts alone. This worker reads those
(chat rows up to `memory_standing_cursor.until_audit_id`, the extract worker's cursor when the
migration ran) with the offline shapes, whatever `memory_extract` is routed to: an upgrade
never costs an LLM call per past chat. Each row is read as the extract worker reads it (its
latest exchange; an imported conversation whole). Once past `until_audit_id` it is idle. Like
every cursor worker: exactly once across processes, its outcomes in the transaction that moves
its cursor; a statement said again is fresher, not twice (store.learn).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from caesar import audit
from caesar.db.models import AuditLog, MemoryStandingCursor
from caesar.memory.facts.extract import latest_exchange
from caesar.memory.scope import Scope
from caesar.memory.standing.offline import Statement, extract_statements
from caesar.memory.transcript import is_temporary
from caesar.workers import BackfillWorker

BATCH = 64


@dataclass
class _Read:
    audit_id: int
    said_at: datetime
    person: int
    statements: list[tuple[Statement, Any]] = field(default_factory=list)


class StandingBackfillWorker(BackfillWorker[list[_Read]]):
    name = "memory.standing"
    cursor_model = MemoryStandingCursor
    source_events = (audit.CHAT_COMPLETED,)

    @property
    def enabled(self) -> bool:
        return bool(self.services.settings.memory.standing.enabled)

    @property
    def interval_seconds(self) -> float:
        return float(self.services.settings.memory.facts_extract.interval_seconds)

    @property
    def batch_size(self) -> int:
        return BATCH

    def prepare(self, rows: Sequence[AuditLog]) -> list[_Read]:
        read = []
        for row in rows:
            outcome = _Read(row.id, row.created_at, row.person_id)
            read.append(outcome)
            if is_temporary(row.payload):
                continue
            statements = extract_statements(latest_exchange(row.payload))
            vectors = self.services.standing.vectors([(s.slot, s.text) for s in statements])
            outcome.statements = list(zip(statements, vectors, strict=True))
        return read

    def apply(self, session: Session, rows: Sequence[AuditLog], prepared: list[_Read]) -> None:
        for outcome in prepared:
            if outcome.statements:
                self.services.standing.learn(
                    Scope(outcome.person, session),
                    self.audit,
                    outcome.statements,
                    source_audit_id=outcome.audit_id,
                    said_at=outcome.said_at,
                )
