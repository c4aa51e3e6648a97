"""TextRank's best sentence (Mihalcea & Tarau 2004), as sumy 0.13's `TextRankSummarizer` rates
sentences, for the offline summariser.

Why not sumy itself: importing its summariser imports NLTK (for one stemmer), and NLTK's
package import pulls in scikit-learn and SciPy. In the worker process that was 126 MB resident
and ~4 s of CPU at every start, for a computation of a few lines (issue #25: serve + worker
within 600 MB, a quick first start). The rating below is sumy's, step for step: words lowered,
stop words dropped, stemmed (Snowball English, from PyStemmer, which the keyword side already
loads); an edge is the shared words over the sum of the log lengths; rows normalised, damped
(0.85), and the power method run to 1e-4. The stop words are sumy's English list, read from
its data file. tests/test_offline_textrank.py compares the choices with sumy's on real chats.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources

import numpy as np

DAMPING = 0.85
EPSILON = 1e-4
_ZERO_DIVISION_PREVENTION = 1e-7


@cache
def stop_words() -> frozenset[str]:
    """sumy's English stop words (its data file; importing sumy's code would import NLTK)."""
    text = resources.files("sumy").joinpath("data/stopwords/english.txt").read_text("utf-8")
    return frozenset(w.strip().lower() for w in text.splitlines() if w.strip())


@cache
def _stem() -> Callable[[str], str]:
    import Stemmer

    stem: Callable[[str], str] = Stemmer.Stemmer("english").stemWord
    return stem


def _edge(words1: list[str], words2: list[str]) -> float:
    rank = sum(words2.count(w) for w in words1)
    if rank == 0:
        return 0.0
    norm = math.log(len(words1)) + math.log(len(words2))
    return float(rank) if math.isclose(norm, 0.0, abs_tol=1e-8) else rank / norm


def ratings(sentences: Sequence[Sequence[str]], stop: frozenset[str]) -> np.ndarray:
    """Each sentence's TextRank, given its words."""
    stem = _stem()
    bags = [[stem(w) for w in map(str.lower, words) if w not in stop] for words in sentences]
    n = len(bags)
    weights = np.zeros((n, n))
    for i, words_i in enumerate(bags):
        for j in range(i, n):
            weights[i, j] = weights[j, i] = _edge(words_i, bags[j])
    weights /= weights.sum(axis=1)[:, np.newaxis] + _ZERO_DIVISION_PREVENTION
    matrix = np.full((n, n), (1.0 - DAMPING) / n) + DAMPING * weights
    transposed = matrix.T
    p = np.full(n, 1.0 / n)
    change = 1.0
    while change > EPSILON:
        following = transposed @ p
        change = float(np.linalg.norm(following - p))
        p = following
    return p


def best(sentences: Sequence[str], words: Callable[[str], list[str]], stop: frozenset[str]) -> str:
    """The best-rated sentence; the first of equals, as sumy's stable sort picks it."""
    rated = ratings([words(s) for s in sentences], stop)
    return sentences[int(np.argmax(rated))]
