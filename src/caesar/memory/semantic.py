"""The v0.4 semantic index (ADR-0010): raw replies, chunked and embedded, for explicit recall.

Worker `semantic.index` follows `chat.completed` rows, splits each reply into chunks of at
most `semantic.chunk_chars` on paragraph, then sentence, then word boundaries, embeds a whole
batch in one call and writes `semantic_chunks`. `SemanticMemory.recall` answers "what did we
say about the renovation?": plain cosine over the chunks of the current embedder model — no
threshold, no decay, because the operator asked for it explicitly (auto-recall is memory/recall/).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from caesar import audit
from caesar.db.engine import Database
from caesar.db.models import AuditLog, SemanticChunk, SemanticIndexCursor
from caesar.embeddings import EmbedderHandle, embed_one
from caesar.errors import CaesarError
from caesar.memory.engine.vector_math import to_f32_bytes
from caesar.memory.engine.vectors import CurrentModelIndex, VectorIndex
from caesar.memory.scope import Scope
from caesar.memory.transcript import is_temporary
from caesar.workers import CursorWorker

_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE = re.compile(r"(?<=[.!?…])\s+")


# -- chunking (pure) ---------------------------------------------------------------------------
def _pieces(text: str, max_chars: int) -> list[str]:
    """Paragraphs, else sentences, else words, else hard cuts: every piece ≤ max_chars."""
    out: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        paragraph = " ".join(paragraph.split())
        if not paragraph:
            continue
        if len(paragraph) <= max_chars:
            out.append(paragraph)
            continue
        for sentence in _SENTENCE.split(paragraph):
            if len(sentence) <= max_chars:
                out.append(sentence)
                continue
            line = ""
            for word in sentence.split(" "):
                while len(word) > max_chars:  # a URL or a base64 blob: no boundary to respect
                    if line:
                        out.append(line)
                        line = ""
                    out.append(word[:max_chars])
                    word = word[max_chars:]
                if line and len(line) + 1 + len(word) > max_chars:
                    out.append(line)
                    line = word
                else:
                    line = f"{line} {word}" if line else word
            if line:
                out.append(line)
    return out


def chunk_text(text: str, max_chars: int) -> list[str]:
    """Pack consecutive pieces into chunks of at most `max_chars`; a paragraph break between
    two packed pieces is kept as a blank line so a chunk still reads naturally."""
    chunks: list[str] = []
    current = ""
    for piece in _pieces(text, max_chars):
        if not current:
            current = piece
        elif len(current) + 1 + len(piece) <= max_chars:
            current = f"{current} {piece}"
        else:
            chunks.append(current)
            current = piece
    if current:
        chunks.append(current)
    return chunks


# -- the worker --------------------------------------------------------------------------------
@dataclass
class _Indexed:
    row: AuditLog
    chunks: list[str]
    vectors: list[np.ndarray] = field(default_factory=list)


@dataclass
class _Prepared:
    items: list[_Indexed]
    model_id: str = ""
    error: str | None = None


class SemanticIndexWorker(CursorWorker[_Prepared]):
    name = "semantic.index"
    cursor_model = SemanticIndexCursor

    @property
    def enabled(self) -> bool:
        semantic = self.services.settings.semantic
        return bool(semantic.index_enabled and semantic.enabled)

    @property
    def interval_seconds(self) -> float:
        return float(self.services.settings.semantic.interval_seconds)

    @property
    def batch_size(self) -> int:
        return int(self.services.settings.semantic.batch_size)

    def prepare(self, rows: Sequence[AuditLog]) -> _Prepared:
        max_chars = self.services.settings.semantic.chunk_chars
        items = [
            _Indexed(
                row,
                # a temporary chat is never indexed (no chunks: the cursor still moves on)
                []
                if is_temporary(row.payload)
                else chunk_text(str(row.payload.get("reply") or ""), max_chars),
            )
            for row in rows
        ]
        texts = [c for item in items for c in item.chunks]
        try:
            embedder = self.services.embedder.get()
            model_id = embedder.model_id
            vectors = embedder.embed_batch(texts) if texts else np.zeros((0, 0), np.float32)
        except CaesarError as exc:
            return _Prepared(items, error=f"{type(exc).__name__}: {exc}"[:1000])
        at = 0
        for item in items:
            item.vectors = list(vectors[at : at + len(item.chunks)])
            at += len(item.chunks)
        return _Prepared(items, model_id=model_id)

    def apply(self, session: Session, rows: Sequence[AuditLog], prepared: _Prepared) -> None:
        for item in prepared.items:
            if prepared.error is not None:
                self.audit.append(
                    Scope(item.row.person_id, session),
                    audit.SEMANTIC_INDEX_FAILED,
                    {"audit_log_id": item.row.id, "error": prepared.error},
                    subject_id=item.row.id,
                )
                continue
            already = session.scalar(
                select(SemanticChunk.id).where(SemanticChunk.audit_log_id == item.row.id).limit(1)
            )
            if already is not None:  # indexed before (e.g. a rebuilt cursor): a no-op
                continue
            for index, (text, vector) in enumerate(zip(item.chunks, item.vectors, strict=True)):
                session.add(
                    SemanticChunk(
                        audit_log_id=item.row.id,
                        chunk_index=index,
                        text=text,
                        embedding=[float(x) for x in vector],
                        embedding_f32=to_f32_bytes(vector),
                        model=prepared.model_id,
                        created_at=item.row.created_at,
                        person_id=item.row.person_id,  # the chat's person's, as the chat
                    )
                )
            self.audit.append(
                Scope(item.row.person_id, session),
                audit.SEMANTIC_INDEXED,
                {
                    "audit_log_id": item.row.id,
                    "chunks": len(item.chunks),
                    "model": prepared.model_id,
                },
                subject_id=item.row.id,
            )


# -- explicit recall ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SemanticHit:
    chunk_id: int
    audit_log_id: int
    chunk_index: int
    text: str
    score: float  # cosine
    created_at: datetime

    def as_json(self) -> dict[str, object]:
        return {
            "chunk_id": self.chunk_id,
            "audit_log_id": self.audit_log_id,
            "chunk_index": self.chunk_index,
            "text": self.text,
            "score": round(self.score, 6),
            "created_at": self.created_at.isoformat(),
        }


class SemanticMemory:
    """`memory.semantic_recall`: an in-process vector index over `semantic_chunks`, one per
    person (a person's recall searches their chunks alone)."""

    def __init__(self, db: Database, embedder: EmbedderHandle) -> None:
        self.db = db
        self.embedder = embedder
        self._indexes = CurrentModelIndex(SemanticChunk, lambda: self.embedder.get().model_id)

    def index(self, person: int) -> VectorIndex:
        return self._indexes.get(person)

    def forget(self, chunk_ids: Sequence[int]) -> None:
        """Drop rows deleted elsewhere (retention) from the in-process index."""
        self._indexes.forget(chunk_ids)

    def recall(self, query: str, top_k: int = 5, *, scope: Scope) -> list[SemanticHit]:
        person = scope.person
        vector = embed_one(self.embedder.get(), query)
        index = self.index(person)
        with self.db.read() as session:
            index.refresh(session)
            # Overfetch: rows swept since the last search are found missing below and dropped.
            hits = index.search(vector, limit=top_k * 2)
            ids = [int(i) for i in hits.ids]
            if not ids:
                return []
            rows = {
                r.id: r
                for r in session.execute(
                    select(
                        SemanticChunk.id,
                        SemanticChunk.audit_log_id,
                        SemanticChunk.chunk_index,
                        SemanticChunk.text,
                        SemanticChunk.created_at,
                    ).where(SemanticChunk.id.in_(ids))
                )
            }
        gone = [i for i in ids if i not in rows]
        if gone:
            index.forget(gone)
        out = [
            SemanticHit(
                i,
                rows[i].audit_log_id,
                rows[i].chunk_index,
                rows[i].text,
                float(c),
                rows[i].created_at,
            )
            for i, c in zip(ids, hits.cosine, strict=True)
            if i in rows
        ]
        return out[:top_k]
