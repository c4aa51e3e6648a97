"""The vector half of a search backend held in this process: the current embedding model's
VectorIndex (memory/engine/vectors.py), refreshed by id from the database before each search,
and the rows themselves for an episode committed after that refresh."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from sqlalchemy import func, select

from caesar.db.engine import Database
from caesar.db.models import EpisodeSummary
from caesar.memory.engine.pgvector_migration import Progress, VectorStatus
from caesar.memory.engine.sql import person_checked
from caesar.memory.engine.vector_math import Hits, from_row
from caesar.memory.engine.vectors import Rank, VectorIndex
from caesar.memory.scope import Scope


class IndexSource(Protocol):
    """The current embedding model's index of each person (vectors.CurrentModelIndex, or
    FixedIndex)."""

    def current_model(self) -> str: ...

    def get(self, person: int) -> VectorIndex: ...

    def everyone_loaded(self) -> list[VectorIndex]: ...

    def forget(self, ids: Sequence[int]) -> None: ...

    def release(self) -> None:
        """Let go of the loaded indexes (the vectors are searched elsewhere now)."""
        ...


class FixedIndex:
    """An IndexSource of one given index, one person's, whatever the embedder (tests,
    benches). Another person has no index here: asking for one is an error, not a leak."""

    def __init__(self, index: VectorIndex, person: int) -> None:
        self.index = index
        self.person = person

    def current_model(self) -> str:
        return self.index.model_id

    def get(self, person: int) -> VectorIndex:
        if person != self.person:
            raise ValueError(f"this fixed index is person {self.person}'s, not {person}'s")
        return self.index

    def everyone_loaded(self) -> list[VectorIndex]:
        return [self.index]

    def forget(self, ids: Sequence[int]) -> None:
        self.index.forget(list(ids))

    def release(self) -> None:
        """Kept: it was given."""


# Episodes whose vectors start-up loads (~1.5 KiB each, ~40 per ms; see InProcessVectors.warm):
# a household of 100 × 10k started in 25.4 s and 2.17 GB loading everyone's.
WARM_EPISODES = 200_000


class InProcessVectors:
    """`VectorSearch` (memory/engine/backend.py) over the current model's in-process index of
    the person searching."""

    def __init__(self, indexes: IndexSource) -> None:
        self._indexes = indexes
        self._index = indexes.get

    def forget(self, ids: Sequence[int]) -> None:
        """Drop rows deleted elsewhere (retention, a forget) now, rather than when a search
        finds them missing after they have taken candidate slots."""
        self._indexes.forget(ids)

    @property
    def model_id(self) -> str:
        return self._indexes.current_model()

    @property
    def max_recall_count(self) -> float:
        """Over every loaded index: a bound for each person's."""
        return max((i.max_recall_count for i in self._indexes.everyone_loaded()), default=0.0)

    def refresh(self, scope: Scope) -> None:
        session, person = scope.session, scope.person
        self._index(person).refresh(session)

    def search(
        self,
        scope: Scope,
        query: np.ndarray,
        *,
        limit: int,
        threshold: float | None = None,
        min_created: float | None = None,
        rank: Rank | None = None,
        factor_range: tuple[float, float] = (1.0, 1.0),
    ) -> Hits:
        person = scope.person
        return self._index(person).search(
            query,
            limit=limit,
            threshold=threshold,
            min_created=min_created,
            rank=rank,
            factor_range=factor_range,
        )

    def newest(
        self,
        scope: Scope,
        query: np.ndarray,
        *,
        limit: int,
        min_created: float | None = None,
    ) -> Hits:
        person = scope.person
        return self._index(person).newest(query, limit=limit, min_created=min_created)

    def cosines(self, scope: Scope, ids: Sequence[int], query: np.ndarray) -> dict[int, float]:
        person = scope.person
        return self._index(person).cosines(list(ids), query)

    def stored_cosines(
        self, scope: Scope, ids: Sequence[int], query: np.ndarray
    ) -> dict[int, float]:
        return row_cosines(scope, ids, query)

    def warm(self, db: Database, budget: int | None = None) -> int:
        """Load people's indexes now (start-up) rather than on their first turn: the most
        recently active first, until `budget` episodes (WARM_EPISODES) are loaded — the first
        person's whatever its size, so an install of one loads all. The others load on their
        first search. Returns the episodes loaded."""
        budget = WARM_EPISODES if budget is None else budget
        with db.read() as session:
            loaded = 0
            for person, episodes in session.execute(
                select(EpisodeSummary.person_id, func.count())
                .group_by(EpisodeSummary.person_id)
                .order_by(func.max(EpisodeSummary.id).desc())
            ):
                if loaded and loaded + episodes > budget:
                    break
                self.refresh(Scope(int(person), session))
                loaded += int(episodes)
            return sum(len(i) for i in self._indexes.everyone_loaded())

    def migrate(self, db: Database, progress: Progress | None = None) -> VectorStatus | None:
        """Nothing to migrate: the vectors are searched where they are loaded."""
        return None


def row_cosines(scope: Scope, ids: Sequence[int], query: np.ndarray) -> dict[int, float]:
    """The cosine of each of `ids` (those that are `person`'s) with the query, from its row:
    the float32 copy, or the JSON record for a row written without one; 0 for a vector of
    another size."""
    session, person = scope.session, scope.person
    if not ids:
        return {}
    rows = session.execute(
        select(EpisodeSummary.id, EpisodeSummary.embedding_f32, EpisodeSummary.embedding).where(
            EpisodeSummary.id.in_(list(ids)),
            person_checked(EpisodeSummary.person_id, Scope(person)),
        )
    )
    q = np.asarray(query, dtype=np.float32)
    out = {}
    for i, blob, record in rows:
        vector = from_row(blob, record)
        out[int(i)] = float(vector @ q) if vector.shape == q.shape else 0.0
    return out
