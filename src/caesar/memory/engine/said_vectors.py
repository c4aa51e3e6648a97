"""The dated memories' vectors (kind `said`, memory/dated), searched in this process on either
engine: one VectorIndex (memory/engine/vectors.py) per person for the embedder's current
model, loaded on the person's first search (or at start-up, `warm`) and refreshed by id before
each. What recall's memory stage (memory/recall/said.py) searches across every conversation.

A memory deleted since it was loaded (its chat forgotten, retention, an edit's delete) is
dropped from the index when a search finds its row gone (`forget`); the row is always read
again before anything reaches a prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from sqlalchemy import func, select

from caesar.db.engine import Database
from caesar.db.models import Memory
from caesar.memory.engine.vectors import CurrentModelIndex, VectorIndex
from caesar.memory.scope import Scope

SAID = "said"  # the kind (memory/dated/store.py)
# Memories whose vectors start-up loads (1,920 bytes of vectors each, float32 and 8-bit: computed): ten per conversation of
# in_process.WARM_EPISODES.
WARM_MEMORIES = 2_000_000


class SaidColumns:
    """What a VectorIndex reads of a row (its `model_cls`), for the `memories` table: the
    vector is `vector`, its time `said_at`."""

    __table__ = Memory.__table__
    __tablename__ = Memory.__tablename__
    id = Memory.id
    embedding_f32 = Memory.vector
    embedding = Memory.vector
    model = Memory.model
    created_at = Memory.said_at
    person_id = Memory.person_id


class SaidVectors:
    """Each person's dated memories' vectors, nearest first."""

    def __init__(self, model_id: Callable[[], str]) -> None:
        self._indexes = CurrentModelIndex(SaidColumns, model_id, extra_filter=Memory.kind == SAID)

    def index(self, person: int) -> VectorIndex:
        """The person's index (loaded on first use)."""
        return self._indexes.get(person)

    def search(
        self, scope: Scope, query: np.ndarray, limit: int, threshold: float | None = None
    ) -> dict[int, float]:
        """{memory id: cosine} of the person's `limit` nearest with cosine ≥ threshold (their
        own index: nobody else's is scanned). With a threshold the index's IVF stage answers
        from the lists that can pass it; without one an exact top `limit` of a million rows
        scanned most of them (~230 ms on this host)."""
        index = self._indexes.get(scope.person)
        index.refresh(scope.session)
        hits = index.search(query, limit=limit, threshold=threshold)
        return {int(i): float(c) for i, c in zip(hits.ids, hits.cosine, strict=True)}

    def cosines(self, scope: Scope, ids: Sequence[int], query: np.ndarray) -> dict[int, float]:
        """The cosine of each of `ids` the person's index holds."""
        return self._indexes.get(scope.person).cosines(list(ids), query)

    def forget(self, ids: Sequence[int]) -> None:
        self._indexes.forget(ids)

    def warm(self, db: Database, budget: int = WARM_MEMORIES) -> int:
        """Load people's vectors now (start-up) rather than on their first turn: the most
        recently active first, until `budget` memories are loaded (the first person's whatever
        its size). Returns the memories loaded."""
        loaded = 0
        with db.read() as session:
            for person, count in session.execute(
                select(Memory.person_id, func.count())
                .where(Memory.kind == SAID)
                .group_by(Memory.person_id)
                .order_by(func.max(Memory.id).desc())
            ):
                if loaded and loaded + count > budget:
                    break
                index = self._indexes.get(int(person))
                index.refresh(session)
                loaded += len(index)
        return loaded
