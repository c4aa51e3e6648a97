"""How far the memory workers have learned an import: "learning N of M" (issue 48).

An import is recorded as one `import.completed` row: the file's name and format, its counts,
and the range of the chat rows it stands for (those it wrote and those a previous run of the
same file wrote). A row counts as learned once each enabled worker that reads it has: the
summariser wrote its episode (or gave up on it), the extract worker's cursor is past it
(facts, standing statements and dated memories), and the passages worker embedded the
episode's windows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, exists, func, or_, select

from caesar import audit
from caesar.db.models import AuditLog, Conversation, EpisodeSummary
from caesar.memory.scope import Scope
from caesar.workers import CursorWorker

if TYPE_CHECKING:
    from caesar.container import Container
    from caesar.importer import ImportReport

# The rows an import writes carry this subject_key prefix (importer.py: a content hash or an
# export's own conversation id), so live chats in the same id range are not counted.
IMPORTED_KEY = "import:"
# Workers that read every chat row behind a cursor: facts, standing statements and dated
# memories (memory.extract); past replies' chunks (semantic.index, when enabled).
CURSOR_WORKERS = ("memory.extract", "semantic.index")


@dataclass(frozen=True)
class Learning:
    done: int
    total: int

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    def text(self) -> str:
        return "learned" if self.finished else f"learning {self.done:,} of {self.total:,}"


@dataclass(frozen=True)
class ImportRecord:
    """One `import.completed` row as the dashboard lists it."""

    id: int
    at: datetime
    file: str
    format: str
    imported: int
    duplicates: int
    skipped: int
    empty: int
    first_id: int | None
    last_id: int | None


def record(services: Container, scope: Scope, report: ImportReport, file_name: str) -> int:
    """The import's `import.completed` row (its own transaction); its id."""
    ids = report.audit_ids
    payload: dict[str, Any] = {
        "file": file_name[:200],
        "format": report.format,
        "imported": report.imported,
        "duplicates": report.duplicates,
        "skipped": report.failed,
        "empty": report.empty,
        "first_id": min(ids) if ids else None,
        "last_id": max(ids) if ids else None,
    }
    with services.db.write() as session:
        row = services.audit.append(Scope(scope.person, session), audit.IMPORT_COMPLETED, payload)
        return int(row.id)


def recent(services: Container, scope: Scope, limit: int = 10) -> list[ImportRecord]:
    """`scope.person`'s imports, newest first."""
    with services.db.read() as session:
        rows = session.scalars(
            select(AuditLog)
            .where(
                AuditLog.event_type == audit.IMPORT_COMPLETED,
                AuditLog.person_id == scope.person,
            )
            .order_by(AuditLog.id.desc())
            .limit(limit)
        ).all()
    return [_record(row) for row in rows]


def _record(row: AuditLog) -> ImportRecord:
    p = row.payload

    def number(key: str) -> int:
        value = p.get(key)
        return int(value) if isinstance(value, int) else 0

    def row_id(key: str) -> int | None:
        value = p.get(key)
        return int(value) if isinstance(value, int) else None

    return ImportRecord(
        int(row.id),
        row.created_at,
        str(p.get("file", "")),
        str(p.get("format", "")),
        number("imported"),
        number("duplicates"),
        number("skipped"),
        number("empty"),
        row_id("first_id"),
        row_id("last_id"),
    )


def progress(
    services: Container, scope: Scope, first_id: int | None, last_id: int | None
) -> Learning:
    """How many of `scope.person`'s imported chat rows with ids in [first_id, last_id] the
    enabled memory workers have learned (rows forgotten since are not counted)."""
    if first_id is None or last_id is None:
        return Learning(0, 0)
    a, c = AuditLog, Conversation
    mine = and_(
        a.event_type == audit.CHAT_COMPLETED,
        a.person_id == scope.person,
        a.id >= first_id,
        a.id <= last_id,
        a.subject_key.startswith(IMPORTED_KEY, autoescape=True),
    )
    memory = services.settings.memory
    learned: list[Any] = []
    with services.db.read() as session:
        total = int(session.scalar(select(func.count()).select_from(a).where(mine)) or 0)
        if memory.episodes_summarise.enabled:
            learned.append(or_(c.summarised_audit_id >= a.id, c.failed_audit_id >= a.id))
            if memory.episodes_summarise.passages:
                e = EpisodeSummary
                learned.append(
                    ~exists().where(
                        e.conversation_id == c.id, e.turn_vectors.is_(None), e.summary != ""
                    )
                )
        for name in CURSOR_WORKERS:
            worker = services.workers.get(name)
            if isinstance(worker, CursorWorker) and worker.enabled:
                learned.append(a.id <= worker.cursor(session))
        if not learned:
            return Learning(total, total)
        done = session.scalar(
            select(func.count()).select_from(a).join(c, c.id == a.subject_id).where(mine, *learned)
        )
    return Learning(int(done or 0), total)
