"""An approximate candidate generator for large vector indexes: faiss IVF (inverted file).

Why IVF: exact search is one pass over the whole float32 matrix, memory-bound at ~7–12 ms per
100k rows on this class of machine, so it cannot meet 3 ms at 100k or 30 ms at 1M. IVF
clusters the rows around `nlist` k-means centroids and scans only the `nprobe` clusters
nearest the query (an eighth of them): ~0.3 ms at 100k and ~1–4 ms at 1M. It only proposes
candidates; VectorIndex re-scores them exactly (same float32 cosine as the exact path), so
thresholds and the ADR score keep their meaning, and the only approximation is a relevant
row in an unscanned cluster (recall@5 is measured against exact search in bench/).

Built from a snapshot in one go (train on a sample, then add) and never mutated afterwards,
so searches need no lock; VectorIndex swaps in a new one when it has drifted. The ids given to
faiss are the row positions in VectorIndex's matrix, so a position window is a faiss id range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

# A cluster per ~sqrt(n) rows, and an eighth of them scanned per query: measured recall@5
# ≥ 0.99 on real MiniLM vectors (bench/bench_recall.py) at a few percent of the exact cost.
PROBE_FRACTION = 1 / 8
MIN_NLIST = 16
MAX_NLIST = 4096
MIN_NPROBE = 8
TRAIN_POINTS_PER_LIST = 40  # faiss warns below 39
TRAIN_ITERATIONS = 10


def available() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def plan(rows: int) -> tuple[int, int]:
    """(nlist, nprobe) for an index of `rows` rows."""
    nlist = int(min(MAX_NLIST, max(MIN_NLIST, round(math.sqrt(rows)))))
    nprobe = int(min(nlist, max(MIN_NPROBE, round(nlist * PROBE_FRACTION))))
    return nlist, nprobe


@dataclass
class IvfIndex:
    index: Any  # faiss.IndexIVFFlat, inner product
    quantizer: Any  # its coarse quantizer, referenced here so Python keeps it alive
    nprobe: int
    covered: int  # positions [0, covered) were considered when it was built
    rows: int  # how many (alive) rows it holds
    trained_rows: int  # rows alive when its centroids were trained

    def _params(self, lo: int, hi: int) -> tuple[Any, Any]:
        import faiss

        selector = faiss.IDSelectorRange(int(lo), int(hi))
        params = faiss.SearchParametersIVF(nprobe=self.nprobe, sel=selector)  # type: ignore[call-arg]
        return params, selector

    def above(self, query: np.ndarray, radius: float, lo: int, hi: int) -> np.ndarray:
        """Positions in [lo, hi) of scanned rows whose inner product with `query` > radius."""
        params, _keep_alive = self._params(lo, hi)
        _, _, labels = self.index.range_search(query.reshape(1, -1), float(radius), params=params)
        return np.asarray(labels, dtype=np.int64)

    def nearest(self, query: np.ndarray, k: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Up to k (positions, inner products) in [lo, hi), best first; fewer than k means
        every scanned row in the range was returned."""
        params, _keep_alive = self._params(lo, hi)
        scores, labels = self.index.search(query.reshape(1, -1), int(k), params=params)
        found = labels[0] >= 0
        return labels[0][found].astype(np.int64), scores[0][found]


def build(
    vectors: np.ndarray,
    positions: np.ndarray,
    covered: int,
    *,
    centroids_from: IvfIndex | None = None,
    seed: int = 0,
) -> IvfIndex:
    """An IVF over `vectors` (rows are unit float32) labelled by `positions`. Reuses the
    centroids of `centroids_from` (skipping k-means) when given."""
    import faiss

    rows, dim = vectors.shape
    # The builder runs beside live requests on a small machine: one core, not all of them
    # (an OpenMP setting of the calling thread only).
    faiss.omp_set_num_threads(1)
    if centroids_from is not None:
        quantizer = faiss.IndexFlatIP(dim)
        old = centroids_from.index
        quantizer.add(old.quantizer.reconstruct_n(0, old.nlist))
        index = faiss.IndexIVFFlat(quantizer, dim, old.nlist, faiss.METRIC_INNER_PRODUCT)
        index.is_trained = True
        nprobe, trained_rows = centroids_from.nprobe, centroids_from.trained_rows
    else:
        nlist, nprobe = plan(rows)
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.niter = TRAIN_ITERATIONS
        index.cp.max_points_per_centroid = TRAIN_POINTS_PER_LIST
        index.cp.seed = seed
        sample_size = min(rows, nlist * TRAIN_POINTS_PER_LIST)
        sample = vectors
        if sample_size < rows:
            pick = np.random.default_rng(seed).choice(rows, size=sample_size, replace=False)
            sample = vectors[np.sort(pick)]
        index.train(np.ascontiguousarray(sample, dtype=np.float32))
        trained_rows = rows
    index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), positions.astype(np.int64))
    return IvfIndex(index, quantizer, nprobe, covered, rows, trained_rows)
