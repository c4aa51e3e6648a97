"""A fast first pass for VectorIndex: its rows in blocks of 8-bit codes, with an exact bound.

Why: exact search reads the whole float32 matrix, ~1.5 KB a row, and is memory-bound at
~7–12 ms per 100k rows on this class of machine; a score needs only a quarter of that. Each
sealed block of rows is quantised to one byte per component (faiss `QT_8bit_uniform`, one
range per block) and scanned with faiss's SIMD kernel for the k best approximate scores.

The first pass never decides anything. For each row we know `error`, the largest distance
between a row of the block and its decoded codes, so |cosine − approximate| ≤ |q| × error
(Cauchy–Schwarz): every row a block did not return has a cosine at most `ceiling` (the k-th
approximate score plus that bound). VectorIndex re-scores the returned rows exactly from the
float32 matrix and asks a block for more only while its ceiling could still beat the
threshold or the K-th result — so results are the exact ones, only cheaper to find.
(An IVF was measured first: on random vectors with planted topics it needed half of its
clusters scanned for recall@5 ≥ 0.99, which is no cheaper than this, and it is approximate.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# Rows appended since the last block are scanned exactly until there are this many.
SEAL_ROWS = 4096
# A first load is cut into blocks of at most this many rows: sealing one needs a decoded copy.
MAX_BLOCK_ROWS = 65_536
# Float rounding in faiss's kernel and in our error norms, in cosine units (generous).
ROUNDING_SLACK = 1e-4
# numpy's BLAS spreads a matrix-vector product over threads, which on a busy 2-core machine
# measured 20× slower than faiss's single-threaded kernel at 20k rows; below this it is fine.
_NUMPY_DOT_ROWS = 2048


def available() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def dots(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """matrix @ query in float32, single-threaded (faiss's kernel for large slices)."""
    rows = matrix.shape[0]
    if rows <= _NUMPY_DOT_ROWS or not matrix.flags.c_contiguous or not available():
        return np.asarray(matrix @ query, dtype=np.float32)
    import faiss

    out = np.empty(rows, dtype=np.float32)
    q = np.ascontiguousarray(query, dtype=np.float32)
    faiss.fvec_inner_products_ny(  # type: ignore[attr-defined]
        faiss.swig_ptr(out), faiss.swig_ptr(q), faiss.swig_ptr(matrix), matrix.shape[1], rows
    )
    return out


@dataclass(frozen=True)
class Block:
    """Rows [start, stop) of the matrix as 8-bit codes; never changed once sealed."""

    start: int
    stop: int
    index: Any  # faiss.IndexScalarQuantizer (inner product)
    error: float  # max over rows of |row − decoded(row)|

    def nearest(self, query: np.ndarray, k: int, lo: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """(positions, approximate scores) of up to k best rows at positions ≥ lo, best first,
        and whether that was every such row (nothing left unseen)."""
        import faiss

        params = None
        if lo > self.start:
            selector = faiss.IDSelectorRange(lo - self.start, self.stop - self.start)
            params = faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]
        faiss.omp_set_num_threads(1)  # one query: a thread team only costs (this thread only)
        scores, labels = self.index.search(query.reshape(1, -1), int(k), params=params)
        found = labels[0] >= 0
        exhausted = bool(found.sum() < k) or k >= self.stop - lo
        return labels[0][found].astype(np.int64) + self.start, scores[0][found], exhausted


def seal(vectors: np.ndarray, start: int) -> Block:
    """Quantise rows `vectors` (positions start…) into a block."""
    import faiss

    rows, dim = vectors.shape
    data = np.ascontiguousarray(vectors, dtype=np.float32)
    index = faiss.IndexScalarQuantizer(
        dim, faiss.ScalarQuantizer.QT_8bit_uniform, faiss.METRIC_INNER_PRODUCT
    )
    # The block's own value range (faiss's trainer would estimate it from a sample).
    low, high = float(data.min()), float(data.max())
    index.sq.trained.resize(2)
    faiss.copy_array_to_vector(
        np.array([low, max(high - low, 1e-6)], dtype=np.float32), index.sq.trained
    )
    index.is_trained = True
    codes = index.sa_encode(data)
    residual = data - index.sa_decode(codes)
    error = float(np.sqrt(np.einsum("ij,ij->i", residual, residual)).max()) if rows else 0.0
    index.add_sa_codes(codes)
    return Block(start, start + rows, index, error)


def ceiling(block_scores: np.ndarray, error: float, query_norm: float) -> float:
    """The highest cosine a row the block did not return can have."""
    return float(block_scores[-1]) + query_norm * error + ROUNDING_SLACK
