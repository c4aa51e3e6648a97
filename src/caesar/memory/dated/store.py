"""Dated memories in the `memories` table (kind `said`, migration 0020; issue #45).

The `memory.extract` worker writes a chat row's dated memories in the transaction that moves
its cursor (memory/facts/extract.py): exactly once, whatever the number of workers. Each keeps
its chat row (`source_audit_id`: forgetting the chat, or the retention sweep deleting it,
deletes the memory by ON DELETE CASCADE), its conversation and turn, who said it, when, and the
time its words name. One `memory.said` audit row per chat row says how many, never what.

The person sees them (`list`, `search`, `get`) and corrects or deletes one (`edit`, `delete`:
the CLI, the API and the dashboard); another person's, and a row of another kind (a standing
statement, StandingStore's), is not found.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

import numpy as np
from sqlalchemy import Select, delete, select
from sqlalchemy.orm import Session

from caesar import audit
from caesar.clock import utcnow
from caesar.db.engine import Database
from caesar.db.models import Memory
from caesar.embeddings import EmbedderHandle, normalise
from caesar.errors import NotFound
from caesar.memory.dated import offline
from caesar.memory.dated.offline import DatedMemory
from caesar.memory.scope import Scope
from caesar.memory.standing.store import clean_text, search_pattern

SAID = "said"  # the kind of a dated memory in `memories`


@dataclass(frozen=True)
class SaidMemory:
    id: int
    speaker: str
    text: str
    said_at: datetime
    conversation_id: int | None
    turn: int | None
    refers_start: datetime | None
    refers_end: datetime | None
    source_audit_id: int | None
    updated_at: datetime  # said_at, or the person's last edit
    edit_count: int

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "speaker": self.speaker,
            "text": self.text,
            "said_at": self.said_at.isoformat(),
            "conversation_id": self.conversation_id,
            "turn": self.turn,
            "refers_start": self.refers_start.isoformat() if self.refers_start else None,
            "refers_end": self.refers_end.isoformat() if self.refers_end else None,
            "source_audit_id": self.source_audit_id,
            "updated_at": self.updated_at.isoformat(),
            "edit_count": self.edit_count,
        }


def _view(row: Memory) -> SaidMemory:
    return SaidMemory(
        row.id,
        row.speaker,
        row.text,
        row.said_at,
        row.conversation_id,
        row.turn,
        row.refers_start,
        row.refers_end,
        row.source_audit_id,
        row.updated_at,
        row.edit_count,
    )


def _theirs(scope: Scope, conversation_id: int | None) -> Select[Memory]:
    """The person's dated memories, of one conversation when `conversation_id` is given."""
    query = select(Memory).where(Memory.person_id == scope.person, Memory.kind == SAID)
    if conversation_id is not None:
        query = query.where(Memory.conversation_id == conversation_id)
    return query


@dataclass
class RowMemories:
    """A chat row's dated memories, read outside the transaction: what it said, their vectors,
    its conversation and the index in it of the first turn the row added."""

    audit_id: int
    said_at: datetime
    person: int
    conversation_id: int | None
    first_turn: int = 0
    said: list[DatedMemory] = field(default_factory=list)
    vectors: list[np.ndarray | None] = field(default_factory=list)


class DatedStore:
    def __init__(self, db: Database, embedder: EmbedderHandle) -> None:
        self.db = db
        self.embedder = embedder

    def vectors(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        """The memories' vectors, normalised, with the model that made them; Nones with the
        embedder off. Outside any transaction: embedding is slow."""
        if not texts or not self.embedder.enabled:
            return [None] * len(texts)
        return list(normalise(self.embedder.get().embed_batch(list(texts))))

    def read(
        self,
        row_id: int,
        said_at: datetime,
        person: int,
        conversation_id: int | None,
        first_turn: int,
        turns: Sequence[Mapping[str, object]],
        zone: tzinfo,
        times: Sequence[datetime | None] | None = None,
    ) -> RowMemories:
        """A chat row's dated memories from the turns it added, with no LLM, embedded;
        `times`: when each turn was said, where known (an import's)."""
        said = offline.extract(turns, said_at, zone, times)
        vectors = self.vectors([m.text for m in said])
        return RowMemories(row_id, said_at, person, conversation_id, first_turn, said, vectors)

    def write(self, session: Session, log: audit.Audit, read: RowMemories) -> int:
        """`read` written in the worker's transaction."""
        return self.learn(
            Scope(read.person, session),
            log,
            read.said,
            read.vectors,
            source_audit_id=read.audit_id,
            conversation_id=read.conversation_id,
            said_at=read.said_at,
            first_turn=read.first_turn,
        )

    @property
    def model(self) -> str | None:
        return self.embedder.get().model_id if self.embedder.enabled else None

    def learn(
        self,
        scope: Scope,
        log: audit.Audit,
        memories: Sequence[DatedMemory],
        vectors: Sequence[np.ndarray | None],
        *,
        source_audit_id: int,
        conversation_id: int | None,
        said_at: datetime,
        first_turn: int = 0,
    ) -> int:
        """Write one chat row's dated memories with their `vectors` (in the worker's
        transaction); `first_turn` is the conversation's index of the exchange's first message.
        How many were written."""
        if not memories:
            return 0
        session, now, model = scope.session, utcnow(), self.model
        rows = [
            Memory(
                person_id=scope.person,
                kind=SAID,
                slot="",
                text=m.text,
                about="",
                polarity=1,
                confidence=1.0,
                speaker=m.speaker,
                source_audit_id=source_audit_id,
                said_at=m.said_at or said_at,
                created_at=now,
                updated_at=m.said_at or said_at,
                conversation_id=conversation_id,
                turn=first_turn + m.turn,
                refers_start=m.refers_start,
                refers_end=m.refers_end,
                vector=None if v is None else np.asarray(v, np.float32).tobytes(),
                model=None if v is None else model,
            )
            for m, v in zip(memories, vectors, strict=True)
        ]
        session.add_all(rows)
        session.flush()
        log.append(
            scope,
            audit.MEMORY_SAID,
            {"count": len(rows), "first_id": rows[0].id, "last_id": rows[-1].id},
            subject_id=source_audit_id,
        )
        return len(rows)

    # -- reads --------------------------------------------------------------------------------
    def list(
        self,
        *,
        scope: Scope,
        conversation_id: int | None = None,
        limit: int = 200,
        newest_first: bool = False,
    ) -> builtins.list[SaidMemory]:
        """The person's dated memories in the order they were said, oldest first (the newest
        `limit` of them, newest first, with `newest_first`); of one conversation when
        `conversation_id` is given."""
        # by turn within a chat row: an edited memory has a newer id, not a later place
        order = (
            (Memory.said_at.desc(), Memory.turn.desc(), Memory.id.desc())
            if newest_first
            else (Memory.said_at, Memory.turn, Memory.id)
        )
        with self.db.read() as session:
            query = _theirs(scope, conversation_id).order_by(*order).limit(limit)
            return [_view(r) for r in session.scalars(query)]

    def search(
        self,
        text: str,
        *,
        scope: Scope,
        conversation_id: int | None = None,
        limit: int = 200,
    ) -> builtins.list[SaidMemory]:
        """The person's dated memories whose text holds `text` (any case), newest first; an
        InputError for blank words or control characters."""
        needle = search_pattern(text)
        with self.db.read() as session:
            query = (
                _theirs(scope, conversation_id)
                .where(Memory.text.ilike(needle, escape="\\"))
                .order_by(Memory.said_at.desc(), Memory.turn.desc(), Memory.id.desc())
                .limit(limit)
            )
            return [_view(r) for r in session.scalars(query)]

    def get(self, memory_id: int, *, scope: Scope) -> SaidMemory:
        with self.db.read() as session:
            return _view(_owned(Scope(scope.person, session), memory_id))

    def owns(self, memory_id: int, *, scope: Scope) -> bool:
        """Whether `memory_id` is one of the person's dated memories (not a statement, not
        anyone else's): what a surface that takes either kind of id asks first."""
        with self.db.read() as session:
            row = session.get(Memory, memory_id)
            return row is not None and row.person_id == scope.person and row.kind == SAID

    # -- the person's own word ----------------------------------------------------------------
    def edit(self, log: audit.Audit, memory_id: int, text: str, *, scope: Scope) -> SaidMemory:
        """The person's correction (NotFound for anyone else's): the new text, embedded again,
        their edit counted; its date, speaker, conversation and turn stay what they were.

        The corrected memory is a new row, with a new id, and the old one is deleted: the
        vector indexes (memory/engine/said_vectors.py) learn of rows by id, in every process
        (`caesar memories edit` runs beside the server), so a vector changed under the same id
        would be searched as the old words until a restart. The edit rows quoting the old id
        go with it (the new row's says which it replaces): `delete` leaves none of its words."""
        text = clean_text(text)
        self.get(memory_id, scope=scope)  # not found before anything is embedded
        [vector] = self.vectors([text])
        with self.db.write() as session:
            mine = Scope(scope.person, session)
            old = _owned(mine, memory_id)
            row = Memory(
                person_id=old.person_id,
                kind=SAID,
                slot="",
                text=text,
                about="",
                polarity=1,
                confidence=1.0,
                speaker=old.speaker,
                source_audit_id=old.source_audit_id,
                said_at=old.said_at,
                created_at=utcnow(),
                updated_at=utcnow(),
                edit_count=old.edit_count + 1,
                conversation_id=old.conversation_id,
                turn=old.turn,
                refers_start=old.refers_start,
                refers_end=old.refers_end,
                # with the embedder off, none: never the old words' vector
                vector=None if vector is None else np.asarray(vector, np.float32).tobytes(),
                model=None if vector is None else self.model,
            )
            _unquote(mine, memory_id)
            session.delete(old)
            session.add(row)
            session.flush()
            log.append(
                mine,
                audit.MEMORY_USER_EDITED,
                {"memory_id": row.id, "replaces": memory_id, "kind": SAID, "text": text},
                subject_id=row.source_audit_id,
            )
            return _view(row)

    def delete(self, log: audit.Audit, memory_id: int, *, scope: Scope) -> None:
        """Gone, with the audit rows that quote its words (the person's edit); one row says
        which went, never what it said."""
        with self.db.write() as session:
            mine = Scope(scope.person, session)
            row = _owned(mine, memory_id)
            _unquote(mine, memory_id)
            session.delete(row)
            log.append(mine, audit.MEMORY_USER_DELETED, {"memory_id": memory_id, "kind": SAID})


def _owned(scope: Scope, memory_id: int) -> Memory:
    row = scope.session.get(Memory, memory_id)
    # another person's, or a standing statement, is not there at all
    if row is None or row.person_id != scope.person or row.kind != SAID:
        raise NotFound(f"no said memory with id {memory_id}")
    return row


def _unquote(scope: Scope, memory_id: int) -> None:
    """Delete the person's edit rows that quote the memory's words."""
    scope.session.execute(
        delete(audit.AuditLog).where(
            audit.AuditLog.event_type == audit.MEMORY_USER_EDITED,
            audit.AuditLog.person_id == scope.person,
            audit.AuditLog.payload["memory_id"].as_integer() == memory_id,
        )
    )
