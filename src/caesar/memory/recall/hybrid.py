"""Hybrid episode relevance (issue #6): dense similarity over the summary and the
conversation's windows, fused with keyword relevance over the summary, the conversation and
its best window, before freshness × recall_weight.

Why: an offline or small-model summary keeps one or two sentences of a conversation, so a
question about anything else in it has nothing to match densely; the words and the meaning are
still in the conversation. The keyword side (`keyword_stage`, memory/recall/keywords.py) is full-text
search in the database itself; the dense side adds each candidate's best 3-turn window
(`passage`, memory/passages.py) to the summary's cosine.

The fused relevance stays in cosine units so `similarity_threshold` keeps its meaning:
`relevance = dense + keyword_weight × keyword × (1 − dense)`, `dense = max(cosine, passage)`.
`keyword` ∈ [0, 1] is the mean of the episode's full-text score and its best window's
(memory/engine/window_keywords.py; the episode's alone where its windows are not indexed), each as a
share of the best among the matches, times how much of the query's information the best
episode match holds — so a message that only shares common words with the past stays near its
dense similarity and under the threshold. A keyword match can only raise an episode towards 1,
never lower a dense match; with no keyword match and no windows the relevance is the plain
cosine. Then the ranking (`ranking`): by default score = relevance with comparable matches
newest first (importance.recency_among_comparable, decay as a prior);
`"adr"`: relevance × freshness × recall_weight, as in the ADR. The threshold applies to the
`gated` relevance: the keyword side scaled by the share of the message the history holds
anywhere (keywords.known_share), so a message about what the past never mentions is not
recalled on the common words it shares with it. Each hit also carries every
window's fused relevance (`windows`), which picks its excerpts (memory/recall/excerpts.py).
Windows (their vectors and their words) are read for the candidates only — the dense pool of
summaries, the keyword pool and the recent episodes — not searched through an index of their
own. Measured and explained in docs/recall-quality.md.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

import numpy as np

from caesar.embeddings import vector_of
from caesar.memory import passages
from caesar.memory.engine import window_keywords
from caesar.memory.engine.rows import PASSAGES, candidate_rows, dated_rows
from caesar.memory.engine.vectors import Rank, epoch_seconds
from caesar.memory.engine.window_keywords import fused_keyword
from caesar.memory.importance import (
    SECONDS_PER_DAY,
    episode_rank,
    freshness_v,
    recall_weight,
    recall_weight_v,
    recency_among_comparable,
)
from caesar.memory.recall.common_words import SCORE_BUDGET, common_words_pool, recent_share
from caesar.memory.recall.dates import Span
from caesar.memory.recall.keywords import (
    coverage,
    keyword_relevance,
    keyword_scores,
    known_share,
    match_terms,
    named_words,
    names_unknown,
    probe_contains,
    query_terms,
    term_counts,
)
from caesar.memory.recall.question import Asked, read_question
from caesar.memory.recall.when import NamedSpan
from caesar.memory.scope import Scope

Fusion = Literal["hybrid", "rrf", "dense"]
Ranking = Literal["prior", "adr"]

RRF_K = 60.0


def fuse(
    cosine: np.ndarray,
    keyword: np.ndarray,
    *,
    method: Fusion,
    keyword_weight: float,
) -> np.ndarray:
    """Relevance of each candidate from its cosine and its normalised keyword score ∈ [0, 1].

    hybrid: cosine + w × keyword × (1 − cosine) — in cosine units, never below the cosine,
            monotone in both, equal to the cosine when there is no keyword match.
    rrf:    reciprocal-rank fusion, Σ 1 / (RRF_K + rank) over the two rankings (unitless;
            kept for comparison — its values do not compare with a cosine threshold).
    dense:  the cosine alone (the ADR's ranking).
    """
    cos = np.asarray(cosine, dtype=np.float64)
    kw = np.clip(np.asarray(keyword, dtype=np.float64), 0.0, 1.0)
    if method == "dense" or cos.size == 0:
        return cos.copy()
    if method == "hybrid":
        return cos + keyword_weight * kw * (1.0 - np.clip(cos, -1.0, 1.0))
    if method == "rrf":
        dense_rank = _ranks(cos)
        keyword_rank = np.where(kw > 0, _ranks(kw), np.inf)
        return (1.0 - keyword_weight) / (RRF_K + dense_rank) + keyword_weight / (
            RRF_K + keyword_rank
        )
    raise ValueError(f"unknown fusion method {method!r}")


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based rank of each value, highest first (ties broken by position)."""
    order = np.argsort(-values, kind="stable")
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = np.arange(1, values.size + 1)
    return ranks


# A message that names nothing but a span of time brings up to this many of its
# conversations; one that gathers across conversations (or names a span and a topic) keeps up
# to GATHER_K candidates: the block's budget decides how many are shown.
TIME_POOL = 40
GATHER_K = 24
# A message that gathers takes candidates this far under the threshold too: the conversations
# it gathers are each about one of its items, not about all of its words. Not when it names
# someone the history never heard of (off-topic probes: 0.060 of LoCoMo's injected with it).
# Chosen on the dev data (docs/recall-by-time.md): 0 / 0.1 / 0.15 / 0.2.
GATHER_SLACK = 0.15
# "recently": relevance × (RECENT_FLOOR + (1 − RECENT_FLOOR) × freshness) — a soft preference
RECENT_FLOOR = 0.5
NO_QUESTION = Asked()

# -- the search ---------------------------------------------------------------------------------
# Candidates taken from each side before fusing: the best by dense score and the best by
# keyword score. An episode in neither pool has both a low cosine and a low keyword score.
MIN_POOL = 50
# The newest conversations are candidates whatever their summary's cosine, so their windows
# are compared with every message: a follow-up ("I tried the thing you suggested") is most
# often about one of them, and freshness favours them anyway. Older ones need their summary
# over the threshold or a keyword match to be looked at (see hybrid_search).
RECENT_POOL = 50


class HybridParams(Protocol):
    """What the search reads (episodes.RecallParams, a frozen dataclass, fits: read-only)."""

    @property
    def top_k(self) -> int: ...
    @property
    def similarity_threshold(self) -> float | None: ...
    @property
    def max_age_days(self) -> float | None: ...
    @property
    def halflife_days(self) -> float: ...
    @property
    def recall_weight_scale(self) -> float: ...
    @property
    def fusion(self) -> Fusion: ...
    @property
    def keyword_weight(self) -> float: ...
    @property
    def ranking(self) -> Ranking: ...
    @property
    def comparable_within(self) -> float: ...
    @property
    def date_weight(self) -> float: ...
    @property
    def said_pool(self) -> bool:
        """Rank up to GATHER_K, those behind top_k as reserve, for the memory stage."""
        ...


@dataclass(frozen=True)
class HybridHit:
    """One recalled episode and every number behind its place (for the audit row)."""

    episode_id: int
    audit_log_id: int
    summary: str
    created_at: datetime
    recall_count: int
    cosine: float  # the message against the summary
    keyword: float  # keyword relevance ∈ [0, 1] (episode and best window); 0 = no match
    relevance: float  # fuse(max(cosine, passage), keyword): what ranks it
    age_days: float
    freshness: float
    recall_weight: float
    score: float  # relevance (prior), or relevance × freshness × recall_weight (ranking "adr")
    passage: float | None = None  # best window of the conversation; None: no windows stored
    # the best window's keyword relevance ∈ [0, 1]; None: no windows indexed. `keyword` is
    # then the mean of the episode-level one and this (window_keywords.fused_keyword)
    window_keyword: float | None = None
    # each window's relevance, in window order (excerpt selection); None: no windows stored
    windows: tuple[float, ...] | None = None
    # the share of the message's information the history holds anywhere (keywords.known_share)
    known: float = 1.0
    # fuse(max(cosine, passage), keyword × known): what the threshold applies to (= relevance
    # when every word of the message is somewhere in the history)
    gated: float = 0.0
    # ranked behind the block's candidates, kept for the memory stage (memory/recall/said.py)
    reserve: bool = False
    # held within a span of time the message names by date (memory/recall/dates.py): the
    # relevance and `gated` are lifted by date_weight × (1 − ·), `gated` not when the message
    # names someone the history never heard of
    dated: bool = False


def rank_candidates(
    rows: Sequence[Sequence[Any]],
    cosine: dict[int, float],
    keyword: dict[int, float],
    now: datetime,
    params: HybridParams,
    passage: dict[int, float] | None = None,
    window: dict[int, float] | None = None,
    known: float = 1.0,
    dated: Collection[int] = frozenset(),
    stranger: bool = False,
    asked: Asked | None = None,
) -> list[HybridHit]:
    """Pure: (id, audit_log_id, summary, created_at, recall_count, …) rows with their summary
    cosine, best-window cosine (`passage`, where the episode has windows), normalised
    episode-level keyword score and best-window keyword score (`window`, where its windows are
    indexed) → the top K by the ranking (`params.ranking`: relevance with comparable matches
    newest first, or the ADR's relevance × freshness × recall_weight),
    keeping only rows whose `gated` relevance clears the threshold: the same fusion with the
    keyword side scaled by `known`, the share of the message the history holds anywhere — so
    a message about what the past never mentions is not recalled on the common words it shares
    with it, while the ranking among the matches stays the relevance's. The dense side of the
    fusion is the better of the summary and the best window; the keyword side the mean of the
    episode and its best window. Ties: newer episode id first.

    When the message names a span of time (`asked`, memory/recall/question.py), the
    conversations held in it (`dated`) come first, ranked by relevance, then those outside it
    that clear the threshold; when it names nothing but the time, the span's conversations
    alone, newest first, with no threshold (up to TIME_POOL). A message that gathers across
    conversations keeps up to GATHER_K; "recently" weighs relevance by freshness, softly."""
    if not rows:
        return []
    passage = {} if params.fusion == "dense" else (passage or {})
    window = {} if params.fusion == "dense" else (window or {})
    id_list = [int(r[0]) for r in rows]
    ids = np.array(id_list, dtype=np.int64)
    cos = np.array([cosine[i] for i in id_list], dtype=np.float64)
    dense = np.maximum(cos, [passage.get(i, -1.0) for i in id_list])
    kw = np.array(
        [fused_keyword(keyword.get(i, 0.0), window.get(i)) for i in id_list], dtype=np.float64
    )
    relevance = fuse(dense, kw, method=params.fusion, keyword_weight=params.keyword_weight)
    gated = (
        relevance
        if known >= 1.0
        else fuse(dense, kw * known, method=params.fusion, keyword_weight=params.keyword_weight)
    )
    on_day = np.array([i in dated for i in id_list], dtype=bool)
    if params.fusion == "hybrid" and params.date_weight > 0 and on_day.any():
        # the same shape as the keyword side: towards 1, never lowering. A message about
        # someone the history never heard of is not recalled by its date alone; otherwise the
        # day is what it asks about, whatever its other words ("what did we talk about on…")
        lift = params.date_weight * on_day
        relevance = relevance + lift * (1.0 - relevance)
        gated = gated + (0.0 if stranger else 1.0) * lift * (1.0 - gated)
    age = np.array([(now - r[3]).total_seconds() / SECONDS_PER_DAY for r in rows])
    fresh = freshness_v(age, params.halflife_days)
    weight = recall_weight_v(
        np.array([r[4] for r in rows], dtype=np.float64), params.recall_weight_scale
    )
    asked = asked or NO_QUESTION
    keep = np.ones(len(rows), dtype=bool)
    if asked.time_only:
        keep &= on_day
    elif params.similarity_threshold is not None:
        slack = GATHER_SLACK if asked.gathers and not stranger else 0.0
        keep &= gated >= params.similarity_threshold - slack
    if params.ranking == "adr":
        score = relevance * fresh * weight
        ranked: Sequence[int] = [int(i) for i in np.lexsort((-ids, -score))]
    else:
        # Neither age nor past recalls weigh the score: measured from outside (questions sent
        # one after another to POST /v1/chat, each answered turn counting its recalls), the
        # ADR's recall_weight let often-recalled conversations crowd out the one asked about
        # (LoCoMo answer in prompt 0.769 → 0.715). recall_weight is still reported.
        score = (
            relevance * (RECENT_FLOOR + (1 - RECENT_FLOOR) * fresh)
            if asked.time.recent
            else relevance
        )
        ranked = recency_among_comparable(score, age, ids, params.comparable_within)
    if asked.time_only:
        ranked = sorted(range(len(rows)), key=lambda i: (age[i], -ids[i]))
    elif on_day.any():
        ranked = sorted(ranked, key=lambda i: not on_day[i])  # stable: in the span first
    limit = params.top_k
    if asked.time_only:
        limit = max(limit, TIME_POOL)
    elif asked.gathers or asked.time.spans:
        limit = max(limit, GATHER_K)
    # the memory stage reads the dated memories of up to GATHER_K conversations: those
    # behind the block's candidates come as reserve
    depth = max(limit, GATHER_K) if params.said_pool else limit
    order = [i for i in ranked if keep[i]][:depth]
    return [
        HybridHit(
            episode_id=int(ids[i]),
            audit_log_id=int(rows[i][1]),
            summary=rows[i][2],
            created_at=rows[i][3],
            recall_count=int(rows[i][4]),
            cosine=float(cos[i]),
            keyword=float(kw[i]),
            relevance=float(relevance[i]),
            age_days=float(age[i]),
            freshness=float(fresh[i]),
            recall_weight=float(weight[i]),
            score=float(score[i]),
            passage=passage.get(int(ids[i])),
            window_keyword=window.get(int(ids[i])),
            known=known,
            gated=float(gated[i]),
            dated=bool(on_day[i]),
            reserve=n >= limit,
        )
        for n, i in enumerate(order)
    ]


def hybrid_search(
    scope: Scope,
    query_text: str,
    query_vector: np.ndarray | Future[np.ndarray],
    now: datetime,
    params: HybridParams,
    asked: Asked | None = None,
) -> list[HybridHit]:
    """Recall by fused relevance, among `person`'s episodes only (every stage asks for theirs:
    nobody else's is scored). The scope's engine is the search backend
    (memory/engine/scope.search.py): its vectors supply the dense pool, the RECENT_POOL
    last-written episodes and the summary cosines of keyword-only candidates, its full text
    the keyword pool and the windows' keyword scores; the candidates' rows with their windows'
    vectors are read here. `asked`: what the message says of time and
    gathering (memory/recall/question.py; read from `query_text` in UTC when not given)."""
    if asked is None:
        asked = read_question(query_text, now)
    if asked.time_only and params.fusion == "hybrid":
        return time_search(scope, query_vector, now, params, asked)
    pool = max(MIN_POOL, 4 * params.top_k)
    min_created = None if params.max_age_days is None else now - timedelta(days=params.max_age_days)
    scope.search.refresh(scope)
    spans = [(s.start, s.end) for s in asked.time.spans]
    dated: set[int] = set()
    found: KeywordPool | KeywordMatch = KeywordMatch.empty()
    if params.fusion != "dense":
        # What needs no vector first: the message may still be being embedded (embed_soon).
        dated = dated_episodes(scope, spans, scope.search.model_id, min_created, params)
        found = keyword_pool(
            scope,
            asked.time.rest if asked.time.spans else query_text,
            model_id=scope.search.model_id,
            pool=pool,
            min_created=min_created,
        )
    vector = vector_of(query_vector)
    rank, factor_range = pool_rank(params, now, scope.search.max_recall_count)
    dense = scope.search.search(
        scope,
        vector,
        limit=pool,
        threshold=dense_pool_threshold(params),
        min_created=None if min_created is None else epoch_seconds(min_created),
        rank=rank,
        factor_range=factor_range,
    )
    cosine = {int(i): float(c) for i, c in zip(dense.ids, dense.cosine, strict=True)}
    match = KeywordMatch.empty()
    if params.fusion != "dense":
        recent = scope.search.newest(
            scope,
            vector,
            limit=RECENT_POOL,
            min_created=None if min_created is None else epoch_seconds(min_created),
        )
        for i, c in zip(recent.ids, recent.cosine, strict=True):
            cosine.setdefault(int(i), float(c))
        fresh_ids = [i for i in dated if i not in cosine]
        cosine.update(scope.search.cosines(scope, fresh_ids, vector))
        # Every candidate gets its episode-level keyword score, the recent ones included: one
        # left unscored would have only its best window's half of the keyword mean.
        match = keyword_candidates(scope, found, cosine.keys(), model_id=scope.search.model_id)
    keyword = match.relevance
    ids = sorted(set(cosine) | set(keyword))
    if not ids:
        return []
    rows = candidate_rows(scope, ids)
    # DATE_POOL holds a span's newest conversations; an older one of the span that came by
    # its topic is held in it all the same (a long span holds more than the pool).
    if dated:
        dated |= within_spans(rows, asked.time.spans)
    # Keyword-only and recent candidates' summary vectors are in the backend's search; a row
    # is read only for one it lacks: committed after the refresh (PostgreSQL's statements each
    # see the latest commits), or of a size it skipped.
    missing = [r[0] for r in rows if r[0] not in cosine]
    cosine.update(scope.search.cosines(scope, missing, vector))
    unseen = [i for i in missing if i not in cosine]
    cosine.update(scope.search.stored_cosines(scope, unseen, vector))
    if params.fusion == "dense":
        return rank_candidates(rows, cosine, keyword, now, params)
    each_cosine = window_cosines(rows, vector)
    passage = {i: float(v.max()) for i, v in each_cosine.items()}
    each_keyword = window_keyword_relevance(scope, match, rows)
    window = {i: max(v.values(), default=0.0) for i, v in each_keyword.items()}
    hits = rank_candidates(
        rows,
        cosine,
        keyword,
        now,
        params,
        passage,
        window,
        match.known,
        dated,
        match.stranger,
        asked,
    )
    return [with_windows(h, each_cosine, each_keyword, params) for h in hits]


def time_search(
    scope: Scope,
    query_vector: np.ndarray | Future[np.ndarray],
    now: datetime,
    params: HybridParams,
    asked: Asked,
) -> list[HybridHit]:
    """A message that names a span of time and nothing else: the span's conversations (up to
    TIME_POOL, newest first), whatever their relevance — there is no topic to match."""
    scope.search.refresh(scope)
    min_created = None if params.max_age_days is None else now - timedelta(days=params.max_age_days)
    spans = [(s.start, s.end) for s in asked.time.spans]
    dated = dated_episodes(scope, spans, scope.search.model_id, min_created, params, TIME_POOL)
    rows = candidate_rows(scope, sorted(dated))
    if not rows:
        return []
    vector = vector_of(query_vector)
    cosine = scope.search.cosines(scope, [r[0] for r in rows], vector)
    missing = [r[0] for r in rows if r[0] not in cosine]
    cosine.update(scope.search.stored_cosines(scope, missing, vector))
    each_cosine = window_cosines(rows, vector)
    passage = {i: float(v.max()) for i, v in each_cosine.items()}
    hits = rank_candidates(rows, cosine, {}, now, params, passage, {}, 1.0, dated, False, asked)
    return [with_windows(h, each_cosine, {}, params) for h in hits]


# The conversations held within the spans a message names (newest first) that are candidates.
# Each costs as a candidate does (its windows, keyword score, row): at 100k episodes with ~830
# a day, 50 added 10.7 ms to a dated message's prepare on a slow host, 20 add about half. A
# LoCoMo span holds at most 7 sessions (a month), so 20 leave its figures as they were.
DATE_POOL = 20


def dated_episodes(
    scope: Scope,
    spans: Sequence[Span],
    model_id: str | None,
    min_created: datetime | None,
    params: HybridParams,
    limit: int = DATE_POOL,
) -> set[int]:
    """Ids of up to DATE_POOL non-trivial episodes of `model_id` (as the keyword pool's)
    created within `spans` (and after `min_created`), newest first: candidates whatever their
    cosine or words. With the shipped weight (0.5) such an episode clears the threshold by its
    date alone unless the message names someone the history never heard of: a message naming a
    day brings that day's conversations."""
    if not spans or params.fusion != "hybrid" or params.date_weight <= 0:
        return set()
    rows = dated_rows(scope, spans, min_created, limit)
    wanted = [int(i) for i, model, said in rows if said and model_id in (None, model)]
    return set(wanted[:limit])


def within_spans(rows: Sequence[Sequence[Any]], spans: Sequence[NamedSpan]) -> set[int]:
    """Ids of the (id, audit_log_id, summary, created_at, …) rows created within `spans`."""
    held = set()
    for row in rows:
        created = row[3]
        if created.tzinfo is not None:
            created = created.astimezone(UTC).replace(tzinfo=None)
        if any(s.start <= created < s.end for s in spans):
            held.add(int(row[0]))
    return held


def with_windows(
    hit: HybridHit,
    each_cosine: dict[int, np.ndarray],
    each_keyword: dict[int, dict[int, float]],
    params: HybridParams,
) -> HybridHit:
    """The hit with each of its windows' relevance — the same fusion as the episode's, of the
    window's cosine and keyword relevance — which picks the excerpts shown with it
    (memory/recall/excerpts.py)."""
    cosines = each_cosine.get(hit.episode_id)
    if cosines is None or cosines.size == 0:
        return hit
    words = each_keyword.get(hit.episode_id, {})
    keyword = np.array([words.get(k, 0.0) for k in range(cosines.size)])
    fused = fuse(cosines, keyword, method=params.fusion, keyword_weight=params.keyword_weight)
    return replace(hit, windows=tuple(round(float(x), 6) for x in fused))


def pool_factors(params: HybridParams) -> tuple[float, float]:
    """(half-life, recall weight scale) the dense pool is drawn with: the ranking's own under
    the ADR's formula; neither under the prior, whose score is the relevance alone (an old or
    never-recalled strong match must be in the pool to surface)."""
    if params.ranking == "adr":
        return params.halflife_days, params.recall_weight_scale
    return math.inf, 0.0


def pool_rank(
    params: HybridParams, now: datetime, max_recall_count: float
) -> tuple[Rank | None, tuple[float, float]]:
    """The dense pool's ranking and the range of its factor over the cosine (see
    `VectorSearch.search`). Under the prior the factors are neutral: no rank (the cosine —
    the same order, and pgvector fetches the pool and one row more, not a re-rank's
    over-fetch), factor 1. Under the ADR's formula, freshness ≤ 1 and the recall weight ≤ its
    value at the largest count: a bound an index can stop early on without changing the
    result. (The bound once took the configured recall weight under the prior too, so a search
    could never stop before the threshold: at 1M episodes on pgvector the pool cost 72.29 ms
    p50 against 7.83 ms, quiet host; bench_pgvector at dda303d.)"""
    halflife, scale = pool_factors(params)
    if math.isinf(halflife) and scale == 0:
        return None, (1.0, 1.0)
    rank = episode_rank(epoch_seconds(now), halflife, scale)
    return rank, (0.0, recall_weight(max_recall_count, scale))


def window_keyword_stage(scope: Scope, match: KeywordMatch, rows: list[Any]) -> dict[int, float]:
    """Best-window keyword relevance of the candidates whose windows are indexed (those with
    window vectors: both are written together), 0 for one with no matching window; candidates
    without windows are absent (their keyword relevance stays the episode's)."""
    each = window_keyword_relevance(scope, match, rows)
    return {i: max(v.values(), default=0.0) for i, v in each.items()}


def window_keyword_relevance(
    scope: Scope, match: KeywordMatch, rows: list[Any]
) -> dict[int, dict[int, float]]:
    """{episode: {window number: keyword relevance}} of the candidates whose windows are
    indexed ({} for one with no matching window); candidates without windows are absent."""
    indexed = [r[0] for r in rows if r[PASSAGES]]
    if not indexed:
        return {}
    scores = window_keywords.each_window_score(scope, match.terms, indexed)
    # the same shape as the episode level (keyword_relevance): a share of the best window,
    # times the best episode match's coverage
    flat = {(i, k): v for i, per in scores.items() for k, v in per.items()}
    out: dict[int, dict[int, float]] = {i: {} for i in indexed}
    for (i, k), relevance in keyword_relevance(flat, match.strength).items():
        out[i][k] = relevance
    return out


def dense_pool_threshold(params: HybridParams) -> float | None:
    """The cosine the dense pool is drawn above: the recall threshold, under hybrid (or dense)
    fusion, where relevance ≥ cosine. Without it the pool is the best decayed cosines over the
    whole window, and at 100k episodes finding those costs ~15 ms (freshness can be small, so
    the index may stop scanning only near the end). A row under the threshold can only pass it
    with a keyword score; every keyword match is in the keyword pool unless that pool is full,
    so what this leaves out is a row under the threshold that only a low-ranked keyword match
    could lift. RRF's relevance is not in cosine units: no threshold there."""
    if params.fusion == "rrf":
        return None
    return params.similarity_threshold


@dataclass(frozen=True)
class KeywordMatch:
    """What the keyword stage found: each scored episode's relevance, the query words it
    matched and how much of the query's information its best match holds (keywords.coverage)
    — the window stage scores windows with the same words and strength."""

    relevance: dict[int, float]
    terms: list[str]
    strength: float
    # how much of the message's information the history holds anywhere (keywords.known_share)
    known: float = 1.0
    # the message names someone or something no episode holds (keywords.names_unknown)
    stranger: bool = False

    @staticmethod
    def empty() -> KeywordMatch:
        return KeywordMatch({}, [], 0.0)


@dataclass(frozen=True)
class KeywordPool:
    """The keyword stage's first half (`keyword_pool`), which needs no vector: the message's
    words, their counts in the person's history and the best matches among all of it. What
    is known of the message is final here; `.scores` still lacks the dense candidates'."""

    query: str
    terms: list[str]
    total: int
    counts: list[int]
    matched: list[str]
    known: float
    stranger: bool
    # the common-word pool's share (common_words.recent_share); None: a plain MATCH
    share: float | None
    scores: dict[int, float]
    pool: int


def keyword_pool(
    scope: Scope,
    query: str,
    *,
    model_id: str,
    pool: int,
    min_created: datetime | None,
    budget: int = SCORE_BUDGET,
) -> KeywordPool | KeywordMatch:
    """The keyword pool — the best `pool` matches created ≥ min_created — with the counts it
    was chosen by; a KeywordMatch when the stage ends here (no word of the message matches).
    `budget`: see recent_share. The scope's engine searches (that of the
    session's engine)."""
    terms = query_terms(query)
    if not terms:
        return KeywordMatch.empty()
    total, counts = term_counts(scope, terms)
    names = named_words(query, terms)
    known = known_share(total, terms, counts, names)
    stranger = names_unknown(terms, counts, names)
    matched = match_terms(terms, total, counts)
    if not matched:
        return KeywordMatch({}, [], 0.0, known, stranger)
    by_term = dict(zip(terms, counts, strict=True))
    share = recent_share([by_term[t] for t in matched], budget)
    if share is None:
        scores = keyword_scores(
            scope,
            query,
            model_id=model_id,
            limit=pool,
            min_created=min_created,
            terms=matched,
        )
    else:
        scores = common_words_pool(
            scope,
            matched,
            model_id=model_id,
            pool=pool,
            min_created=min_created,
            share=share,
            budget=budget,
        )
    return KeywordPool(query, terms, total, counts, matched, known, stranger, share, scores, pool)


def keyword_candidates(
    scope: Scope,
    found: KeywordPool | KeywordMatch,
    candidates: Collection[int],
    *,
    model_id: str,
) -> KeywordMatch:
    """The keyword stage's second half: the pool with the dense `candidates` that match
    scored too, normalised (see keyword_stage)."""
    if isinstance(found, KeywordMatch):
        return found
    scores = dict(found.scores)
    # A pool that is neither full nor bounded holds every match in the window, where the dense
    # candidates are: the ones it lacks have no keyword score to find.
    unscored = [i for i in candidates if i not in scores]
    if unscored and (len(scores) >= found.pool or found.share is not None):
        scores.update(
            keyword_scores(
                scope,
                found.query,
                model_id=model_id,
                limit=len(unscored),
                ids=unscored,
                terms=found.matched,
            )
        )
    if not scores:
        return KeywordMatch({}, [], 0.0, found.known, found.stranger)
    best_id = max(scores, key=lambda i: (scores[i], i))
    has = probe_contains(scope, found.terms, best_id)
    strength = coverage(found.total, list(zip(found.counts, has, strict=True)))
    relevance = keyword_relevance(scores, strength)
    return KeywordMatch(relevance, found.matched, strength, found.known, found.stranger)


def keyword_stage(
    scope: Scope,
    query: str,
    *,
    model_id: str,
    pool: int,
    min_created: datetime | None,
    candidates: Collection[int],
    budget: int = SCORE_BUDGET,
) -> KeywordMatch:
    """Normalised keyword relevance ∈ (0, 1] of the keyword pool — the best `pool` matches
    created ≥ min_created — and of the dense `candidates` that match (`.relevance`:
    {episode_id: relevance}; an episode absent from it has no keyword match, or is in neither
    set), with the words matched and the best match's coverage. `budget`: see recent_share.
    The scope's engine searches. In two halves
    (`keyword_pool`, `keyword_candidates`): hybrid_search runs the first while the message is
    still being embedded."""
    found = keyword_pool(
        scope,
        query,
        model_id=model_id,
        pool=pool,
        min_created=min_created,
        budget=budget,
    )
    return keyword_candidates(scope, found, candidates, model_id=model_id)


def passage_cosines(rows: list[Any], query_vector: np.ndarray) -> dict[int, float]:
    """Each candidate's best window cosine (memory/passages.py), for those that have windows
    of the query's dimension."""
    return {i: float(v.max()) for i, v in window_cosines(rows, query_vector).items()}


def window_cosines(rows: list[Any], query_vector: np.ndarray) -> dict[int, np.ndarray]:
    """Each candidate's window cosines, in window order, for those that have windows of the
    query's dimension: one matrix product over all their windows."""
    return passages.cosines([(r[0], r[PASSAGES]) for r in rows], query_vector)
