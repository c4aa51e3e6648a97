"""PostgreSQL searching its own vectors (pgvector): nothing is held in this process.

Each episode's embedding is copied into `episode_vectors` by a trigger, in the transaction
that writes the row, and goes with it (migration 0007): there is nothing to poll, and a forget
is gone for every process at once. The column has no dimension, so one table serves every
embedding model; each model gets its own HNSW index over `embedding::vector(<dimension>)`,
restricted to its rows (`ensure_index`), and a search orders by that same expression, so the
planner can use the model's index — or, before it is built, scan the model's rows exactly.

A search asks for the best rows by cosine, filtered in SQL (model, age), with pgvector's
iterative index scans on (>= 0.8), so a filter that rejects many of the index's nearest rows
still yields k. Ranking callbacks that cannot run in SQL (`rank`, ADR-0034's decay × recall
weight) become over-fetch and re-rank: rows are fetched by cosine, best first, in growing
batches, until no row left unfetched could pass the threshold or outrank the k-th kept
(its score is at most its cosine × the largest factor, `factor_range`) — exact over what the
scan returns.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from caesar.db.engine import Database
from caesar.errors import ConfigError
from caesar.memory.search.in_process import row_cosines
from caesar.memory.search.postgres import PostgresFullText
from caesar.memory.search.vector_math import Hits, epoch_seconds_v, top_indices, unseen_bound
from caesar.memory.search.vectors import Rank

# Not SQLAlchemy models (migration 0007): the schema-vs-models comparison skips them.
VECTOR_TABLES = ("episode_vectors",)
MISSING = (
    'memory.episodes_recall.vector_search = "pgvector", but this database has no '
    "episode_vectors table: pgvector could not be created when it was migrated. Unset "
    "vector_search, or see docs/configuration.md (PostgreSQL) for CREATE EXTENSION vector."
)
# A search with a rank fetches at least this many rows, or twice the limit, at first.
FIRST_BATCH = 32
# hnsw.ef_search: the candidate list of one index scan (pgvector's default is 40); iterative
# scans go on past it until the filters have let k rows through.
EF_SEARCH = 100


def _literal(value: str) -> str:
    """A string as an SQL literal: a partial index's predicate must appear verbatim in the
    query for the planner to use it, so the model is written into the statement."""
    return "'" + value.replace("'", "''") + "'"


def _vector(query: np.ndarray) -> str:
    """The query in pgvector's text form (float32 values, each written exactly)."""
    return "[" + ",".join(repr(float(x)) for x in np.asarray(query, dtype=np.float32)) + "]"


def index_name(model: str, dim: int) -> str:
    """The HNSW index of `model`'s vectors of `dim` dimensions. Pure."""
    return f"idx_episode_vectors_hnsw_{hashlib.sha1(model.encode()).hexdigest()[:12]}_{dim}"


class PgvectorVectors:
    """`VectorSearch` (memory/search/backend.py) in PostgreSQL, for the model `model_id()`."""

    def __init__(self, model_id: Callable[[], str]) -> None:
        self._model_id = model_id
        self._max_recalls = 0.0
        # rows fetched / rows asked for, per search with a rank: the over-fetch factor
        self.fetched: list[float] = []

    @property
    def model_id(self) -> str:
        return self._model_id()

    @property
    def max_recall_count(self) -> float:
        return self._max_recalls

    def refresh(self, session: Session) -> None:
        """Nothing to load; reads the largest recall count (the bound `factor_range` needs).
        That reads the count of every episode of the model: O(episodes), not measured at
        scale; an index on (model, recall_count) would make it one probe."""
        sql = "SELECT coalesce(max(recall_count), 0) FROM episode_summaries WHERE model = :m"
        self._max_recalls = float(session.execute(text(sql), {"m": self.model_id}).scalar() or 0)

    def forget(self, ids: Sequence[int]) -> None:
        """Nothing held here: a deleted row's vector went with it."""

    def warm(self, db: Database) -> int:
        """Builds the current model's index; refuses a database without `episode_vectors`
        (pgvector was missing when it was migrated) with the fix."""
        with db.read() as session:
            if session.execute(text("SELECT to_regclass('episode_vectors')")).scalar() is None:
                raise ConfigError(MISSING)
        with db.write() as session:
            ensure_index(session, self.model_id)
        with db.read() as session:
            sql = "SELECT count(*) FROM episode_vectors WHERE model = :m"
            return int(session.execute(text(sql), {"m": self.model_id}).scalar() or 0)

    def _rows(
        self,
        session: Session,
        query: np.ndarray,
        *,
        order: str,
        limit: int,
        min_created: float | None = None,
        ids: Sequence[int] | None = None,
    ) -> Hits:
        """(id, cosine, created, recall count) of the model's rows of the query's dimension,
        by `order` ("distance": nearest first; "newest": highest id first)."""
        dim = int(np.asarray(query).shape[-1])
        distance = f"v.embedding::vector({dim}) <=> CAST(:q AS vector({dim}))"
        # (no dimension filter: the planner would misjudge how many rows pass and skip the
        # index; a model's vectors all have its dimension, `_check_dimension` compares)
        where = [f"v.model = {_literal(self.model_id)}"]
        params: dict[str, object] = {"q": _vector(query), "limit": limit}
        if min_created is not None:
            where.append("v.created_at >= to_timestamp(:min_created) AT TIME ZONE 'UTC'")
            params["min_created"] = min_created
        if ids is not None:
            where.append("v.episode_id = ANY(:ids)")
            params["ids"] = [int(i) for i in ids]
        by = f"{distance}, v.episode_id DESC" if order == "distance" else "v.episode_id DESC"
        if order == "distance":
            session.execute(text("SET LOCAL hnsw.iterative_scan = strict_order"))
            session.execute(text(f"SET LOCAL hnsw.ef_search = {EF_SEARCH}"))
        # The nearest rows first (the index's work), then their recall counts by primary key.
        sql = f"""
            WITH found AS MATERIALIZED (
                SELECT v.episode_id, 1 - ({distance}) AS cosine, v.created_at
                FROM episode_vectors AS v WHERE {" AND ".join(where)}
                ORDER BY {by} LIMIT :limit)
            SELECT f.episode_id, f.cosine, f.created_at, e.recall_count
            FROM found AS f JOIN episode_summaries AS e ON e.id = f.episode_id
            ORDER BY {"f.cosine DESC, f.episode_id DESC" if order == "distance" else "f.episode_id DESC"}"""
        rows = session.execute(text(sql), params).all()
        if not rows:
            return Hits.empty()
        return Hits(
            np.array([r[0] for r in rows], dtype=np.int64),
            np.array([r[1] for r in rows], dtype=np.float64),
            epoch_seconds_v([r[2] for r in rows]),
            np.array([r[3] for r in rows], dtype=np.float64),
        )

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
        _check_dimension(session, self.model_id, query)
        if limit <= 0:
            return Hits.empty()
        if rank is None:
            factor_range = (1.0, 1.0)
        asked = limit + 1 if rank is None else max(2 * limit, FIRST_BATCH)
        while True:
            found = self._rows(
                session, query, order="distance", limit=asked, min_created=min_created
            )
            keep = np.ones(found.ids.size, dtype=bool)
            if threshold is not None:
                keep &= found.cosine >= threshold
            ids, cosine = found.ids[keep], found.cosine[keep]
            created, recalls = found.created[keep], found.recall_count[keep]
            keys = rank(cosine, created, recalls) if rank is not None else cosine
            top = top_indices(keys, ids, limit)
            done = found.ids.size < asked  # every row of the model was fetched
            if not done and found.ids.size:
                last = float(found.cosine[-1])  # no unfetched row has a higher cosine
                if threshold is not None and last < threshold:
                    done = True
                elif top.size >= limit and unseen_bound(last, factor_range) < keys[top][-1]:
                    done = True
            if done:
                if rank is not None:
                    self.fetched.append(found.ids.size / limit)
                return Hits(ids[top], cosine[top], created[top], recalls[top])
            asked *= 4

    def newest(
        self, session: Session, query: np.ndarray, *, limit: int, min_created: float | None = None
    ) -> Hits:
        if limit <= 0:
            return Hits.empty()
        return self._rows(session, query, order="newest", limit=limit, min_created=min_created)

    def cosines(self, session: Session, ids: Sequence[int], query: np.ndarray) -> dict[int, float]:
        if not ids:
            return {}
        found = self._rows(session, query, order="newest", limit=len(ids), ids=ids)
        return {int(i): float(c) for i, c in zip(found.ids, found.cosine, strict=True)}

    def stored_cosines(
        self, session: Session, ids: Sequence[int], query: np.ndarray
    ) -> dict[int, float]:
        return row_cosines(session, ids, query)


class PgvectorSearch(PgvectorVectors, PostgresFullText):
    """PostgreSQL's `SearchBackend` with pgvector: tsvector and vectors, both in the database."""


def _check_dimension(session: Session, model: str, query: np.ndarray) -> None:
    """A query of another dimension than the model's rows is the caller's error (as the
    in-process index raises it), not an empty answer."""
    sql = "SELECT vector_dims(embedding) FROM episode_vectors WHERE model = :m LIMIT 1"
    dim = session.execute(text(sql), {"m": model}).scalar()
    if dim is not None and dim != int(np.asarray(query).shape[-1]):
        raise ValueError(f"query has {np.asarray(query).shape[-1]} dims, index has {dim}")


def ensure_index(session: Session, model: str) -> bool:
    """Build `model`'s HNSW index (cosine distance, over its rows' dimension) unless it has
    one; False when the model has no rows yet (its dimension is unknown). Builds inside the
    caller's transaction: writes to the table wait for it. The table is analysed after, so
    the planner knows how many rows the index spares it reading."""
    sql = "SELECT vector_dims(embedding) FROM episode_vectors WHERE model = :m LIMIT 1"
    dim = session.execute(text(sql), {"m": model}).scalar()
    if dim is None:
        return False
    session.execute(
        text(
            f"CREATE INDEX IF NOT EXISTS {index_name(model, int(dim))} ON episode_vectors "
            f"USING hnsw ((embedding::vector({int(dim)})) vector_cosine_ops) "
            f"WHERE model = {_literal(model)}"
        )
    )
    session.execute(text("ANALYZE episode_vectors"))
    return True
