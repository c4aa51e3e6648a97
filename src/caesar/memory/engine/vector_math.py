"""The pure parts of vector search (memory/engine/vectors.py): time conversion, the age window,
top-K selection with ties, the bound on rows a first pass left out, and the result type."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

EPOCH = datetime(1970, 1, 1)


def all_of(
    result: tuple[np.ndarray, np.ndarray, bool], _k: int
) -> tuple[np.ndarray, np.ndarray, bool]:
    return result


def to_f32_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_row(blob: bytes | None, fallback_json: list[float] | None) -> np.ndarray:
    if blob:
        return np.frombuffer(blob, dtype="<f4")
    return np.asarray(fallback_json or [], dtype=np.float32)


def epoch_seconds(value: datetime) -> float:
    return (value - EPOCH).total_seconds()


def epoch_seconds_v(values: Sequence[datetime | str]) -> np.ndarray:
    """Naive datetimes (or SQLite's ISO text of them) → float seconds since 1970, parsed by
    numpy rather than one Python call each."""
    micros = np.array(values, dtype="datetime64[us]").astype(np.int64)
    return micros.astype(np.float64) / 1e6


def window_start(cummax_created: np.ndarray, min_created: float | None) -> int:
    """First position that can hold a row created at or after `min_created`: every row before
    it is older (the running maximum of `created` is sorted, whatever order rows came in)."""
    if min_created is None:
        return 0
    return int(np.searchsorted(cummax_created, min_created, side="left"))


def top_indices(keys: np.ndarray, ids: np.ndarray, limit: int) -> np.ndarray:
    """Indices of the `limit` largest keys, best first; equal keys: larger id (newer) first."""
    if limit <= 0 or keys.size == 0:
        return np.zeros(0, dtype=np.int64)
    if keys.size > limit:
        kth = np.partition(keys, keys.size - limit)[keys.size - limit]
        pool = np.flatnonzero(keys >= kth)  # every tie of the limit-th key, so ties stay exact
    else:
        pool = np.arange(keys.size)
    order = np.lexsort((-ids[pool], -keys[pool]))
    return pool[order[:limit]]


def unseen_bound(cos_ceiling: float, factor_range: tuple[float, float]) -> float:
    """The best key a row with cosine ≤ cos_ceiling can reach when key = cosine × factor and
    factor ∈ factor_range (both ≥ 0)."""
    low, high = factor_range
    return cos_ceiling * (high if cos_ceiling >= 0 else low)


@dataclass
class Hits:
    """Parallel arrays, best first."""

    ids: np.ndarray
    cosine: np.ndarray
    created: np.ndarray  # epoch seconds
    recall_count: np.ndarray

    @classmethod
    def empty(cls) -> Hits:
        nothing = np.zeros(0)
        return cls(nothing.astype(np.int64), nothing, nothing, nothing)
