"""The keyword pool of a query made only of common words (issue #5): bounded cost, same scores.

Every word such a query matches is in ≥ COMMON_MIN_DOCS episodes, so on a large history it finds
a large share of it, and BM25 must score each match (~1 µs apiece in the index, ~4 µs more
joined to its row): scoring them all cost 125–200 ms a turn at 100k episodes. Yet those matches mostly tie: the
episodes that hold the same number of its words have near-equal scores. So the pool is drawn
from the few that hold all its words (BM25 ranks them first), wherever they are, and then from
the newest of the rest — the final score multiplies freshness, so among near-ties the newest
are the ones that can rank (ids grow with time). Every score is the one keywords.keyword_scores
gives; only which episodes get scored is bounded.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from caesar.db.models import EpisodeSummary
from caesar.memory.engine.backend import FullTextSearch
from caesar.memory.recall.keywords import COMMON_MIN_DOCS, keyword_scores
from caesar.memory.scope import Scope

# About this many postings of the matched words are scored among the newest episodes.
SCORE_BUDGET = 4000


def recent_share(matched_counts: list[int], budget: int = SCORE_BUDGET) -> float | None:
    """For a query made only of common words (each matched word in ≥ COMMON_MIN_DOCS
    episodes) whose postings exceed `budget`: the share of the indexed ids, newest first, to
    match it among (about `budget` postings, taking them as spread evenly over the ids). None:
    match it everywhere (see the module doc). Pure."""
    postings = sum(matched_counts)
    if postings <= budget or min(matched_counts, default=0) < COMMON_MIN_DOCS:
        return None
    return budget / postings


def common_words_pool(
    scope: Scope,
    terms: list[str],
    *,
    model_id: str,
    pool: int,
    min_created: datetime | None,
    share: float,
    budget: int = SCORE_BUDGET,
) -> dict[int, float]:
    """The keyword pool (keyword_scores' best `pool`) of a query made only of common words
    (see recent_share): the episodes holding all of them — the newest of them, if even they
    exceed `budget` — topped up with the best of the newest `share` of episodes holding any.
    Every score is the one keyword_scores gives; only which episodes are scored is bounded.
    `backend`: the search backend (by default, that of the session's engine)."""
    text = scope.search
    first, last = text.indexed_id_range(scope)

    def since(fraction: float) -> int:
        return last - int((last - first) * fraction)

    scores: dict[int, float] = {}
    holding = text.count_holding_all(scope, terms) if len(terms) > 1 else 0
    if holding:
        newest = None if holding <= budget else since(budget / holding)
        scores = _checked_pool(
            scope,
            text,
            terms,
            every=True,
            model_id=model_id,
            pool=pool,
            min_created=min_created,
            min_id=newest,
        )
    if len(scores) < pool:
        anyword = _checked_pool(
            scope,
            text,
            terms,
            every=False,
            model_id=model_id,
            pool=pool,
            min_created=min_created,
            min_id=since(share),
        )
        best = sorted({**anyword, **scores}.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        scores = dict(best[:pool])
    return scores


def _checked_pool(
    scope: Scope,
    text: FullTextSearch,
    terms: list[str],
    *,
    every: bool,
    model_id: str,
    pool: int,
    min_created: datetime | None,
    min_id: int | None,
) -> dict[int, float]:
    """keyword_scores' best `pool`, ranked in the index alone and then checked against the
    episode rows (model, age): joining every match to its row costs ~4 µs, bm25 ~1. Exact:
    when the index's best 2 × pool hold fewer than `pool` that pass, the joined query decides."""
    session = scope.session
    wide = 2 * pool
    ranked = keyword_scores(
        scope,
        "",
        model_id=None,
        limit=wide,
        terms=terms,
        min_id=min_id,
        every=every,
    )
    if not ranked:
        return {}
    rows = select(EpisodeSummary.id).where(
        EpisodeSummary.id.in_(list(ranked)), EpisodeSummary.model == model_id
    )
    if min_created is not None:
        rows = rows.where(EpisodeSummary.created_at >= min_created)
    passing = [int(i) for i in session.scalars(rows)]
    if len(passing) < pool and len(ranked) >= wide:
        return keyword_scores(
            scope,
            "",
            model_id=model_id,
            limit=pool,
            min_created=min_created,
            terms=terms,
            min_id=min_id,
            every=every,
        )
    best = sorted(passing, key=lambda i: (ranked[i], i), reverse=True)[:pool]
    return {i: ranked[i] for i in best}
