"""Hybrid episode relevance (issue #6): dense similarity over the summary fused with keyword
relevance over the summary and the source conversation, before freshness × recall_weight.

Why: an offline or small-model summary keeps one or two sentences of a conversation, so a
question about anything else in it has nothing to match densely; the words are still in the
conversation. The keyword index is full-text search in the database itself — SQLite FTS5
(`bm25()`) or PostgreSQL (`ts_rank` over a GIN-indexed tsvector) — kept in step with
`episode_summaries` by triggers (migration 0002), so writers need no extra call.

The fused relevance stays in cosine units so `similarity_threshold` keeps its meaning:
`relevance = cosine + keyword_weight × keyword × (1 − cosine)`. `keyword` ∈ [0, 1] is the
episode's full-text score as a share of the query's best one, times how much of the query's
information (idf-weighted share of its words) that best match holds — so a message that only
shares common words with the past stays near its plain cosine and under the threshold. A keyword
match can only raise an episode towards 1, never lower a dense match; with no keyword match the
relevance is the plain cosine (the ADR's ranking). Then score = relevance × freshness ×
recall_weight, as in the ADR. Measured and explained in docs/recall-quality.md.

Cost on large histories: BM25 must score every episode the MATCH finds, so query words that
are in a large share of a large history (idf ≈ 0) are left out of the MATCH (`match_terms`),
and per-word document counts come from the index's vocabulary (migration 0003), not a COUNT.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

import numpy as np
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from caesar.db.models import EpisodeSummary
from caesar.memory.importance import SECONDS_PER_DAY, freshness_v, recall_weight, recall_weight_v
from caesar.memory.vectors import epoch_seconds, from_row

Fusion = Literal["hybrid", "rrf", "dense"]

# Not SQLAlchemy models (FTS5 cannot be declared; PostgreSQL's twin is trigger-maintained):
# the schema-vs-models comparison must skip these (FTS5's shadow tables included).
KEYWORD_TABLES = (
    "episode_fts",
    "episode_fts_data",
    "episode_fts_idx",
    "episode_fts_content",
    "episode_fts_docsize",
    "episode_fts_config",
    "episode_fts_vocab",  # fts5vocab over episode_fts (migration 0003, SQLite only)
)

# The summary is what recall shows; a word there counts double a word in the conversation.
SUMMARY_WEIGHT = 2.0
CONVERSATION_WEIGHT = 1.0
# PostgreSQL ts_rank weights for labels {D, C, B, A}; A = summary, B = conversation.
_PG_WEIGHTS = "{0.1, 0.2, 0.5, 1.0}"
RRF_K = 60.0
MAX_QUERY_TERMS = 32
# A query word in at least COMMON_MIN_DOCS episodes whose idf is under COMMON_IDF_SHARE of the
# query's rarest word's is left out of the MATCH (see match_terms): next to a rare word it adds
# little (ln(1 + 9) ≈ 2.3 for a word in 10 % of episodes against ≈ 11 for one in 1 of 100k),
# yet scoring its doclist is what made the keyword stage slow on large histories. It still
# counts in `coverage`. Below the floor a doclist is cheap to score and nothing is left out.
COMMON_IDF_SHARE = 0.4
COMMON_MIN_DOCS = 500
# Must equal migration 0002's FTS5 tokenizer: query words are tokenized with it to look their
# document counts up in the index's vocabulary (porter stems "hiking" to "hike").
SQLITE_TOKENIZE = "porter unicode61 remove_diacritics 2"
_TOKEN_CACHE_SIZE = 10_000
_token_cache: dict[str, tuple[str, ...]] = {}

_TERM = re.compile(r"[^\W_]+", re.UNICODE)
# Function words only: every question has them and they would make every episode a match.
STOP_WORDS = frozenset(
    """a about after again all also am an and any are as at be been before being but by can
    could did do does doing done during each for from had has have having he her here hers him
    his how i if in into is it its itself just me my myself no nor not of off on once only or
    our ours out over own s she should so some such t than that the their theirs them then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself ive im don didn doesn""".split()  # noqa: SIM905
)


def query_terms(query: str) -> list[str]:
    """Distinct lower-case content words of a query, in order (at most MAX_QUERY_TERMS)."""
    seen: dict[str, None] = {}
    for word in _TERM.findall(query.lower()):
        if word not in STOP_WORDS and (len(word) > 1 or word.isdigit()):
            seen.setdefault(word, None)
    return list(seen)[:MAX_QUERY_TERMS]


def fts5_match(terms: Iterable[str]) -> str:
    """An FTS5 MATCH expression: any of the terms. Quoted, so no term is read as syntax."""
    return " OR ".join(f'"{t}"' for t in terms)


def tsquery_text(terms: Iterable[str]) -> str:
    """A to_tsquery() argument: any of the terms (terms are letters and digits only)."""
    return " | ".join(terms)


def keyword_scores(
    session: Session,
    query: str,
    *,
    model_id: str,
    limit: int,
    ids: Iterable[int] | None = None,
    min_created: datetime | None = None,
    terms: list[str] | None = None,
) -> dict[int, float]:
    """Best `limit` episodes (of `model_id`, non-empty summary, created ≥ min_created, among
    `ids` if given) by keyword relevance to `query`: {episode_id: score > 0}. `terms`, if
    given, replaces the query's own words (hybrid_search passes the ones worth matching)."""
    terms = query_terms(query) if terms is None else terms
    id_list = None if ids is None else sorted({int(i) for i in ids})
    if not terms or id_list == []:
        return {}
    params: dict[str, object] = {"model": model_id, "limit": limit}
    where = ["e.model = :model"]
    if min_created is not None:
        where.append("e.created_at >= :min_created")
        params["min_created"] = min_created
    if id_list is not None:
        # Integers formatted by us, never text from the query.
        where.append(f"e.id IN ({', '.join(str(i) for i in id_list)})")
    if session.get_bind().dialect.name == "sqlite":
        params["match"] = fts5_match(terms)
        sql = f"""
            SELECT f.rowid AS id, -bm25(episode_fts, {SUMMARY_WEIGHT}, {CONVERSATION_WEIGHT}) AS score
            FROM episode_fts AS f JOIN episode_summaries AS e ON e.id = f.rowid
            WHERE episode_fts MATCH :match AND {" AND ".join(where)}
            ORDER BY score DESC, f.rowid DESC LIMIT :limit"""
    else:
        params["tsquery"] = tsquery_text(terms)
        sql = f"""
            SELECT f.episode_id AS id, ts_rank('{_PG_WEIGHTS}', f.document, q.query, 1) AS score
            FROM episode_fts AS f
            JOIN episode_summaries AS e ON e.id = f.episode_id,
            to_tsquery('english', :tsquery) AS q(query)
            WHERE f.document @@ q.query AND {" AND ".join(where)}
            ORDER BY score DESC, f.episode_id DESC LIMIT :limit"""
    rows = session.execute(text(sql), params).all()
    return {int(r.id): float(r.score) for r in rows if r.score > 0}


def sqlite_tokens(session: Session, words: list[str]) -> dict[str, tuple[str, ...]]:
    """Each word as the index's tokenizer makes it, read back through a per-connection temporary
    FTS5 table with the same tokenizer (SQLite has no tokenize() function). Cached: the mapping
    depends only on the tokenizer."""
    missing = [w for w in words if w not in _token_cache]
    if missing:
        for sql in (
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.caesar_query_fts USING fts5(word, tokenize = '{SQLITE_TOKENIZE}')",
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.caesar_query_vocab USING fts5vocab(temp, caesar_query_fts, 'instance')",
            "DELETE FROM temp.caesar_query_fts",
        ):
            session.execute(text(sql))
        session.execute(
            text("INSERT INTO temp.caesar_query_fts (rowid, word) VALUES (:i, :w)"),
            [{"i": i, "w": w} for i, w in enumerate(missing)],
        )
        sql = "SELECT doc, term FROM temp.caesar_query_vocab ORDER BY doc, offset"
        tokens: dict[int, list[str]] = {}
        for doc, term in session.execute(text(sql)):
            tokens.setdefault(int(doc), []).append(str(term))
        session.execute(text("DELETE FROM temp.caesar_query_fts"))
        if len(_token_cache) + len(missing) > _TOKEN_CACHE_SIZE:
            _token_cache.clear()
        _token_cache.update((w, tuple(tokens.get(i, ()))) for i, w in enumerate(missing))
    return {w: _token_cache[w] for w in words}


def term_counts(session: Session, terms: list[str]) -> tuple[int, list[int]]:
    """(indexed episodes, [episodes containing each term]), by the index's own tokenizer, so
    stemming and stop words agree with the keyword search. SQLite reads the counts from the
    index's vocabulary (episode_fts_vocab, one indexed lookup) and the total from FTS5's docsize
    table (count(*) on episode_fts reads every row: ~35 ms at 100k episodes)."""
    sqlite = session.get_bind().dialect.name == "sqlite"
    total = "SELECT count(*) FROM episode_fts" + ("_docsize" if sqlite else "")
    n = int(session.execute(text(total)).scalar() or 0)
    if sqlite and terms:
        tokens = sqlite_tokens(session, terms)
        single = {f"t{i}": t[0] for i, t in enumerate(set(tokens.values())) if len(t) == 1}
        sql = f"SELECT term, doc FROM episode_fts_vocab WHERE term IN ({', '.join(':' + k for k in single)})"
        docs = (
            {str(r.term): int(r.doc) for r in session.execute(text(sql), single)} if single else {}
        )
        # A word the tokenizer splits in several tokens (or none) is counted as a phrase.
        per_term = "SELECT count(*) FROM episode_fts WHERE episode_fts MATCH :term"
        return n, [
            docs.get(tokens[t][0], 0)
            if len(tokens[t]) == 1
            else int(session.execute(text(per_term), {"term": fts5_match([t])}).scalar() or 0)
            for t in terms
        ]
    per_term = "SELECT count(*) FROM episode_fts WHERE document @@ to_tsquery('english', :term)"
    return n, [
        int(session.execute(text(per_term), {"term": tsquery_text([t])}).scalar() or 0)
        for t in terms
    ]


def probe_contains(session: Session, terms: list[str], probe_id: int) -> list[bool]:
    """Whether episode `probe_id` contains each term (by the index's tokenizer)."""
    if session.get_bind().dialect.name == "sqlite":
        sql = "SELECT count(*) FROM episode_fts WHERE episode_fts MATCH :term AND rowid = :probe"
        arg = fts5_match
    else:
        sql = (
            "SELECT count(*) FROM episode_fts "
            "WHERE episode_id = :probe AND document @@ to_tsquery('english', :term)"
        )
        arg = tsquery_text
    return [
        bool(session.execute(text(sql), {"term": arg([t]), "probe": probe_id}).scalar())
        for t in terms
    ]


def term_document_counts(
    session: Session, terms: list[str], probe_id: int
) -> tuple[int, list[tuple[int, bool]]]:
    """(indexed episodes, [(episodes containing the term, whether `probe_id` does)])."""
    total, counts = term_counts(session, terms)
    return total, list(zip(counts, probe_contains(session, terms, probe_id), strict=True))


def match_terms(terms: list[str], total: int, counts: list[int]) -> list[str]:
    """The query terms worth matching: those found somewhere, less the common ones — in at
    least COMMON_MIN_DOCS episodes with an idf under COMMON_IDF_SHARE of the query's most
    informative word's. Relative, because in a small history every word has a similar idf and
    all of them matter. Measured with the floor off (rule forced on every haystack of
    bench/recall_quality.py): LoCoMo R@5 −0.005, MRR −0.006, LongMemEval unchanged; an absolute
    cut (words in > 10 % of episodes) lost 0.2 R@5 on LoCoMo. Pure."""
    found = [(t, n) for t, n in zip(terms, counts, strict=True) if n > 0]
    top = max((_idf(total, n) for _, n in found), default=0.0)
    return [t for t, n in found if n < COMMON_MIN_DOCS or _idf(total, n) >= COMMON_IDF_SHARE * top]


def _idf(total: int, n: int) -> float:
    """BM25's idf, kept positive (as `coverage` weighs words)."""
    return math.log(1.0 + (total - n + 0.5) / (n + 0.5))


def coverage(total: int, counts: list[tuple[int, bool]]) -> float:
    """Share of the query's information an episode holds: Σ idf of the query terms it contains
    over Σ idf of all query terms found anywhere (idf = ln(1 + (N − n + ½) / (n + ½)), BM25's,
    kept positive). Terms in no episode are left out: PostgreSQL drops its stop words that way
    and SQLite simply finds them nowhere. Pure; ∈ [0, 1]."""
    weights = [(_idf(total, n), has) for n, has in counts if n > 0]
    mass = sum(w for w, _ in weights)
    return sum(w for w, has in weights if has) / mass if mass > 0 else 0.0


def keyword_relevance(scores: dict[int, float], strength: float) -> dict[int, float]:
    """Each score as a share of the best one (BM25 and ts_rank scales differ and depend on the
    corpus), times the best match's `coverage`: so an episode that only shares a common word
    with the query stays near 0 however it ranks, and one holding all its rare words nears 1."""
    best = max(scores.values(), default=0.0)
    if best <= 0:
        return {}
    return {i: min(max(s / best, 0.0), 1.0) * strength for i, s in scores.items()}


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


# -- the search ---------------------------------------------------------------------------------
# Candidates taken from each side before fusing: the best by dense score and the best by
# keyword score. An episode in neither pool has both a low cosine and a low keyword score.
MIN_POOL = 50


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


@dataclass(frozen=True)
class HybridHit:
    """One recalled episode and every number behind its place (for the audit row)."""

    episode_id: int
    audit_log_id: int
    summary: str
    created_at: datetime
    recall_count: int
    cosine: float
    keyword: float  # normalised keyword relevance ∈ [0, 1]; 0 = no keyword match
    relevance: float  # fuse(cosine, keyword): what the threshold applies to
    age_days: float
    freshness: float
    recall_weight: float
    score: float  # relevance × freshness × recall_weight


def rank_candidates(
    rows: list[tuple[int, int, str, datetime, int]],
    cosine: dict[int, float],
    keyword: dict[int, float],
    now: datetime,
    params: HybridParams,
) -> list[HybridHit]:
    """Pure: (id, audit_log_id, summary, created_at, recall_count) rows with their cosine and
    normalised keyword score → the top K by relevance × freshness × recall_weight, keeping
    only rows whose relevance clears the threshold. Ties: newer episode id first."""
    if not rows:
        return []
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    cos = np.array([cosine[int(i)] for i in ids], dtype=np.float64)
    kw = np.array([keyword.get(int(i), 0.0) for i in ids], dtype=np.float64)
    relevance = fuse(cos, kw, method=params.fusion, keyword_weight=params.keyword_weight)
    age = np.array([(now - r[3]).total_seconds() / SECONDS_PER_DAY for r in rows])
    fresh = freshness_v(age, params.halflife_days)
    weight = recall_weight_v(
        np.array([r[4] for r in rows], dtype=np.float64), params.recall_weight_scale
    )
    score = relevance * fresh * weight
    keep = np.ones(len(rows), dtype=bool)
    if params.similarity_threshold is not None:
        keep &= relevance >= params.similarity_threshold
    order = [i for i in np.lexsort((-ids, -score)) if keep[i]][: params.top_k]
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
        )
        for i in order
    ]


def hybrid_search(
    session: Session,
    index: Any,
    query_text: str,
    query_vector: np.ndarray,
    now: datetime,
    params: HybridParams,
) -> list[HybridHit]:
    """Recall by fused relevance. `index` is the episodes' VectorIndex (memory/vectors.py):
    it supplies the dense pool; the database supplies the keyword pool, the rows, and the
    vectors of keyword-only candidates."""
    pool = max(MIN_POOL, 4 * params.top_k)
    min_created = None if params.max_age_days is None else now - timedelta(days=params.max_age_days)
    now_s = epoch_seconds(now)

    def decayed(cos: np.ndarray, created: np.ndarray, recalls: np.ndarray) -> np.ndarray:
        age = (now_s - created) / SECONDS_PER_DAY
        return (
            cos
            * freshness_v(age, params.halflife_days)
            * recall_weight_v(recalls, params.recall_weight_scale)
        )

    index.refresh(session)
    hits = index.search(
        query_vector,
        limit=pool,
        min_created=None if min_created is None else epoch_seconds(min_created),
        rank=decayed,
        # freshness ≤ 1 and recall_weight ≤ its value at the largest count (lets an
        # approximate stage of the index stop early without changing the result)
        factor_range=(0.0, recall_weight(index.max_recall_count, params.recall_weight_scale)),
    )
    cosine = {int(i): float(c) for i, c in zip(hits.ids, hits.cosine, strict=True)}
    keyword: dict[int, float] = {}
    terms = query_terms(query_text)
    if params.fusion != "dense" and terms:
        total, counts = term_counts(session, terms)
        matched = match_terms(terms, total, counts)
        if matched:
            keyword = keyword_scores(
                session,
                query_text,
                model_id=index.model_id,
                limit=pool,
                min_created=min_created,
                terms=matched,
            )
        unscored = [i for i in cosine if i not in keyword]
        if keyword and unscored:
            keyword.update(
                keyword_scores(
                    session,
                    query_text,
                    model_id=index.model_id,
                    limit=len(unscored),
                    ids=unscored,
                    terms=matched,
                )
            )
        if keyword:
            best_id = max(keyword, key=lambda i: (keyword[i], i))
            has = probe_contains(session, terms, best_id)
            keyword = keyword_relevance(
                keyword, coverage(total, list(zip(counts, has, strict=True)))
            )
    ids = sorted(set(cosine) | set(keyword))
    if not ids:
        return []
    rows = session.execute(
        select(
            EpisodeSummary.id,
            EpisodeSummary.audit_log_id,
            EpisodeSummary.summary,
            EpisodeSummary.created_at,
            EpisodeSummary.recall_count,
            EpisodeSummary.embedding_f32,
            EpisodeSummary.embedding,
        ).where(EpisodeSummary.id.in_(ids), EpisodeSummary.summary != "")
    ).all()
    query = np.asarray(query_vector, dtype=np.float32)
    for r in rows:
        if r.id not in cosine:  # a keyword-only candidate: score its vector here
            vector = from_row(r.embedding_f32, r.embedding)
            cosine[r.id] = float(vector @ query) if vector.shape == query.shape else 0.0
    return rank_candidates([tuple(r[:5]) for r in rows], cosine, keyword, now, params)  # type: ignore[misc]
