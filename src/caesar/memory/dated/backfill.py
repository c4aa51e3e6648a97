"""Worker `memory.dated`: the chats from before dated memories existed (migration 0020), read
again for them.

The `memory.extract` worker writes the dated memories of every chat it extracts from after the
upgrade; the chats before were extracted already. This worker reads those (chat rows up to
`memory_dated_cursor.until_audit_id`, the extract worker's cursor when the migration ran) with
no LLM, whatever `memory_extract` is routed to, each row as the extract worker reads it
(`read_dated`: the turns it added; an imported conversation whole). Once past
`until_audit_id` it is idle. Like every cursor worker: exactly once across processes, its
outcomes in the transaction that moves its cursor.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from caesar import audit
from caesar.db.models import AuditLog, MemoryDatedCursor
from caesar.memory.dated.store import RowMemories
from caesar.memory.facts.extract import read_dated
from caesar.workers import BackfillWorker

BATCH = 32


class DatedBackfillWorker(BackfillWorker[list[RowMemories]]):
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

    def prepare(self, rows: Sequence[AuditLog]) -> list[RowMemories]:
        return [read_dated(self.services, row) for row in rows]

    def apply(
        self, session: Session, rows: Sequence[AuditLog], prepared: list[RowMemories]
    ) -> None:
        for read in prepared:
            self.services.dated.write(session, self.audit, read)
