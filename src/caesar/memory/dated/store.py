"""Dated memories in the `memories` table (kind `said`, migration 0020; issue #45).

The `memory.extract` worker writes a chat row's dated memories in the transaction that moves
its cursor (memory/facts/extract.py): exactly once, whatever the number of workers. Each keeps
its chat row (`source_audit_id`: forgetting the chat, or the retention sweep deleting it,
deletes the memory by ON DELETE CASCADE), its conversation and turn, who said it, when, and the
time its words name. One `memory.said` audit row per chat row says how many, never what.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from caesar import audit
from caesar.clock import utcnow
from caesar.db.engine import Database
from caesar.db.models import Memory
from caesar.embeddings import EmbedderHandle, normalise
from caesar.memory.dated import offline
from caesar.memory.dated.offline import DatedMemory
from caesar.memory.scope import Scope

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
    )


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
    ) -> RowMemories:
        """A chat row's dated memories from the turns it added, with no LLM, embedded."""
        said = offline.extract(turns, said_at, zone)
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
                said_at=said_at,
                created_at=now,
                updated_at=said_at,
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

    def list(
        self, *, scope: Scope, conversation_id: int | None = None, limit: int = 200
    ) -> list[SaidMemory]:
        """The person's dated memories in the order they were said, oldest first; of one
        conversation when `conversation_id` is given."""
        with self.db.read() as session:
            query = select(Memory).where(Memory.person_id == scope.person, Memory.kind == SAID)
            if conversation_id is not None:
                query = query.where(Memory.conversation_id == conversation_id)
            query = query.order_by(Memory.said_at, Memory.id).limit(limit)
            return [_view(r) for r in session.scalars(query)]
