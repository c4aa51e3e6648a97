"""The approximate stage for large indexes: a faiss IVF (inverted file) over the sealed rows.

Why: even as 8-bit codes (memory/engine/quantized.py), a full scan costs ~2–4 ms per 100k rows on a
quiet 2-core machine and several times that on a busy one, so it cannot promise 3 ms at 100k
or 30 ms at 1M. The IVF clusters the rows around ~4·sqrt(n) k-means centroids and scans only
the clusters nearest the query (PROBE_FRACTION of them). It only proposes candidates:
VectorIndex re-scores them exactly, so the threshold and the ADR score keep their meaning and
the one approximation is a relevant row in a cluster that was not scanned (bench/ measures
recall@5 against exact search, on synthetic and on real MiniLM vectors).

An IvfIndex is built from a snapshot and never mutated (searches need no lock); VectorIndex
builds a new one in the background when enough rows arrived or were forgotten. The ids given
to faiss are row positions in VectorIndex's matrix, so a position window is an id range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

# Measured by bench/bench_recall.py and bench/bench_realistic.py at dda303d (recall@5 against exact): on
# real MiniLM vectors, ~4·sqrt(n) clusters with an eighth scanned gave recall@5 0.99, where
# sqrt(n) clusters needed a quarter scanned (twice the cost) for 0.986 and gave 0.965 at an eighth.
LISTS_PER_SQRT_ROW = 4
PROBE_FRACTION = 1 / 8
MIN_NLIST = 16
MAX_NLIST = 4096
MIN_NPROBE = 8
TRAIN_POINTS_PER_LIST = 40  # faiss warns below 39
TRAIN_ITERATIONS = 10
ADD_CHUNK = 65_536  # rows copied into faiss at a time (no full copy of the matrix)


def plan(rows: int, probe_fraction: float = PROBE_FRACTION) -> tuple[int, int]:
    """(nlist, nprobe) for `rows` rows (never more lists than the rows can train)."""
    most = max(MIN_NLIST, min(MAX_NLIST, rows // TRAIN_POINTS_PER_LIST))
    nlist = int(min(most, max(MIN_NLIST, round(LISTS_PER_SQRT_ROW * math.sqrt(rows)))))
    nprobe = int(min(nlist, max(MIN_NPROBE, round(nlist * probe_fraction))))
    return nlist, nprobe


@dataclass(frozen=True)
class IvfIndex:
    index: Any  # faiss.IndexIVFScalarQuantizer (float16 codes of the raw rows), inner product
    quantizer: Any  # its coarse quantizer, referenced so Python keeps it alive
    nprobe: int
    covered: int  # built over alive rows among positions [0, covered)
    rows: int
    # max over rows of |row − float16(row)|: a scanned score is within |query| × error of the
    # exact inner product (Cauchy–Schwarz)
    error: float = 0.0

    def _params(self, lo: int) -> tuple[Any, Any]:
        import faiss

        selector = faiss.IDSelectorRange(int(lo), int(self.covered))
        params = faiss.SearchParametersIVF(nprobe=self.nprobe, sel=selector)  # type: ignore[call-arg]
        return params, selector

    def above(self, query: np.ndarray, radius: float, lo: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions ≥ lo, approximate inner products) of the scanned rows whose exact inner
        product may reach `radius` (the float16 error is taken off the radius)."""
        params, _selector = self._params(lo)
        margin = float(np.linalg.norm(query)) * self.error
        _, scores, labels = self.index.range_search(
            query.reshape(1, -1), float(radius) - margin, params=params
        )
        return np.asarray(labels, dtype=np.int64), np.asarray(scores, dtype=np.float32)

    def nearest(self, query: np.ndarray, k: int, lo: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """Up to k best (positions ≥ lo, approximate inner products: within |query| × error)
        among the scanned rows, best first, and whether that was all of them."""
        params, _selector = self._params(lo)
        scores, labels = self.index.search(query.reshape(1, -1), int(k), params=params)
        found = labels[0] >= 0
        return labels[0][found].astype(np.int64), scores[0][found], bool(found.sum() < k)


def build(
    vectors: np.ndarray,
    positions: np.ndarray,
    covered: int,
    *,
    probe_fraction: float = PROBE_FRACTION,
    seed: int = 0,
) -> IvfIndex:
    """An IVF over rows `vectors[positions]` (unit float32), labelled by position."""
    import faiss

    # Built beside live requests on a small machine: one core (this thread's OpenMP setting).
    faiss.omp_set_num_threads(1)
    dim = vectors.shape[1]
    nlist, nprobe = plan(positions.size, probe_fraction)
    quantizer = faiss.IndexFlatIP(dim)
    # Float16 codes: half the bytes a query scans (0.91 → 0.56 ms at 100k rows, an eighth of
    # the lists probed), and half the memory of float32; the scores move by < 1e-3, and the
    # exact stage re-scores every candidate from the float32 matrix anyway. 8-bit codes scanned
    # faster still (0.46 ms) but with a ~50× wider error margin (0.012 against 0.00024 in
    # cosine, over 1,828 real MiniLM summaries), i.e. more candidates to re-score near the
    # threshold.
    index = faiss.IndexIVFScalarQuantizer(
        quantizer, dim, nlist, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT, False
    )
    index.cp.niter = TRAIN_ITERATIONS
    index.cp.max_points_per_centroid = TRAIN_POINTS_PER_LIST
    index.cp.seed = seed
    sample_size = min(positions.size, nlist * TRAIN_POINTS_PER_LIST)
    sample = np.sort(np.random.default_rng(seed).choice(positions, size=sample_size, replace=False))
    index.train(np.ascontiguousarray(vectors[sample], dtype=np.float32))
    error = 0.0
    for at in range(0, positions.size, ADD_CHUNK):
        chunk = positions[at : at + ADD_CHUNK]
        rows = np.ascontiguousarray(vectors[chunk], dtype=np.float32)
        index.add_with_ids(rows, chunk)
        error = max(error, float16_error(rows))
    return IvfIndex(index, quantizer, nprobe, covered, int(positions.size), error)


def float16_error(rows: np.ndarray) -> float:
    """max over rows of |row − float16(row)| (numpy and faiss both round to nearest), with
    float32 rounding on top. Pure."""
    if rows.size == 0:
        return 0.0
    residual = rows - rows.astype(np.float16).astype(np.float32)
    return float(np.sqrt(np.einsum("ij,ij->i", residual, residual)).max()) * (1 + 1e-3)
