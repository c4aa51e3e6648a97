"""Leaving with your data: `caesar export` (JSONL) and `caesar db backup` (a copy of the file).

Export writes one JSON object per line, each with a `type`: first an `export` header (format
version, time, row counts), then every `fact`, every `memory` (the standing statements and the
dated memories of what was said, without their vectors), every `episode` and every `audit` row,
oldest first. All of it is read inside ONE read transaction (a snapshot: SQLite in WAL mode, PostgreSQL
REPEATABLE READ), so the header's counts match the lines that follow even while caesar keeps
writing; rows are fetched in keyset-paginated batches, so memory stays flat at any size.

Backup of SQLite uses SQLite's online backup API in a single step: it copies every page under
one read snapshot, and in WAL mode that never blocks the server's writers. The copy is written
beside the target, checked (`PRAGMA integrity_check`, `foreign_key_check`) and only then renamed
into place, so a file at PATH is always a complete, consistent database. PostgreSQL is backed
up with its own tool, pg_dump; `pg_dump_command` says exactly how.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Self, TextIO

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from caesar import __version__
from caesar.clock import utcnow
from caesar.db.engine import Database
from caesar.db.models import AuditLog, EpisodeSummary, Fact, Memory
from caesar.errors import InputError
from caesar.memory.scope import Scope

EXPORT_FORMAT = 2  # 2: `memory` records
BATCH = 500
RECORD_TYPES = ("fact", "memory", "episode", "audit")


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass(frozen=True)
class ExportCounts:
    facts: int
    memories: int
    episodes: int
    audit: int

    @property
    def total(self) -> int:
        return self.facts + self.memories + self.episodes + self.audit

    def by_type(self) -> dict[str, int]:
        return {
            "fact": self.facts,
            "memory": self.memories,
            "episode": self.episodes,
            "audit": self.audit,
        }


def _counts(scope: Scope) -> ExportCounts:
    session, person = scope.session, scope.person

    def count(model: Any, *where: Any) -> int:
        mine = select(func.count()).select_from(model).where(model.person_id == person, *where)
        return int(session.scalar(mine) or 0)

    return ExportCounts(
        facts=count(Fact),
        memories=count(Memory),
        episodes=count(EpisodeSummary, _TOLD),
        audit=count(AuditLog),
    )


# An episode is one with a summary: a trivial or temporary chat leaves an empty row, which the
# API, the dashboard and forget count nowhere; the export neither writes nor counts it (its
# chat is in the audit rows)
_TOLD = EpisodeSummary.summary != ""


def fact_record(f: Fact) -> dict[str, Any]:
    return {
        "type": "fact",
        "id": f.id,
        "key": f.key,
        "value": f.value,
        "confidence": f.confidence,
        "source_audit_id": f.source_audit_id,
        "created_at": _iso(f.created_at),
        "updated_at": _iso(f.updated_at),
    }


# Every column but the vector and its model: what was said, about what, when, where and how it
# stands (replaced, contradicted, edited)
_MEMORY_COLUMNS = (
    Memory.id,
    Memory.kind,
    Memory.slot,
    Memory.text,
    Memory.about,
    Memory.polarity,
    Memory.confidence,
    Memory.speaker,
    Memory.source_audit_id,
    Memory.said_at,
    Memory.created_at,
    Memory.updated_at,
    Memory.superseded_by,
    Memory.contradicts,
    Memory.edit_count,
    Memory.conversation_id,
    Memory.turn,
    Memory.refers_start,
    Memory.refers_end,
)


def memory_record(row: Any) -> dict[str, Any]:
    return {
        "type": "memory",
        "id": row.id,
        "kind": row.kind,
        "slot": row.slot,
        "text": row.text,
        "about": row.about,
        "polarity": row.polarity,
        "confidence": row.confidence,
        "speaker": row.speaker,
        "source_audit_id": row.source_audit_id,
        "said_at": _iso(row.said_at),
        "created_at": _iso(row.created_at),
        "updated_at": _iso(row.updated_at),
        "superseded_by": row.superseded_by,
        "contradicts": row.contradicts,
        "edit_count": row.edit_count,
        "conversation_id": row.conversation_id,
        "turn": row.turn,
        "refers_start": _iso(row.refers_start),
        "refers_end": _iso(row.refers_end),
    }


_EPISODE_COLUMNS = (
    EpisodeSummary.id,
    EpisodeSummary.audit_log_id,
    EpisodeSummary.summary,
    EpisodeSummary.model,
    EpisodeSummary.created_at,
    EpisodeSummary.last_recalled_at,
    EpisodeSummary.recall_count,
    EpisodeSummary.conversation_id,
)


def episode_record(row: Any, embedding: list[float] | None = None) -> dict[str, Any]:
    record = {
        "type": "episode",
        "id": row.id,
        "audit_log_id": row.audit_log_id,
        "summary": row.summary,
        "model": row.model,
        "created_at": _iso(row.created_at),
        "last_recalled_at": _iso(row.last_recalled_at),
        "recall_count": row.recall_count,
        # the conversation it summarises (its chats' audit rows carry it as subject_id)
        "conversation_id": row.conversation_id,
    }
    if embedding is not None:
        record["embedding"] = embedding
    return record


def audit_record(a: AuditLog) -> dict[str, Any]:
    return {
        "type": "audit",
        "id": a.id,
        "event_type": a.event_type,
        "created_at": _iso(a.created_at),
        "subject_id": a.subject_id,
        "subject_key": a.subject_key,
        "payload": a.payload,
    }


def _facts(scope: Scope) -> Iterator[dict[str, Any]]:
    session, person = scope.session, scope.person
    last = 0
    while True:
        batch = session.scalars(
            select(Fact)
            .where(Fact.id > last, Fact.person_id == person)
            .order_by(Fact.id)
            .limit(BATCH)
        ).all()
        if not batch:
            return
        for fact in batch:
            yield fact_record(fact)
        last = batch[-1].id
        session.expunge_all()


def _memories(scope: Scope) -> Iterator[dict[str, Any]]:
    session, person = scope.session, scope.person
    last = 0
    while True:
        batch = session.execute(
            select(*_MEMORY_COLUMNS)
            .where(Memory.id > last, Memory.person_id == person)
            .order_by(Memory.id)
            .limit(BATCH)
        ).all()
        if not batch:
            return
        for row in batch:
            yield memory_record(row)
        last = batch[-1].id


def _episodes(scope: Scope, with_embeddings: bool) -> Iterator[dict[str, Any]]:
    # Without embeddings the (large) vector columns are never even read.
    session, person = scope.session, scope.person
    columns = (*_EPISODE_COLUMNS, EpisodeSummary.embedding) if with_embeddings else _EPISODE_COLUMNS
    last = 0
    while True:
        batch = session.execute(
            select(*columns)
            .where(EpisodeSummary.id > last, EpisodeSummary.person_id == person, _TOLD)
            .order_by(EpisodeSummary.id)
            .limit(BATCH)
        ).all()
        if not batch:
            return
        for row in batch:
            yield episode_record(row, list(row.embedding) if with_embeddings else None)
        last = batch[-1].id


def _audit(scope: Scope) -> Iterator[dict[str, Any]]:
    session, person = scope.session, scope.person
    last = 0
    while True:
        batch = session.scalars(
            select(AuditLog)
            .where(AuditLog.id > last, AuditLog.person_id == person)
            .order_by(AuditLog.id)
            .limit(BATCH)
        ).all()
        if not batch:
            return
        for row in batch:
            yield audit_record(row)
        last = batch[-1].id
        session.expunge_all()


class Export:
    """`with Export(db, person=…) as export:` opens the snapshot of `person`'s memory (their
    facts, memories, episodes and audit rows; nobody else's); `export.counts` is known before the first
    record is read (for a progress bar); `export.records()` streams them."""

    def __init__(self, db: Database, *, scope: Scope, with_embeddings: bool = False) -> None:
        person = scope.person
        self.db = db
        self.person = person
        self.with_embeddings = with_embeddings
        self._stack = ExitStack()
        self._session: Session | None = None
        self.counts = ExportCounts(0, 0, 0, 0)

    def __enter__(self) -> Self:
        self._session = self._stack.enter_context(self.db.read())
        self.db.snapshot(self._session)  # one snapshot for every statement of the export
        self.counts = _counts(Scope(self.person, self._session))
        return self

    def __exit__(self, *exc: object) -> None:
        self._session = None
        self._stack.close()

    def header(self) -> dict[str, Any]:
        return {
            "type": "export",
            "format": EXPORT_FORMAT,
            "caesar_version": __version__,
            "exported_at": _iso(utcnow()),
            "with_embeddings": self.with_embeddings,
            "counts": self.counts.by_type(),
        }

    def records(self) -> Iterator[dict[str, Any]]:
        if self._session is None:
            raise RuntimeError("use `with Export(db) as export:` before reading records")
        yield self.header()
        yield from _facts(Scope(self.person, self._session))
        yield from _memories(Scope(self.person, self._session))
        yield from _episodes(Scope(self.person, self._session), self.with_embeddings)
        yield from _audit(Scope(self.person, self._session))


def write_jsonl(
    records: Iterator[dict[str, Any]], out: TextIO, on_record: Callable[[str], None] | None = None
) -> dict[str, int]:
    """Write one compact JSON object per line; returns how many lines of each type."""
    written: dict[str, int] = {}
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
        out.write("\n")
        kind = record["type"]
        written[kind] = written.get(kind, 0) + 1
        if on_record is not None:
            on_record(kind)
    return written


def check_target(path: Path) -> None:
    if path.is_dir() or not path.parent.is_dir():
        raise InputError(f"cannot write {path}: not a file in an existing directory")


def export_to_path(
    db: Database,
    path: Path,
    *,
    scope: Scope,
    with_embeddings: bool = False,
    on_start: Callable[[ExportCounts], None] | None = None,
    on_record: Callable[[str], None] | None = None,
) -> dict[str, int]:
    """Export into `path` via a temporary file renamed at the end: a file at `path` is whole."""
    check_target(path)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        with (
            Export(db, scope=scope, with_embeddings=with_embeddings) as export,
            tmp.open("w", encoding="utf-8") as out,
        ):
            if on_start:
                on_start(export.counts)
            written = write_jsonl(export.records(), out, on_record)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return written
