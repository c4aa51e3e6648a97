"""PostgreSQL searching its own vectors (pgvector): nothing is held in this process.

Each episode's embedding is in `episode_vectors` (memory/engine/pgvector_migration.py), written
by a trigger in the transaction that writes the row and gone with it: there is nothing to poll,
and a forget is gone for every process at once. The column has no dimension, so one table
serves every embedding model; each model gets its own HNSW index over
`embedding::vector(<dimension>)`, restricted to its rows of that dimension, and a search names
those rows and orders by that same expression, so the planner can use the model's index.

A search asks for the best rows by cosine, filtered in SQL (model, age), with pgvector's
iterative index scans on (>= 0.8), so a filter that rejects many of the index's nearest rows
still yields k. Ranking callbacks that cannot run in SQL (`rank`, ADR-0034's decay × recall
weight) become over-fetch and re-rank: rows are fetched by cosine, best first, in growing
batches, until no row left unfetched could pass the threshold or outrank the k-th kept
(its score is at most its cosine × the largest factor, `factor_range`) — exact over what the
scan returns.

`PgvectorSearch`, PostgreSQL's backend, searches there once the vectors are migrated and the
model's index is built (`pgvector_migration.status(...).ready`), and its in-process index
until then: an install upgraded with many episodes keeps chatting, and recalling, while they
are copied and indexed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from caesar.db.engine import Database
from caesar.errors import ConfigError
from caesar.memory.engine import pgvector_migration as migration
from caesar.memory.engine.in_process import IndexSource, InProcessVectors, row_cosines
from caesar.memory.engine.pgvector_migration import Progress, VectorStatus, index_predicate
from caesar.memory.engine.postgres import PostgresFullText
from caesar.memory.engine.vector_math import Hits, epoch_seconds_v, top_indices, unseen_bound
from caesar.memory.engine.vectors import Rank
from caesar.memory.scope import Scope

log = logging.getLogger("caesar.vectors")
# A search with a rank fetches at least this many rows, or twice the limit, at first.
FIRST_BATCH = 32
# hnsw.ef_search: the candidate list of one index scan (pgvector's default is 40); iterative
# scans go on past it until the filters have let k rows through. bench_pgvector at dda303d at 100k
# (synthetic clusters), top-5 overlap with exact / p50: 40 → 0.812 / 12.7 ms, 100 → 0.932 /
# 16.4 ms, 200 → 0.974 / 19.5 ms, 400 → 0.975 / 22.5 ms (the graph's own limit, m 16 and
# ef_construction 64).
EF_SEARCH = 200
# While the vectors are not ready, how often a process asks the database whether they are
# (another process may be migrating them).
RECHECK_SECONDS = 5.0
# Once PostgreSQL searches, how long the in-process index is kept for searches begun on it.
RELEASE_AFTER_SECONDS = 30.0


def _vector(query: np.ndarray) -> str:
    """The query in pgvector's text form (float32 values, each written exactly)."""
    return "[" + ",".join(repr(float(x)) for x in np.asarray(query, dtype=np.float32)) + "]"


class PgvectorVectors:
    """`VectorSearch` (memory/engine/backend.py) in PostgreSQL, for the model `model_id()`:
    its rows of the dimension most of them have (a row of another size is not searched, as
    the in-process index skips it)."""

    def __init__(self, model_id: Callable[[], str]) -> None:
        self._model_id = model_id
        self._max_recalls = 0.0
        self._dims: dict[str, int] = {}  # per model, once it has vectors
        # rows fetched / rows asked for, per search with a rank: the over-fetch factor
        self.fetched: list[float] = []

    @property
    def model_id(self) -> str:
        return self._model_id()

    @property
    def max_recall_count(self) -> float:
        return self._max_recalls

    def refresh(self, scope: Scope) -> None:
        """Nothing to load; reads the largest recall count (the bound `factor_range` needs):
        one probe of the (model, recall_count) index (pgvector_migration.RECALLS_INDEX)."""
        session = scope.session
        sql = "SELECT coalesce(max(recall_count), 0) FROM episode_summaries WHERE model = :m"
        self._max_recalls = float(session.execute(text(sql), {"m": self.model_id}).scalar() or 0)

    def forget(self, ids: Sequence[int]) -> None:
        """Nothing held here: a deleted row's vector went with it."""

    def warm(self, db: Database) -> int:
        """Nothing to load: how many episodes of the model are searched."""
        with db.read() as session:
            sql = "SELECT count(*) FROM episode_vectors WHERE model = :m"
            return int(session.execute(text(sql), {"m": self.model_id}).scalar() or 0)

    def migrate(self, db: Database, progress: Progress | None = None) -> VectorStatus | None:
        """Nothing: the index is built by `PgvectorSearch.migrate`."""
        return None

    def dims(self, session: Session) -> int | None:
        """The model's dimension: its index's, or most of its vectors'; None before any."""
        model = self.model_id
        if model not in self._dims:
            found = migration.model_dims(session, model)
            if found is None:
                return None
            self._dims[model] = found
        return self._dims[model]

    def know_dims(self, model: str, dims: int) -> None:
        self._dims[model] = dims

    def _rows(
        self,
        scope: Scope,
        query: np.ndarray,
        *,
        order: str,
        limit: int,
        min_created: float | None = None,
        ids: Sequence[int] | None = None,
    ) -> Hits:
        """(id, cosine, created, recall count) of `person`'s rows of the model and the query's
        dimension, by `order` ("distance": nearest first; "newest": highest id first). The
        person is a filter of the index scan: iterative scans go on until k of theirs."""
        session, person = scope.session, scope.person
        dim = self._query_dims(session, query)
        if dim is None:
            return Hits.empty()
        distance = f"v.embedding::vector({dim}) <=> CAST(:q AS vector({dim}))"
        # the person written into the statement, as the model is: the planner takes the
        # person's own partial index (person_tables.py) only for a predicate it can see
        where = [index_predicate(self.model_id, dim, "v."), f"v.person_id = {int(person)}"]
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
        scope: Scope,
        query: np.ndarray,
        *,
        limit: int,
        threshold: float | None = None,
        min_created: float | None = None,
        rank: Rank | None = None,
        factor_range: tuple[float, float] = (1.0, 1.0),
    ) -> Hits:
        session = scope.session
        if limit <= 0 or self._query_dims(session, query) is None:
            return Hits.empty()
        if rank is None:
            factor_range = (1.0, 1.0)
        asked = limit + 1 if rank is None else max(2 * limit, FIRST_BATCH)
        while True:
            found = self._rows(
                scope,
                query,
                order="distance",
                limit=asked,
                min_created=min_created,
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
        self,
        scope: Scope,
        query: np.ndarray,
        *,
        limit: int,
        min_created: float | None = None,
    ) -> Hits:
        if limit <= 0:
            return Hits.empty()
        return self._rows(scope, query, order="newest", limit=limit, min_created=min_created)

    def cosines(self, scope: Scope, ids: Sequence[int], query: np.ndarray) -> dict[int, float]:
        if not ids:
            return {}
        found = self._rows(scope, query, order="newest", limit=len(ids), ids=ids)
        return {int(i): float(c) for i, c in zip(found.ids, found.cosine, strict=True)}

    def stored_cosines(
        self, scope: Scope, ids: Sequence[int], query: np.ndarray
    ) -> dict[int, float]:
        return row_cosines(scope, ids, query)

    def _query_dims(self, session: Session, query: np.ndarray) -> int | None:
        """The model's dimension (None: it has no vectors yet). A query of another dimension
        is the caller's error (as the in-process index raises it), not an empty answer."""
        dims, asked = self.dims(session), int(np.asarray(query).shape[-1])
        if dims is not None and dims != asked:
            raise ValueError(f"query has {asked} dims, index has {dims}")
        return dims


class PgvectorSearch(PostgresFullText):
    """PostgreSQL's `SearchBackend`: tsvector, and the vectors in PostgreSQL once they are
    ready for the current model (see the module doc) — its in-process index until then.

    `required` (vector_search = "pgvector"): a database where pgvector cannot be used is a
    start-up error naming the fix; otherwise ("auto") a warning naming it, and the in-process
    index for good. `dimension` gives the model's dimension for an index built before it has
    any vectors (a fresh install)."""

    def __init__(
        self,
        indexes: IndexSource,
        *,
        dimension: Callable[[], int] | None = None,
        required: bool = False,
    ) -> None:
        self.database = PgvectorVectors(indexes.current_model)
        self.in_process = InProcessVectors(indexes)
        self._indexes = indexes
        self._dimension = dimension
        self._required = required
        self._ready_model: str | None = None
        self._next_check = 0.0
        self._release_at: float | None = None
        self._lock = threading.Lock()

    # -- which one searches ---------------------------------------------------------------
    def _vectors(self) -> PgvectorVectors | InProcessVectors:
        ready = self._ready_model == self._indexes.current_model()
        return self.database if ready else self.in_process

    def searches_database(self, session: Session) -> bool:
        """Whether the vectors are searched in PostgreSQL now; asks the database (at most
        every RECHECK_SECONDS) while they are not."""
        model = self._indexes.current_model()
        if self._ready_model == model:
            return True
        with self._lock:
            if time.monotonic() < self._next_check:
                return False
            self._next_check = time.monotonic() + RECHECK_SECONDS
        self._use(model, migration.status(session, model))
        return self._ready_model == model

    def _use(self, model: str, status: VectorStatus) -> None:
        if not status.ready or self._ready_model == model:
            return
        self.database.know_dims(model, int(status.dims or 0))
        self._ready_model = model
        # What this process held is searched in PostgreSQL now: let go of it once the
        # searches begun on it have ended (a search reads the index in several calls).
        self._release_at = time.monotonic() + RELEASE_AFTER_SECONDS
        log.info("episode search: %s, nothing held in this process", status.describe())

    # -- VectorSearch -----------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        return self._indexes.current_model()

    @property
    def max_recall_count(self) -> float:
        return self._vectors().max_recall_count

    def refresh(self, scope: Scope) -> None:
        session = scope.session
        if self.searches_database(session):
            release = self._release_at
            if release is not None and time.monotonic() >= release:
                self._release_at = None
                self._indexes.release()
        self._vectors().refresh(scope)

    def warm(self, db: Database) -> int:
        """Ready now, or the in-process index loaded; says which, and why."""
        model = self._indexes.current_model()
        with db.read() as session:
            status = migration.status(session, model)
        self._use(model, status)
        if status.ready:
            return self.database.warm(db)
        if not status.usable:
            if self._required:
                raise ConfigError(
                    f'memory.episodes_recall.vector_search = "pgvector", but {status.problem}'
                )
            log.warning("episode search: in-process: %s", status.problem)
        else:
            log.info(
                "episode search: in-process until the vectors are migrated (%s)",
                status.describe(),
            )
        return self.in_process.warm(db)

    def migrate(self, db: Database, progress: Progress | None = None) -> VectorStatus:
        """Copy the vectors and build the model's index (pgvector_migration.migrate), then
        search them in PostgreSQL. Returns at once if another process is migrating."""
        model = self._indexes.current_model()
        status = migration.migrate(db, model, dimension=self._dimension, progress=progress)
        self._use(model, status)
        return status

    def forget(self, ids: Sequence[int]) -> None:
        self.in_process.forget(ids)

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
        return self._vectors().search(
            scope,
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
        return self._vectors().newest(scope, query, limit=limit, min_created=min_created)

    def cosines(self, scope: Scope, ids: Sequence[int], query: np.ndarray) -> dict[int, float]:
        return self._vectors().cosines(scope, ids, query)

    def stored_cosines(
        self, scope: Scope, ids: Sequence[int], query: np.ndarray
    ) -> dict[int, float]:
        return row_cosines(scope, ids, query)
