"""The vector half of a search backend held in this process: the current embedding model's
VectorIndex (memory/search/vectors.py), refreshed by id from the database before each search,
and the rows themselves for an episode committed after that refresh."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from caesar.db.engine import Database
from caesar.db.models import EpisodeSummary
from caesar.memory.search.pgvector_migration import Progress, VectorStatus
from caesar.memory.search.vector_math import Hits, from_row
from caesar.memory.search.vectors import Rank, VectorIndex


class IndexSource(Protocol):
    """The current embedding model's index (vectors.CurrentModelIndex, or FixedIndex)."""

    def current_model(self) -> str: ...

    def get(self) -> VectorIndex: ...

    def forget(self, ids: Sequence[int]) -> None: ...

    def release(self) -> None:
        """Let go of the loaded index (the vectors are searched elsewhere now)."""
        ...


class FixedIndex:
    """An IndexSource of one given index, whatever the embedder (tests, benches)."""

    def __init__(self, index: VectorIndex) -> None:
        self.index = index

    def current_model(self) -> str:
        return self.index.model_id

    def get(self) -> VectorIndex:
        return self.index

    def forget(self, ids: Sequence[int]) -> None:
        self.index.forget(list(ids))

    def release(self) -> None:
        """Kept: it was given."""


class InProcessVectors:
    """`VectorSearch` (memory/search/backend.py) over the current model's in-process index."""

    def __init__(self, indexes: IndexSource) -> None:
        self._indexes = indexes
        self._index = indexes.get

    def forget(self, ids: Sequence[int]) -> None:
        """Drop rows deleted elsewhere (retention, a forget) now, rather than when a search
        finds them missing after they have taken candidate slots."""
        self._indexes.forget(ids)

    @property
    def model_id(self) -> str:
        return self._index().model_id

    @property
    def max_recall_count(self) -> float:
        return self._index().max_recall_count

    def refresh(self, session: Session) -> None:
        self._index().refresh(session)

    def search(
        self,
        session: Session,
        query: np.ndarray,
        *,
        limit: int,
        threshold: float | None = None,
        min_created: float | None = None,
        rank: Rank | None = None,
        factor_range: tuple[float, float] = (1.0, 1.0),
    ) -> Hits:
        return self._index().search(
            query,
            limit=limit,
            threshold=threshold,
            min_created=min_created,
            rank=rank,
            factor_range=factor_range,
        )

    def newest(
        self, session: Session, query: np.ndarray, *, limit: int, min_created: float | None = None
    ) -> Hits:
        return self._index().newest(query, limit=limit, min_created=min_created)

    def cosines(self, session: Session, ids: Sequence[int], query: np.ndarray) -> dict[int, float]:
        return self._index().cosines(list(ids), query)

    def stored_cosines(
        self, session: Session, ids: Sequence[int], query: np.ndarray
    ) -> dict[int, float]:
        return row_cosines(session, ids, query)

    def warm(self, db: Database) -> int:
        with db.read() as session:
            self.refresh(session)
        return len(self._index())

    def migrate(self, db: Database, progress: Progress | None = None) -> VectorStatus | None:
        """Nothing to migrate: the vectors are searched where they are loaded."""
        return None


def row_cosines(session: Session, ids: Sequence[int], query: np.ndarray) -> dict[int, float]:
    """The cosine of each of `ids` with the query, from its row: the float32 copy, or the JSON
    record for a row written without one; 0 for a vector of another size."""
    if not ids:
        return {}
    rows = session.execute(
        select(EpisodeSummary.id, EpisodeSummary.embedding_f32, EpisodeSummary.embedding).where(
            EpisodeSummary.id.in_(list(ids))
        )
    )
    q = np.asarray(query, dtype=np.float32)
    out = {}
    for i, blob, record in rows:
        vector = from_row(blob, record)
        out[int(i)] = float(vector @ q) if vector.shape == q.shape else 0.0
    return out
