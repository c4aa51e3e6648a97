"""PostgreSQL's full-text search: `tsvector`, the episodes and their windows ranked by BM25 as
SQLite's FTS5 ranks them (`_bm25`), and `PostgresSearch`, that with the in-process vector index
(a database without pgvector; memory/engine/pgvector.py is the backend with it).

Tables (migrations 0002, 0005): `episode_fts` holds each episode's GIN-indexed tsvector
(summary labelled A, conversation B; trigger-maintained), `episode_window_fts` one tsvector per
3-turn window (episode_id, window_no), written by the windows' writer; both go with their
episode (ON DELETE CASCADE); `episode_fts_counts` each person's number of `episode_fts` rows,
kept by statement triggers (migration 0014), and `episode_fts_words` each person's number of
rows per word, kept by triggers too once the person's older words are counted (migration 0016,
memory/engine/pg_words.py). Words are cut as FTS5 cuts them: the text search
configuration `FTS_CONFIG` (migration 0015: unaccented, Porter-stemmed, no stop words), each
row's number of words in its column `tokens` (set by a trigger; `TOKENS`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.orm import Session

from caesar.memory.engine.in_process import InProcessVectors
from caesar.memory.engine.pg_words import WORDS as FTS_CONFIG  # migration 0015
from caesar.memory.engine.sql import (
    all_exist,
    by_window,
    count,
    driver_rows,
    episode_filters,
    marks,
    owned,
    person_episodes,
    statement,
)
from caesar.memory.scope import Scope

# ts_rank_cd weights for labels {D, C, B, A}; A = summary, B = conversation: a word in the
# summary counts double one in the conversation, as on SQLite (SUMMARY_WEIGHT). PostgreSQL
# takes weights up to 1, so the sum is doubled (`_bm25`).
_WEIGHTS = "{0.5, 0.5, 0.5, 1.0}"
# BM25's constants, as SQLite's FTS5 `bm25()` has them.
K1 = 1.2
B = 0.75


def tsquery_text(terms: Iterable[str], *, every: bool = False) -> str:
    """A to_tsquery() argument: any of the terms, or every one (letters and digits only)."""
    return (" & " if every else " | ").join(terms)


# ts_rank weighs every query word alike: it has no idf. Over an any-word query a conversation
# that says "Melanie" and "go" often outranked the one holding the question's rare word
# ("museum"), which bm25 (SQLite) ranks first; LoCoMo's dev figures on PostgreSQL fell behind
# SQLite's by 0.09 (answer in prompt 0.682 against 0.769). So each word is ranked alone and
# weighed by its idf, by BM25: episodes among the person's (`_bm25`), windows among the
# candidates' (`window_bm25`). The episodes' idfs come from `term_counts`, which the keyword
# stage runs first in the same read transaction: they are kept on the session (under `_IDF`)
# and read back, not counted again (counting them in each scoring statement cost a household
# of 100 × 1,000 episodes +14 ms a turn).
_IDF = "caesar.pg_idf"
# A row's number of words (migration 0015), or its distinct words where that is not counted
# yet (a row from before it, not indexed again yet: memory/engine/pg_words.py).
TOKENS = "coalesce({0}tokens, length({0}document))"
# BM25's mean document length (`_AVGDL` on the session, per person) is read from the person's
# latest this many episodes, by their index: an exact mean would read every one of them.
AVGDL_SAMPLE = 1000
_AVGDL = "caesar.pg_avgdl"


# Whether the person's words are counted in `episode_fts_words` (migration 0016): a person with
# no episodes has no counter row, and nothing to count.
_WORDS_COUNTED = (
    "coalesce((SELECT words_counted FROM episode_fts_counts WHERE person_id = :person), true)"
)


def bm25_idf(total: int, n: int) -> float:
    """BM25's idf of a word in `n` of `total` documents, kept positive."""
    return math.log(1.0 + (total - n + 0.5) / (n + 0.5))


def fts5_idf(total: int, n: int) -> float:
    """FTS5 `bm25()`'s idf: ln((N − n + 0.5) / (n + 0.5)), at least 1e-6 (a word in over half
    of the documents counts next to nothing)."""
    idf = math.log((total - n + 0.5) / (n + 0.5)) if total > 0 else 0.0
    return max(idf, 1e-6)


def _bm25(terms: Sequence[str]) -> tuple[str, str]:
    """The episodes' score: BM25 as FTS5's `bm25()` computes it,
    Σ idf × tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl)), where a term's tf is its occurrences
    weighed by label (`ts_rank_cd` of the term alone is that sum), dl the row's number of words
    (`tokens`) and idf FTS5's (`fts5_idf`). Returns (the columns an inner SELECT over `f`
    computes: `k` and `tf0`, `tf1`, …; the score over them, for the outer SELECT over `s`).
    Parameters: `:avgdl`, and each term's idf and tsquery, `:w0`, `:t0`, `:w1`, ….
    With migration 0015's words, LongMemEval dev's figures equal SQLite's
    (docs/recall-quality.md, "Shipped (seventh session)")."""
    columns = [f"{K1} * ({1 - B} + {B} * {TOKENS.format('f.')} / CAST(:avgdl AS float8)) AS k"]
    score = []
    for i in range(len(terms)):
        columns.append(
            f"2 * ts_rank_cd('{_WEIGHTS}', f.document, to_tsquery('{FTS_CONFIG}', :t{i})) AS tf{i}"
        )
        score.append(f"CAST(:w{i} AS float8) * s.tf{i} * {K1 + 1} / (s.tf{i} + s.k)")
    return ", ".join(columns), " + ".join(score)


def window_bm25(rows: Sequence[Sequence[float]]) -> list[tuple[int, int, float]]:
    """(episode id, window number, BM25) of the windows that hold a query word, from every
    candidate window's (episode id, window number, words, each query word's occurrences):
    FTS5's formula (`_bm25`, unlabelled words) with N, each word's n and the mean length
    counted over `rows`. Pure."""
    if not rows:
        return []
    terms = len(rows[0]) - 3
    avgdl = sum(float(r[2]) for r in rows) / len(rows) or 1.0
    idfs = [fts5_idf(len(rows), sum(1 for r in rows if r[3 + i] > 0)) for i in range(terms)]
    scored = []
    for episode, window, tokens, *tfs in rows:
        k = K1 * (1 - B + B * float(tokens) / avgdl)
        score = sum(
            idf * tf * (K1 + 1) / (tf + k) for idf, tf in zip(idfs, tfs, strict=True) if tf > 0
        )
        if score > 0:
            scored.append((int(episode), int(window), score))
    return scored


class PostgresFullText:
    """`FullTextSearch` (memory/engine/backend.py) over tsvector columns."""

    def keyword_scores(
        self,
        scope: Scope,
        terms: Sequence[str],
        *,
        limit: int,
        model_id: str | None = None,
        ids: Sequence[int] | None = None,
        min_created: datetime | None = None,
        min_id: int | None = None,
        every: bool = False,
    ) -> dict[int, float]:
        # the person is on the row (migration 0012): their matches only, no join to find them
        session, person = scope.session, scope.person
        join, where, params = episode_filters(
            "f.episode_id",
            model_id=model_id,
            min_created=min_created,
            min_id=min_id,
        )
        # the person written into the statement: the planner takes their partial GIN index
        # (person_tables.py) only for a predicate it can see
        where.append(f"f.person_id = {int(person)}")
        params.update(limit=limit, tsquery=tsquery_text(terms))
        for i, (idf, tsquery) in enumerate(self._weighed(scope, terms)):
            params.update({f"w{i}": idf, f"t{i}": tsquery})
        if ids is not None:
            params["ids"] = list(ids)
            where.append("f.episode_id IN :ids")
        if every:  # filtered by the all-words query, ranked by the any-word one (as ever)
            params["every"] = tsquery_text(terms, every=True)
            where.append(f"f.document @@ to_tsquery('{FTS_CONFIG}', :every)")
        params["avgdl"] = session.info[_AVGDL][person]  # counted with the idfs (_weighed)
        columns, score = _bm25(terms)
        sql = f"""
            SELECT s.id, {score} AS score FROM (
                SELECT f.episode_id AS id, {columns} FROM episode_fts AS f {" ".join(join)}
                , to_tsquery('{FTS_CONFIG}', :tsquery) AS q(query)
                WHERE {" AND ".join(["f.document @@ q.query", *where])}) AS s
            ORDER BY score DESC, s.id DESC LIMIT :limit"""
        rows = session.execute(statement(sql, *(("ids",) if ids is not None else ())), params)
        return {int(i): float(score) for i, score in rows if score > 0}

    def term_counts(self, scope: Scope, terms: Sequence[str]) -> tuple[int, list[int]]:
        """The person's episodes only: how common a word is in others' never moves a rank.
        One statement. Their total is kept by triggers (migration 0014), and so are their
        words' counts (migration 0016); until their older episodes' words are counted
        (pg_words.count_words), each word's are counted among their rows (the person is on
        the row: migration 0012)."""
        session, person = scope.session, scope.person
        params: dict[str, object] = {"person": person}
        counts = [
            # kept by triggers (migration 0014): a count here read all of the person's rows
            "coalesce((SELECT documents FROM episode_fts_counts WHERE person_id = :person), 0)",
            f"(SELECT avg({TOKENS.format('')}) FROM (SELECT tokens, document FROM episode_fts "
            f"WHERE person_id = :person ORDER BY episode_id DESC LIMIT {AVGDL_SAMPLE}) AS d)",
        ]
        for i, term in enumerate(terms):
            params[f"t{i}"] = tsquery_text([term])
            counts.append(
                # a word of one lexeme, where the person's words are counted: one row of their
                # vocabulary (migration 0016); else (their older episodes not counted yet, the
                # query word cut in several lexemes) the rows of the GIN index that hold it
                f"(CASE WHEN {_WORDS_COUNTED} AND cardinality(tsvector_to_array("
                f"to_tsvector('{FTS_CONFIG}', :t{i}))) <= 1 "
                "THEN (SELECT coalesce(sum(documents), 0) FROM episode_fts_words "
                "WHERE person_id = :person AND word = ANY(tsvector_to_array("
                f"to_tsvector('{FTS_CONFIG}', :t{i})))) "
                f"ELSE (SELECT count(*) FROM episode_fts WHERE person_id = {int(person)} "
                f"AND document @@ to_tsquery('{FTS_CONFIG}', :t{i})) END)"
            )
        n, avgdl, *found = session.execute(statement(f"SELECT {', '.join(counts)}"), params).one()
        session.info.setdefault(_AVGDL, {})[person] = float(avgdl or 1.0)
        idf = session.info.setdefault(_IDF, {})
        for term, c in zip(terms, found, strict=True):
            idf[(person, term)] = fts5_idf(int(n), int(c))
        return int(n), [int(c) for c in found]

    def _weighed(self, scope: Scope, terms: Sequence[str]) -> list[tuple[float, str]]:
        """The parameters of `_bm25`: each term's idf and its tsquery. The idfs and the mean
        lengths are counted once a transaction (`term_counts` keeps them on the session)."""
        session, person = scope.session, scope.person
        missing = [t for t in terms if (person, t) not in session.info.get(_IDF, {})]
        if missing or person not in session.info.get(_AVGDL, {}):
            self.term_counts(scope, missing)
        idf = session.info.get(_IDF, {})
        return [(idf[(person, term)], tsquery_text([term])) for term in terms]

    def probe_contains(self, scope: Scope, terms: Sequence[str], probe_id: int) -> list[bool]:
        session = scope.session
        if not owned(scope, [probe_id]):
            return [False] * len(terms)
        params: dict[str, object] = {"probe": probe_id}
        checks = []
        for i, term in enumerate(terms):
            params[f"t{i}"] = tsquery_text([term])
            checks.append(
                "EXISTS (SELECT 1 FROM episode_fts "
                f"WHERE episode_id = :probe AND document @@ to_tsquery('{FTS_CONFIG}', :t{i}))"
            )
        return all_exist(session, checks, params)

    def count_holding_all(self, scope: Scope, terms: Sequence[str]) -> int:
        session, person = scope.session, scope.person
        sql = (
            "SELECT count(*) FROM episode_fts "
            f"WHERE person_id = {int(person)} AND document @@ to_tsquery('{FTS_CONFIG}', :q)"
        )
        return count(session, sql, {"q": tsquery_text(terms, every=True)})

    def indexed_id_range(self, scope: Scope) -> tuple[int, int]:
        _n, lo, hi = person_episodes(scope)
        return lo, hi

    def window_scores(
        self, scope: Scope, terms: Sequence[str], ids: Sequence[int]
    ) -> dict[int, dict[int, float]]:
        """BM25 as FTS5's over the windows (`window_bm25`), with the statistics of the
        candidates' windows: all of them are read (their words counted by the tsvector's
        index, ~10 a candidate). FTS5 takes the whole table's; counting a word's windows in a
        person's ~1M took 60–490 ms a word here (once per query word, every turn). The
        candidates are what the windows re-rank, and on a history of up to ~50 conversations
        they are all of it, so the dev sets' figures equal SQLite's."""
        session = scope.session
        ids = owned(scope, ids)
        if not ids or not terms:
            return {}
        # sent to the driver as written: this runs on every turn (see driver_rows)
        mark = marks(session, 1)
        counts = ", ".join(
            f"ts_rank_cd('{{1, 1, 1, 1}}', document, to_tsquery('{FTS_CONFIG}', {mark}))"
            for _ in terms
        )
        sql = f"""
            SELECT episode_id, window_no, {TOKENS.format("")}, {counts} FROM episode_window_fts
            WHERE episode_id IN ({marks(session, len(ids))})"""
        params = [*(tsquery_text([term]) for term in terms), *ids]
        return by_window(window_bm25(driver_rows(session, sql, params)))

    def has_windows(self, session: Session, episode_id: int) -> bool:
        sql = "SELECT 1 FROM episode_window_fts WHERE episode_id = :id LIMIT 1"
        return session.execute(statement(sql), {"id": episode_id}).first() is not None

    def add_windows(self, session: Session, episode_id: int, windows: Sequence[str]) -> int:
        sql = (
            "INSERT INTO episode_window_fts (episode_id, window_no, document) "
            f"VALUES (:id, :k, to_tsvector('{FTS_CONFIG}', :body)) ON CONFLICT DO NOTHING"
        )
        rows = [{"id": episode_id, "k": k, "body": w} for k, w in enumerate(windows)]
        session.execute(text(sql), rows)
        return len(rows)

    def forget_windows(self, session: Session, episode_ids: Sequence[int]) -> int:
        return 0  # ON DELETE CASCADE: they go with their episode


class PostgresSearch(InProcessVectors, PostgresFullText):
    """PostgreSQL's `SearchBackend`: tsvector and the in-process vector index."""
