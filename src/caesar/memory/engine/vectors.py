"""An in-process float32 matrix of one table's embeddings: top-K by cosine, with filters.

The ADR keeps embeddings as JSON and scores them in Python; at 100k episodes that is seconds a
turn. Here the vectors of the current embedder model are loaded once (from the compact float32
copy) into one contiguous matrix and refreshed incrementally by id on every search.

A search has two stages:
1. Candidates. Rows are appended in id order and `created_at` mostly grows with the id, so the
   age filter first cuts the matrix to the slice that can hold young-enough rows (a binary
   search over the running maximum of `created`). Sealed blocks of that slice are scanned as
   8-bit codes (memory/engine/quantized.py) for their best approximate scores, with a bound on what
   they left out; the newest, unsealed rows are scanned exactly. From IVF_MIN_ROWS rows on,
   an IVF (memory/engine/ann.py) proposes the candidates among the rows it covers instead — the one
   approximate step: a relevant row in a cluster it did not scan is missed.
2. Exact ranking. Every candidate's cosine is recomputed from the float32 matrix, the
   threshold (on raw cosine) and the age filter are applied, and `rank` orders the rest. A
   source is asked for more candidates while a row it left out could still pass the threshold
   and outrank the K-th result — which can be bounded because `rank` is `cosine × factor`
   with the factor within `factor_range`. Below IVF_MIN_ROWS the result is exactly brute
   force's.

Rows deleted elsewhere are dropped by `forget` (or when a search finds them missing) and
masked in both stages; their memory is reclaimed at the next start.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from sqlalchemy import String, and_, bindparam, func, select, type_coerce
from sqlalchemy.orm import Session

from caesar.memory.engine import ann, quantized
from caesar.memory.engine.vector_math import (  # noqa: F401 - to_f32_bytes, from_row: re-exported
    EPOCH,
    Hits,
    all_of,
    epoch_seconds,
    epoch_seconds_v,
    from_row,
    to_f32_bytes,
    top_indices,
    unseen_bound,
    window_start,
)

log = logging.getLogger(__name__)

# Windows of at least this many sealed rows go through the IVF stage (approximate); shorter ones
# are scanned in full (8-bit codes + exact re-scoring: exact, ~1 ms per 50k rows when quiet).
IVF_MIN_ROWS = 50_000
# A new IVF is built once the rows it does not cover reach this factor - 1 of the rows it holds.
RETRAIN_GROWTH = 1.25

# rank(cosine, created_epoch_seconds, recall_count) -> sort keys, larger is better.
Rank = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
# fetch(k) -> (positions, approximate scores best first, whether nothing was left out)
Fetch = Callable[[int], tuple[np.ndarray, np.ndarray, bool]]


@dataclass
class _Snapshot:
    """What one search reads. Growth replaces arrays, so these stay valid for `n` rows."""

    n: int
    vectors: np.ndarray
    ids: np.ndarray
    created: np.ndarray
    cummax: np.ndarray
    recalls: np.ndarray
    alive: np.ndarray
    blocks: tuple[quantized.Block, ...]
    sealed: int  # rows [0, sealed) are in blocks
    ivf: ann.IvfIndex | None


class VectorIndex:
    """`model_cls` must have id, embedding, embedding_f32, model, created_at; `extra_filter`
    narrows which rows are searchable (e.g. non-empty summaries). `quantize=False` skips the
    8-bit first pass (every search scans the float32 matrix; same results, slower)."""

    _GROW = 1.5

    def __init__(
        self,
        model_cls: Any,
        model_id: str,
        extra_filter: Any = None,
        *,
        quantize: bool = True,
        seal_rows: int = quantized.SEAL_ROWS,
        ivf_min_rows: int | None = IVF_MIN_ROWS,
        background: bool = True,
    ) -> None:
        self.model_cls = model_cls
        self.model_id = model_id
        self.extra_filter = extra_filter
        self.seal_rows = seal_rows
        if quantize and not quantized.available():
            log.warning("faiss is not installed: %s searches scan float32 only", model_id)
        self.quantize = quantize and quantized.available()
        self.ivf_min_rows = ivf_min_rows if self.quantize else None
        self.background = background
        self._lock = threading.Lock()
        self._n = 0
        self._dim = 0
        self._max_id = 0
        self._alive_count = 0
        self._max_recalls = 0.0
        self._vectors = np.zeros((0, 0), dtype=np.float32)
        self._ids = np.zeros(0, dtype=np.int64)
        self._created = np.zeros(0, dtype=np.float64)
        self._cummax = np.zeros(0, dtype=np.float64)
        self._recalls = np.zeros(0, dtype=np.float64)
        self._alive = np.zeros(0, dtype=bool)
        self._has_recalls = hasattr(model_cls, "recall_count")
        self._stmts = self._statements()
        self._blocks: tuple[quantized.Block, ...] = ()
        self._sealed = 0
        self._ivf: ann.IvfIndex | None = None
        self._forgotten_since_ivf = 0
        self._builder: threading.Thread | None = None
        self._maintaining = threading.Lock()
        self._ivf_failed_at: int | None = None

    def __len__(self) -> int:
        return self._alive_count

    @property
    def max_recall_count(self) -> float:
        """An upper bound of every row's recall_count (for `factor_range`)."""
        return self._max_recalls

    @property
    def sealed_rows(self) -> int:
        return self._sealed

    @property
    def ivf_rows(self) -> int:
        """Rows the IVF stage covers (0: every search is exact)."""
        return self._ivf.rows if self._ivf is not None else 0

    # -- loading --------------------------------------------------------------------------------
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

        vectors = self._vectors if self._vectors.size else np.zeros((0, self._dim), np.float32)
        self._vectors = grow(vectors, (capacity, self._dim))
        self._ids = grow(self._ids, (capacity,))
        self._created = grow(self._created, (capacity,))
        self._cummax = grow(self._cummax, (capacity,))
        self._recalls = grow(self._recalls, (capacity,))
        self._alive = grow(self._alive, (capacity,))

    def _statements(self) -> tuple[Any, Any]:
        """(count, rows) after a given id, built once: a search refreshes every time, and
        building a select costs more than running this one when nothing is new."""
        m = self.model_cls
        # created_at as stored: SQLite's ISO text is parsed by numpy in one call.
        columns = [m.id, m.embedding_f32, type_coerce(m.created_at, String)]
        if self._has_recalls:
            columns.append(m.recall_count)
        where = [m.model == bindparam("model"), m.id > bindparam("after")]
        if self.extra_filter is not None:
            where.append(self.extra_filter)
        count = select(func.count()).select_from(m.__table__).where(*where)
        rows = select(*columns).where(*where).order_by(m.id).limit(bindparam("chunk"))
        return count, rows

    def refresh(self, session: Session, chunk: int = 50_000) -> int:
        """Load rows newer than the newest loaded; returns how many were added."""
        count, select_rows = self._stmts
        added = 0
        # Take a pooled connection BEFORE the lock: a chat turn holds SQLite's write lock while
        # it waits for this lock (record_recalls), and with the pool drained by writers queued
        # on that write lock, waiting for a connection under this lock would deadlock them all
        # until the 30 s busy timeout.
        session.connection()
        with self._lock:
            # First load: size the matrix once rather than growing (and copying) it as it fills.
            expected = 0
            if self._n == 0:
                expected = session.scalar(count, {"model": self.model_id, "after": 0}) or 0
            while True:
                after = {"model": self.model_id, "after": self._max_id, "chunk": chunk}
                # Core rows, not ORM results: nothing here is an entity.
                rows = session.connection().execute(select_rows, after).all()
                if not rows:
                    break
                added += self._append(session, rows, int(expected))
                self._max_id = int(rows[-1][0])
                if len(rows) < chunk:
                    break
            due = self._seal_due() or self._ivf_due()
        if due:
            self._maintain()
        return added

    def _append(self, session: Session, rows: Sequence[Any], expected: int = 0) -> int:
        m = self.model_cls
        blobs = [r[1] for r in rows]
        missing = [int(r[0]) for r, b in zip(rows, blobs, strict=True) if not b]
        if missing:  # no float32 copy (older rows): the JSON record is the source
            fallback: dict[int, list[float]] = dict(
                session.execute(select(m.id, m.embedding).where(m.id.in_(missing))).all()
            )
            blobs = [
                b or to_f32_bytes(np.asarray(fallback.get(int(r[0])) or [], np.float32))
                for r, b in zip(rows, blobs, strict=True)
            ]
        dim = self._dim or len(blobs[0]) // 4
        good = [i for i, b in enumerate(blobs) if len(b) == dim * 4]
        if len(good) < len(rows):
            log.warning(
                "%s: skipped %d rows whose %s embedding is not %d-dimensional",
                m.__tablename__,
                len(rows) - len(good),
                self.model_id,
                dim,
            )
            rows = [rows[i] for i in good]
            blobs = [blobs[i] for i in good]
        if not rows or dim == 0:
            return 0
        count = len(rows)
        self._reserve(max(count, expected - self._n), dim)
        start, stop = self._n, self._n + count
        self._vectors[start:stop] = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(count, dim)
        self._ids[start:stop] = np.fromiter((r[0] for r in rows), dtype=np.int64, count=count)
        created = epoch_seconds_v([r[2] for r in rows])
        self._created[start:stop] = created
        before = self._cummax[start - 1] if start else -np.inf
        self._cummax[start:stop] = np.maximum.accumulate(np.maximum(created, before))
        if self._has_recalls:
            recalls = np.fromiter((r[3] for r in rows), dtype=np.float64, count=count)
            self._recalls[start:stop] = recalls
            self._max_recalls = max(self._max_recalls, float(recalls.max()))
        self._alive[start:stop] = True
        self._n = stop
        self._alive_count += count
        return count

    # -- deletions and counters -------------------------------------------------------------------
    def _positions(self, row_ids: Any) -> np.ndarray:
        """Positions of those ids that are loaded (ids are ascending: loaded in id order)."""
        wanted = np.asarray(list(row_ids), dtype=np.int64)
        ids = self._ids[: self._n]
        at = np.searchsorted(ids, wanted)
        inside = at < ids.size
        at = at[inside]
        return at[ids[at] == wanted[inside]]  # (np.isin costs ~10× more on a few ids)

    def forget(self, ids: list[int]) -> None:
        with self._lock:
            at = self._positions(ids)
            at = at[self._alive[at]]
            self._alive[at] = False
            self._alive_count -= int(at.size)
            self._forgotten_since_ivf += int(at.size)
            due = self._ivf_due()
        if due:
            self._maintain()

    def set_recall_count(self, row_id: int, count: int) -> None:
        with self._lock:
            at = self._positions([row_id])
            if at.size:
                self._recalls[at[0]] = count
                self._max_recalls = max(self._max_recalls, float(count))

    # -- the IVF stage ------------------------------------------------------------------------
    def _ivf_due(self) -> bool:
        if self.ivf_min_rows is None or self._alive_count < self.ivf_min_rows:
            return False
        if self._ivf_failed_at is not None and self._sealed < self._ivf_failed_at * RETRAIN_GROWTH:
            return False  # it failed: retry once the index has grown, not on every refresh
        ivf = self._ivf
        if ivf is None:
            return True
        uncovered = self._sealed - ivf.covered
        return (
            uncovered > ivf.rows * (RETRAIN_GROWTH - 1) or self._forgotten_since_ivf * 3 > ivf.rows
        )

    def _seal_due(self) -> bool:
        return self.quantize and self._n - self._sealed >= self.seal_rows

    def _maintain(self) -> None:
        """Seal new rows into 8-bit blocks, then (re)build the IVF if due: in a background
        thread, so a refresh (and `caesar serve`'s first recall) never waits for either; the
        rows not sealed yet are scanned exactly meanwhile."""
        with self._lock:
            if self._builder is not None and self._builder.is_alive():
                return
            if self.background:
                self._builder = threading.Thread(
                    target=self._maintenance, daemon=True, name="vectors"
                )
                self._builder.start()
                return
        self._maintenance()

    def _maintenance(self) -> None:
        if not self._maintaining.acquire(blocking=False):
            return  # another thread is at it (inline mode); it will see these rows too
        try:
            self._seal_and_build()
        finally:
            self._maintaining.release()

    def _seal_and_build(self) -> None:
        while True:
            with self._lock:
                if not self._seal_due():
                    break
                start, vectors = self._sealed, self._vectors
                stop = min(self._n, start + quantized.MAX_BLOCK_ROWS)
            block = quantized.seal(vectors[start:stop], start)  # one maintainer: no race
            with self._lock:
                self._blocks = (*self._blocks, block)
                self._sealed = block.stop
        with self._lock:
            due = self._ivf_due()
        if due:
            self.build_ivf()

    def build_ivf(self) -> None:
        """Build the IVF over the sealed rows now, then swap it in (searches meanwhile scan
        the 8-bit blocks exactly)."""
        with self._lock:
            covered, vectors = self._sealed, self._vectors
            positions = np.flatnonzero(self._alive[:covered])
            self._forgotten_since_ivf = 0
        try:
            built = ann.build(vectors, positions, covered)
        except Exception:  # searches stay exact; logged, and retried once the index grows
            log.exception("%s: building the IVF failed; searches stay exact", self.model_id)
            with self._lock:
                self._ivf_failed_at = covered
            return
        with self._lock:
            self._ivf = built
            self._ivf_failed_at = None

    def wait_for_ivf(self, timeout: float | None = None) -> bool:
        """Wait for background sealing and building (start-up, benchmarks); True if the IVF
        is in use."""
        builder = self._builder
        if builder is not None:
            builder.join(timeout)
        return self._ivf is not None

    # -- search -----------------------------------------------------------------------------------
    def _snapshot(self) -> _Snapshot:
        with self._lock:
            return _Snapshot(
                self._n,
                self._vectors,
                self._ids,
                self._created,
                self._cummax,
                self._recalls,
                self._alive,
                self._blocks,
                self._sealed,
                self._ivf,
            )

    def search(
        self,
        query: np.ndarray,
        *,
        limit: int,
        threshold: float | None = None,
        min_created: float | None = None,
        rank: Rank | None = None,
        factor_range: tuple[float, float] = (1.0, 1.0),
    ) -> Hits:
        """Rows with cosine ≥ threshold and created ≥ min_created, ordered by
        `rank(cosine, created, recall_count)` (default: cosine), best `limit` first. `rank`
        must equal cosine × a factor within `factor_range` (both bounds ≥ 0)."""
        snap = self._snapshot()
        if snap.n == 0 or self._dim == 0:
            return Hits.empty()
        if query.shape[-1] != self._dim:
            raise ValueError(f"query has {query.shape[-1]} dims, index has {self._dim}")
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(-1)
        start = window_start(snap.cummax[: snap.n], min_created)
        tail_from = max(start, snap.sealed)
        tail = np.arange(tail_from, snap.n)
        tail_cos = quantized.dots(snap.vectors[tail_from : snap.n], q)
        ivf = snap.ivf
        if ivf is None or ivf.covered - start < (self.ivf_min_rows or 0):
            ivf = None  # a short window: scanning it all is cheap, and exact
        # Each source proposes its best rows with a bound on the ones it left out: the IVF
        # (its rows, approximately), then the 8-bit blocks it does not cover.
        sources: list[tuple[Fetch, float]] = []
        if ivf is not None:
            if threshold is not None:
                passing = ivf.above(q, threshold - quantized.ROUNDING_SLACK, start)
                sources.append((partial(all_of, (*passing, True)), 0.0))
            else:
                sources.append((partial(ivf.nearest, q, lo=start), ivf.error))
        after = ivf.covered if ivf is not None else 0
        for block in snap.blocks:
            if block.stop > max(start, after):
                sources.append((partial(block.nearest, q, lo=start), block.error))
        if not sources:
            return self._finish(snap, tail, tail_cos, limit, threshold, min_created, rank)[0]
        q_norm = float(np.linalg.norm(q))
        k = [max(2 * limit, 32)] * len(sources)
        found = [fetch(k[i]) for i, (fetch, _) in enumerate(sources)]
        while True:
            positions = np.concatenate([f[0] for f in found])
            cosine = quantized.dots(snap.vectors[positions], q)
            hits, keys = self._finish(
                snap,
                np.concatenate([positions, tail]),
                np.concatenate([cosine, tail_cos]),
                limit,
                threshold,
                min_created,
                rank,
            )
            kth = keys[-1] if hits.ids.size >= limit else None
            again = []
            for i, ((_, error), (_, scores, exhausted)) in enumerate(
                zip(sources, found, strict=True)
            ):
                if exhausted:
                    continue
                top = quantized.ceiling(scores, error, q_norm)
                if threshold is not None and top < threshold:
                    continue  # nothing unseen here can pass the threshold
                if kth is not None and unseen_bound(top, factor_range) < kth:
                    continue  # nor outrank the K-th result
                again.append(i)
            if not again:
                return hits
            for i in again:
                k[i] *= 4
                found[i] = sources[i][0](k[i])

    def cosines(self, row_ids: list[int], query: np.ndarray) -> dict[int, float]:
        """Exact cosine of the query with each of `row_ids` that is loaded and alive."""
        if not row_ids or self._dim == 0:
            return {}
        with self._lock:
            at = self._positions(row_ids)
            at = at[self._alive[at]]
            ids, vectors = self._ids[at], self._vectors[at]
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(-1)
        return {int(i): float(c) for i, c in zip(ids, vectors @ q, strict=True)}

    def newest(self, query: np.ndarray, *, limit: int, min_created: float | None = None) -> Hits:
        """The `limit` last-loaded live rows (the highest ids: loading is in id order) created
        ≥ min_created, with their exact cosine to the query; newest first."""
        snap = self._snapshot()
        if snap.n == 0 or self._dim == 0 or limit <= 0:
            return Hits.empty()
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(-1)
        picked: list[np.ndarray] = []
        found, stop = 0, snap.n
        while stop > 0 and found < limit:  # alive rows are nearly all rows: one pass, mostly
            if min_created is not None and snap.cummax[stop - 1] < min_created:
                break  # every row from here back is older
            start = max(0, stop - 2 * limit)
            span = np.arange(stop - 1, start - 1, -1)
            keep = snap.alive[span]
            if min_created is not None:
                keep &= snap.created[span] >= min_created
            picked.append(span[keep][: limit - found])
            found += int(picked[-1].size)
            stop = start
        positions = np.concatenate(picked) if picked else np.zeros(0, dtype=np.int64)
        return Hits(
            snap.ids[positions],
            snap.vectors[positions] @ q,
            snap.created[positions],
            snap.recalls[positions],
        )

    @staticmethod
    def _finish(
        snap: _Snapshot,
        positions: np.ndarray,
        cosine: np.ndarray,
        limit: int,
        threshold: float | None,
        min_created: float | None,
        rank: Rank | None,
    ) -> tuple[Hits, np.ndarray]:
        """Filter candidates exactly and keep the best `limit`; also returns their keys."""
        keep = snap.alive[positions]
        if threshold is not None:
            keep &= cosine >= threshold
        if min_created is not None:
            keep &= snap.created[positions] >= min_created
        positions = positions[keep]
        cos = cosine[keep].astype(np.float64)
        created = snap.created[positions]
        recalls = snap.recalls[positions]
        keys = rank(cos, created, recalls) if rank is not None else cos
        ids = snap.ids[positions]
        top = top_indices(keys, ids, limit)
        return Hits(ids[top], cos[top], created[top], recalls[top]), keys[top]


class CurrentModelIndex:
    """One VectorIndex per person for the embedder's current model (issue #23): a person's
    search scans their own rows only, and costs what those cost, whatever the household holds.
    Recall only compares vectors of one model, so a model change starts fresh indexes: rows
    embedded by an older model are not recalled until they are embedded again. A person's
    index is loaded on their first search."""

    def __init__(
        self, model_cls: Any, model_id: Callable[[], str], extra_filter: Any = None
    ) -> None:
        self._model_cls = model_cls
        self._model_id = model_id
        self._extra_filter = extra_filter
        self._model: str | None = None
        self._indexes: dict[int, VectorIndex] = {}
        self._lock = threading.Lock()

    def current_model(self) -> str:
        return self._model_id()

    def get(self, person: int) -> VectorIndex:
        model_id = self._model_id()
        with self._lock:
            if self._model != model_id:
                self._model, self._indexes = model_id, {}
            index = self._indexes.get(person)
            if index is None:
                mine = self._model_cls.person_id == person
                where = mine if self._extra_filter is None else and_(self._extra_filter, mine)
                index = self._indexes[person] = VectorIndex(
                    self._model_cls, model_id, extra_filter=where
                )
            return index

    def loaded(self, person: int) -> VectorIndex | None:
        """The person's index if one was built, without building (or loading a model for) one."""
        return self._indexes.get(person)

    def everyone_loaded(self) -> list[VectorIndex]:
        return list(self._indexes.values())

    def forget(self, ids: Sequence[int]) -> None:
        """Drop rows deleted elsewhere (retention, a forget) at once, rather than when a search
        finds them missing after they have taken candidate slots."""
        if ids:
            for index in self.everyone_loaded():
                index.forget(list(ids))

    def release(self) -> None:
        """Let go of the loaded indexes (their memory), e.g. once PostgreSQL searches the
        vectors; `get` loads a fresh one if asked again."""
        with self._lock:
            self._indexes = {}
