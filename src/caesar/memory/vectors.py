"""An in-process float32 matrix of one table's embeddings, for exact top-K by cosine.

The ADR keeps embeddings as JSON and scores them in Python; at 100k episodes that is ~1 s a
turn. Here the vectors of the current embedder model are loaded once (from the compact
float32 copy) and refreshed incrementally by id on every search, so a search is one
matrix-vector product plus vectorised filters. Rows deleted elsewhere are dropped when a
search finds them missing (`forget`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

EPOCH = datetime(1970, 1, 1)


def to_f32_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_row(blob: bytes | None, fallback_json: list[float] | None) -> np.ndarray:
    if blob:
        return np.frombuffer(blob, dtype="<f4")
    return np.asarray(fallback_json or [], dtype=np.float32)


def epoch_seconds(value: datetime) -> float:
    return (value - EPOCH).total_seconds()


@dataclass
class Hits:
    """Parallel arrays, best first."""

    ids: np.ndarray
    cosine: np.ndarray
    created: np.ndarray  # epoch seconds
    recall_count: np.ndarray


class VectorIndex:
    """`model_cls` must have id, embedding, embedding_f32, model, created_at; `extra_filter`
    narrows which rows are searchable (e.g. non-empty summaries)."""

    _GROW = 1.5

    def __init__(self, model_cls: Any, model_id: str, extra_filter: Any = None) -> None:
        self.model_cls = model_cls
        self.model_id = model_id
        self.extra_filter = extra_filter
        self._lock = threading.Lock()
        self._n = 0
        self._dim = 0
        self._max_id = 0
        self._vectors = np.zeros((0, 0), dtype=np.float32)
        self._ids = np.zeros(0, dtype=np.int64)
        self._created = np.zeros(0, dtype=np.float64)
        self._recalls = np.zeros(0, dtype=np.float64)
        self._alive = np.zeros(0, dtype=bool)
        self._pos: dict[int, int] = {}
        self._has_recalls = hasattr(model_cls, "recall_count")

    def __len__(self) -> int:
        return int(self._alive[: self._n].sum())

    def _reserve(self, extra: int, dim: int) -> None:
        need = self._n + extra
        if self._dim == 0:
            self._dim = dim
        if need <= len(self._ids):
            return
        capacity = max(need, int(len(self._ids) * self._GROW), 1024)

        def grow(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
            bigger = np.zeros(shape, dtype=array.dtype)
            bigger[: self._n] = array[: self._n]
            return bigger

        self._vectors = grow(
            self._vectors if self._vectors.size else np.zeros((0, dim), np.float32),
            (capacity, self._dim),
        )
        self._ids = grow(self._ids, (capacity,))
        self._created = grow(self._created, (capacity,))
        self._recalls = grow(self._recalls, (capacity,))
        self._alive = grow(self._alive, (capacity,))

    def refresh(self, session: Session, chunk: int = 20_000) -> int:
        """Load rows newer than the newest loaded; returns how many were added."""
        m = self.model_cls
        columns = [m.id, m.embedding_f32, m.created_at]
        if self._has_recalls:
            columns.append(m.recall_count)
        added = 0
        with self._lock:
            while True:
                query = select(*columns).where(m.model == self.model_id, m.id > self._max_id)
                if self.extra_filter is not None:
                    query = query.where(self.extra_filter)
                rows = session.execute(query.order_by(m.id).limit(chunk)).all()
                missing = [r.id for r in rows if not r.embedding_f32]
                fallback: dict[int, list[float]] = {}
                if missing:
                    fallback = dict(
                        session.execute(select(m.id, m.embedding).where(m.id.in_(missing))).all()
                    )
                if not rows:
                    return added
                vectors = [from_row(r.embedding_f32, fallback.get(r.id)) for r in rows]
                dim = len(vectors[0])
                self._reserve(len(rows), dim)
                start = self._n
                stop = start + len(rows)
                block = np.vstack(vectors).astype(np.float32, copy=False)
                self._vectors[start:stop] = block
                self._ids[start:stop] = [r.id for r in rows]
                self._created[start:stop] = [epoch_seconds(r.created_at) for r in rows]
                if self._has_recalls:
                    self._recalls[start:stop] = [r.recall_count for r in rows]
                self._alive[start:stop] = True
                for offset, r in enumerate(rows):
                    self._pos[r.id] = start + offset
                self._n = stop
                self._max_id = rows[-1].id
                added += len(rows)
                if len(rows) < chunk:
                    return added

    def forget(self, ids: list[int]) -> None:
        with self._lock:
            for row_id in ids:
                pos = self._pos.pop(int(row_id), None)
                if pos is not None:
                    self._alive[pos] = False

    def set_recall_count(self, row_id: int, count: int) -> None:
        pos = self._pos.get(int(row_id))
        if pos is not None:
            self._recalls[pos] = count

    def search(
        self,
        query: np.ndarray,
        *,
        limit: int,
        threshold: float | None = None,
        min_created: float | None = None,
        rank: Any = None,
    ) -> Hits:
        """Exact search. Keeps rows with cosine ≥ threshold and created ≥ min_created, orders
        them by `rank(cosine, created, recall_count)` (default: cosine) and returns `limit`."""
        # A consistent snapshot: growth replaces arrays, so old references stay valid for n rows.
        with self._lock:
            n, dim = self._n, self._dim
            vectors, ids, created_all = self._vectors, self._ids, self._created
            recalls_all, alive = self._recalls, self._alive
        empty = np.zeros(0)
        if n == 0 or dim == 0:
            return Hits(empty.astype(np.int64), empty, empty, empty)
        if query.shape[-1] != dim:
            raise ValueError(f"query has {query.shape[-1]} dims, index has {dim}")
        cosine = vectors[:n] @ query.astype(np.float32, copy=False)
        mask = alive[:n].copy()
        if threshold is not None:
            mask &= cosine >= threshold
        if min_created is not None:
            mask &= created_all[:n] >= min_created
        candidates = np.flatnonzero(mask)
        if candidates.size == 0:
            return Hits(empty.astype(np.int64), empty, empty, empty)
        cos = cosine[candidates].astype(np.float64)
        created = created_all[candidates]
        recalls = recalls_all[candidates]
        keys = rank(cos, created, recalls) if rank is not None else cos
        if candidates.size > limit:
            top = np.argpartition(-keys, limit - 1)[:limit]
        else:
            top = np.arange(candidates.size)
        top = top[np.argsort(-keys[top], kind="stable")]
        return Hits(ids[candidates[top]], cos[top], created[top], recalls[top])
