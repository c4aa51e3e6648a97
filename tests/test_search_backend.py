"""The contract every search backend (memory/search/backend.py) passes, on fixed data, on each
engine it serves: a vector search answers as an exact brute force over the same rows does —
with thresholds, age filters and a rank (test_vectors.CASES), rows added after the first
search, deletes, and a change of embedding model.

Tolerance: the same ids in the same order, except rows whose scores tie to float32 rounding
(test_vectors.TIE, 1e-6), which may come in either order; every cosine within 1e-5 of the
reference's. A backend that searches approximately (pgvector's HNSW) must state its own
tolerance here — a share of the exact top k — and pass it on these rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_vectors import DIM, MODEL, NOW_S, Corpus, check, queries_for

from caesar.db import Database
from caesar.db.models import EpisodeSummary
from caesar.memory.importance import SECONDS_PER_DAY
from caesar.memory.search.backend import SearchBackend, search_backend
from caesar.memory.search.vectors import CurrentModelIndex, epoch_seconds

OTHER = "other-model"


class Bound:
    """A backend and a read session in VectorIndex.search's shape, for test_vectors.check."""

    def __init__(self, backend: SearchBackend, session: Any) -> None:
        self.backend, self.session = backend, session

    def search(self, query: np.ndarray, **kwargs: Any) -> Any:
        return self.backend.search(self.session, query, **kwargs)


def _backend(db: Database, model: list[str]) -> SearchBackend:
    """The engine's backend, searching the vectors of model `model[0]` (changed in place)."""
    indexes = CurrentModelIndex(
        EpisodeSummary, lambda: model[0], extra_filter=EpisodeSummary.summary != ""
    )
    return search_backend(db.engine.dialect.name, indexes)


def _check(db: Database, backend: SearchBackend, corpus: Corpus, model: str = MODEL) -> int:
    with db.read() as session:
        backend.refresh(session)
        return check(Bound(backend, session), corpus, queries_for(corpus), model)


def test_same_top_k_as_exact_search_through_growth_deletes_and_a_model_change(migrated_db):
    corpus = Corpus(migrated_db, seed=4)
    corpus.add(900)
    corpus.add(300, model=OTHER)
    model = [MODEL]
    backend = _backend(migrated_db, model)
    assert _check(migrated_db, backend, corpus) > 100

    corpus.add(200)  # written after the first search
    assert _check(migrated_db, backend, corpus) > 100

    # Delete the best rows of every query, as retention or a forget would: never returned
    # again, and the rows behind them move up.
    gone: set[int] = set()
    for query in queries_for(corpus):
        gone.update(corpus.brute_force(query, limit=4, threshold=0.2)[0])
    corpus.delete(sorted(gone))
    backend.forget(sorted(gone))
    assert _check(migrated_db, backend, corpus) > 100

    # The embedder changes: only the new model's vectors are searched, deletes included.
    model[0] = OTHER
    assert backend.model_id == OTHER
    assert _check(migrated_db, backend, corpus, model=OTHER) > 100
    best = corpus.brute_force(queries_for(corpus)[0], limit=3, model=OTHER)[0]
    corpus.delete(best)
    backend.forget(best)
    assert _check(migrated_db, backend, corpus, model=OTHER) > 100


def test_newest_and_cosines_answer_as_the_rows_do(migrated_db):
    corpus = Corpus(migrated_db, seed=5)
    corpus.add(400)
    corpus.add(50, model=OTHER)
    backend = _backend(migrated_db, [MODEL])
    query = queries_for(corpus)[0]
    corpus.delete([400, 399])
    backend.forget([400, 399])
    min_created = NOW_S - 30 * SECONDS_PER_DAY
    with migrated_db.read() as session:
        backend.refresh(session)
        newest = backend.newest(session, query, limit=10, min_created=min_created)
        live = [i for i in sorted(corpus.vectors, reverse=True) if corpus.model[i] == MODEL]
        young = [i for i in live if epoch_seconds(corpus.created[i]) >= min_created]
        assert [int(i) for i in newest.ids] == young[:10]
        np.testing.assert_allclose(
            newest.cosine, [corpus.vectors[i] @ query for i in young[:10]], atol=1e-5
        )
        # another model's rows and deleted ones are not seen; the rest exactly
        asked = [1, 2, 3, 399, 420]
        seen = backend.cosines(session, asked, query)
        assert sorted(seen) == [1, 2, 3]
        for i, cosine in seen.items():
            assert cosine == pytest.approx(float(corpus.vectors[i] @ query), abs=1e-5)
    # written after the refresh: read from their rows (a tenth have only the JSON record)
    added = corpus.add(20)
    with migrated_db.read() as session:
        stored = backend.stored_cosines(session, added, query)
    assert sorted(stored) == added
    for i, cosine in stored.items():
        assert cosine == pytest.approx(float(corpus.vectors[i] @ query), abs=1e-5)


def test_a_query_of_the_wrong_dimension_is_a_clear_error(migrated_db):
    backend = _backend(migrated_db, [MODEL])
    with migrated_db.read() as session:
        backend.refresh(session)
        assert backend.search(session, np.ones(DIM, dtype=np.float32), limit=3).ids.size == 0
    Corpus(migrated_db).add(10)
    with migrated_db.read() as session, pytest.raises(ValueError, match="dims"):
        backend.refresh(session)
        backend.search(session, np.ones(DIM + 1, dtype=np.float32), limit=3)
