"""ADR-0034 §4, the ranking-only decay formulas. Pure: no I/O, computed at read time.

Half-lives are true half-lives (DESIGN.md): `0.5 ** (age / halflife)` halves at `halflife`,
where the ADR's `exp(-age / halflife)` would halve at 0.69 × halflife.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

SECONDS_PER_DAY = 86_400.0


def freshness(age_days: float, halflife_days: float) -> float:
    return float(0.5 ** (max(age_days, 0.0) / halflife_days))


def fact_importance(
    *,
    age_days: float,
    confidence: float,
    edit_count: int,
    halflife_days: float,
    edit_weight_scale: float,
) -> float:
    """importance = freshness × confidence × edit_weight; edit_weight = 1 + scale × edits."""
    edit_weight = 1.0 + edit_weight_scale * edit_count
    return freshness(age_days, halflife_days) * confidence * edit_weight


def recall_weight(recall_count: float, scale: float) -> float:
    """1 + scale × log1p(recall_count): past relevance compounds, slowly."""
    return 1.0 + scale * math.log1p(max(recall_count, 0))


def episode_score(
    *,
    cosine: float,
    age_days: float,
    recall_count: int,
    halflife_days: float,
    recall_weight_scale: float,
) -> float:
    """score = cosine × freshness × recall_weight."""
    return (
        cosine
        * freshness(age_days, halflife_days)
        * recall_weight(recall_count, recall_weight_scale)
    )


# Vectorised twins for the recall hot path (same formulas, numpy arrays in and out).
def freshness_v(age_days: np.ndarray, halflife_days: float) -> np.ndarray:
    fresh: np.ndarray = np.power(0.5, np.maximum(age_days, 0.0) / halflife_days)
    return fresh


def fact_importance_v(
    *,
    age_days: np.ndarray,
    confidence: np.ndarray,
    edit_count: np.ndarray,
    halflife_days: float,
    edit_weight_scale: float,
) -> np.ndarray:
    edit_weight = 1.0 + edit_weight_scale * edit_count
    importance: np.ndarray = freshness_v(age_days, halflife_days) * confidence * edit_weight
    return importance


def recall_weight_v(recall_counts: np.ndarray, scale: float) -> np.ndarray:
    weight: np.ndarray = 1.0 + scale * np.log1p(np.maximum(recall_counts, 0))
    return weight


def episode_rank(
    now_s: float, halflife_days: float, recall_weight_scale: float
) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """The vector index's `rank` for episodes: (cosine, created epoch seconds, recall count)
    arrays → cosine × freshness × recall_weight at `now_s` (episode_score, vectorised)."""

    def rank(cosine: np.ndarray, created: np.ndarray, recalls: np.ndarray) -> np.ndarray:
        age = (now_s - created) / SECONDS_PER_DAY
        score: np.ndarray = (
            cosine * freshness_v(age, halflife_days) * recall_weight_v(recalls, recall_weight_scale)
        )
        return score

    return rank


def recency_among_comparable(
    score: np.ndarray, age_days: np.ndarray, ids: np.ndarray, within: float
) -> list[int]:
    """Decay as a prior (the default episode ranking): positions best first by `score`, except
    that comparable matches — within `within` (a share, 0.03 = 3 %) of the first of their tier —
    go newest first. Walking down the scores, a match more than `within` below its tier's first
    starts the next tier. So a strong old match still outranks a weaker new one, and between
    two statements about the same thing the newer wins (docs/episodes.md has the figures).
    Ties: newer id first. Pure."""
    order = np.lexsort((-ids, -score))
    out: list[int] = []
    tier: list[int] = []
    lead = 0.0

    def flush() -> None:
        out.extend(sorted(tier, key=lambda j: (age_days[j], -ids[j])))

    for i in order:
        if tier and score[i] >= lead - within * abs(lead):
            tier.append(int(i))
            continue
        flush()
        tier = [int(i)]
        lead = float(score[i])
    flush()
    return out
