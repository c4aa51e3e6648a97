"""The search backend: the one seam between recall and the engine it runs on.

Recall (memory/recall/hybrid.py) asks two kinds of question of the stored episodes — which
vectors are nearest a message, and which texts hold its words — and fuses, ranks and excerpts
the answers itself. A `SearchBackend` answers both kinds, for one database engine; the fusion,
ranking, excerpt and date code never asks which engine it runs on. It is chosen once, by
engine (`search_backend`, called by `Services`):

- SQLite (`memory/engine/sqlite.py`): FTS5 full text + the in-process vector index
  (memory/engine/vectors.py) — the fast embedded default;
- PostgreSQL (`memory/engine/pgvector.py`): `tsvector` full text + the vectors searched in
  PostgreSQL itself (pgvector's HNSW, nothing held per process) once they are migrated, the
  in-process index until then, or for good where pgvector cannot be used
  (`memory.episodes_recall.vector_search`: "auto", the default; "pgvector" insists;
  "in_process" keeps today's index, `memory/engine/postgres.py`).

This module is the only door to the engines: nothing outside memory/engine/ (and db/, which
sets the engine up and migrates it) asks which engine it runs on. Code that writes or removes
the windows' words is handed the backend (`memory/engine/window_keywords.py`).

Score rules (every backend, so the fusion can compare numbers across engines):
- a vector score is the cosine of the stored vector with the query, in [-1, 1], higher =
  better — exact, as `vector @ query` over unit vectors, to float32 rounding: an approximate
  backend may miss a row, never misreport one;
- a full-text score is > 0, higher = better, and compares within one query only (BM25's scale
  depends on the corpus); it depends on the episode and the words only, not on the filters
  (keywords.keyword_relevance turns it into a share of the best match).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Literal, Protocol

import numpy as np
from sqlalchemy.orm import Session

from caesar.db.engine import Database
from caesar.memory.engine.in_process import IndexSource
from caesar.memory.engine.pgvector import PgvectorSearch
from caesar.memory.engine.pgvector_migration import Progress, VectorStatus
from caesar.memory.engine.postgres import PostgresSearch
from caesar.memory.engine.sqlite import SqliteSearch
from caesar.memory.engine.vector_math import Hits
from caesar.memory.engine.vectors import Rank
from caesar.memory.scope import Scope


class VectorSearch(Protocol):
    """Nearest episodes to a query vector, among those of one embedding model (`model_id`)
    with a non-empty summary. Every `cosine` follows the module's score rule."""

    @property
    def model_id(self) -> str: ...

    @property
    def max_recall_count(self) -> float:
        """The largest recall count of any episode searched (bounds what `rank` can give)."""
        ...

    def refresh(self, scope: Scope) -> None:
        """See `person`'s episodes committed since their last search (a no-op where the
        database itself is searched)."""
        ...

    def warm(self, db: Database) -> int:
        """Make the first search fast — load what this process holds, or build the current
        model's index where the database searches — and return how many episodes it
        searches."""
        ...

    def forget(self, ids: Sequence[int]) -> None:
        """Never return these deleted episodes again: drop them from any copy this process
        holds (a no-op where the database itself is searched)."""
        ...

    def migrate(self, db: Database, progress: Progress | None = None) -> VectorStatus | None:
        """Bring the database's own vector search up to date (pgvector: copy the vectors
        written before it, build the model's index), batched and resumable, while searches
        go on; None where there is nothing of the kind."""
        ...

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
        """`person`'s episodes (no one else's is scored: the person is a filter of the scan, not
        of its top k) with cosine ≥ threshold created ≥ min_created (epoch seconds), ordered by
        `rank(cosine, created, recall_count)` (default: the cosine), best `limit` first.
        `rank` is cosine × a factor within `factor_range` (both bounds ≥ 0): a backend that
        cannot run it where the vectors are over-fetches by the cosine and re-ranks."""
        ...

    def newest(
        self,
        scope: Scope,
        query: np.ndarray,
        *,
        limit: int,
        min_created: float | None = None,
    ) -> Hits:
        """`person`'s `limit` newest episodes (highest ids) created ≥ min_created, with their
        cosine to the query; newest first."""
        ...

    def cosines(self, scope: Scope, ids: Sequence[int], query: np.ndarray) -> dict[int, float]:
        """The cosine of each of `ids` that `search` can see for `person`; the others
        (another person's among them) are absent."""
        ...

    def stored_cosines(
        self, scope: Scope, ids: Sequence[int], query: np.ndarray
    ) -> dict[int, float]:
        """The cosine of each of `ids` (those that are `person`'s) read from its row, for one
        `search` cannot see yet (committed since the refresh): 0 for a vector of another
        size."""
        ...


class FullTextSearch(Protocol):
    """The episodes' words (summary and conversation) and their 3-turn windows' words, in the
    database's own full-text index, kept in step with the rows (triggers; windows by their
    writer). Every score follows the module's score rule. `terms` are query words
    (keywords.query_terms), matched by the index's own tokenizer and stemmer. Every question
    is one person's (`person`): another person's episode is never counted, scored or
    returned."""

    def keyword_scores(
        self,
        scope: Scope,
        terms: Sequence[str],
        *,
        limit: int,
        model_id: str | None = None,
        ids: Sequence[int] | None = None,
        min_created: datetime | None = None,
        min_id: int | None = None,
        every: bool = False,
    ) -> dict[int, float]:
        """Best `limit` episodes holding any of `terms` (every one if `every`), of `model_id`
        unless None, created ≥ min_created, id ≥ min_id, among `ids` (sorted, non-empty) if
        given: {episode_id: score}. With neither model_id nor min_created the index is read
        alone, without the episode rows."""
        ...

    def term_counts(self, scope: Scope, terms: Sequence[str]) -> tuple[int, list[int]]:
        """(indexed episodes, [episodes holding each term]), of `person`'s."""
        ...

    def probe_contains(self, scope: Scope, terms: Sequence[str], probe_id: int) -> list[bool]:
        """Whether episode `probe_id` holds each term (all False if it is not `person`'s)."""
        ...

    def count_holding_all(self, scope: Scope, terms: Sequence[str]) -> int:
        """`person`'s indexed episodes holding every term (no scoring)."""
        ...

    def indexed_id_range(self, scope: Scope) -> tuple[int, int]:
        """(smallest, largest) of `person`'s indexed episode ids; (0, 0) when none is."""
        ...

    def window_scores(
        self, scope: Scope, terms: Sequence[str], ids: Sequence[int]
    ) -> dict[int, dict[int, float]]:
        """{episode_id: {window number: score}} for the windows of episodes `ids` (sorted,
        non-empty; those not `person`'s are left out) holding any of `terms`."""
        ...

    def has_windows(self, session: Session, episode_id: int) -> bool: ...

    def add_windows(self, session: Session, episode_id: int, windows: Sequence[str]) -> int:
        """Index the episode's window texts (it has none indexed); returns rows written."""
        ...

    def forget_windows(self, session: Session, episode_ids: Sequence[int]) -> int:
        """Remove the windows' words of episodes about to be deleted, in the caller's
        transaction; returns rows removed (0 where they go with their episode's row)."""
        ...


class SearchBackend(VectorSearch, FullTextSearch, Protocol):
    """Both halves, for one engine: what hybrid recall reads."""


VectorStore = Literal["auto", "in_process", "pgvector"]
Dimension = Callable[[], int] | None
_BACKENDS: dict[tuple[str, VectorStore], Callable[[IndexSource, Dimension], SearchBackend]] = {
    ("sqlite", "auto"): lambda indexes, _dim: SqliteSearch(indexes),
    ("sqlite", "in_process"): lambda indexes, _dim: SqliteSearch(indexes),
    ("postgresql", "in_process"): lambda indexes, _dim: PostgresSearch(indexes),
    ("postgresql", "auto"): lambda indexes, dim: PgvectorSearch(indexes, dimension=dim),
    ("postgresql", "pgvector"): lambda indexes, dim: PgvectorSearch(
        indexes, dimension=dim, required=True
    ),
}


def search_backend(
    engine: str,
    indexes: IndexSource,
    vectors: VectorStore = "auto",
    dimension: Dimension = None,
) -> SearchBackend:
    """The backend of database engine `engine` (SQLAlchemy's dialect name) whose vectors are
    searched where `vectors` says: in this process (`indexes.get()`, the current embedding
    model's index) or in the database (`indexes.current_model()`'s rows); "auto" is the
    database where it can (PostgreSQL with pgvector). `dimension`: the embedder's, for an
    index built before the model has vectors."""
    try:
        return _BACKENDS[engine, vectors](indexes, dimension)
    except KeyError:
        raise ValueError(f"no search backend for {vectors} vectors on {engine!r}") from None


def backend_for(
    db: Database,
    indexes: IndexSource,
    vectors: VectorStore = "auto",
    dimension: Dimension = None,
) -> SearchBackend:
    """`search_backend` of `db`'s engine: the one place it is read."""
    return search_backend(db.engine.dialect.name, indexes, vectors, dimension)
