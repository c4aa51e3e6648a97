"""PostgreSQL's search backend: `tsvector` full text (`ts_rank`) and, for now, the in-process
vector index (pgvector next: issue #24).

Tables (migrations 0002, 0005): `episode_fts` holds each episode's GIN-indexed tsvector
(summary labelled A, conversation B; trigger-maintained), `episode_window_fts` one tsvector per
3-turn window (episode_id, window_no), written by the windows' writer; both go with their
episode (ON DELETE CASCADE).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.orm import Session

from caesar.memory.search.in_process import InProcessVectors
from caesar.memory.search.sql import (
    all_exist,
    by_window,
    count,
    episode_filters,
    owned,
    person_episodes,
    statement,
)

# ts_rank weights for labels {D, C, B, A}; A = summary, B = conversation: a word in the
# summary counts double one in the conversation, as on SQLite.
_WEIGHTS = "{0.1, 0.2, 0.5, 1.0}"


def tsquery_text(terms: Iterable[str], *, every: bool = False) -> str:
    """A to_tsquery() argument: any of the terms, or every one (letters and digits only)."""
    return (" & " if every else " | ").join(terms)


# ts_rank weighs every query word alike: it has no idf. Over an any-word query a conversation
# that says "Melanie" and "go" often outranked the one holding the question's rare word
# ("museum"), which bm25 (SQLite) ranks first; LoCoMo's dev figures on PostgreSQL fell behind
# SQLite's by 0.09 (answer in prompt 0.682 against 0.769). So each word is ranked alone and
# weighed by its idf among the person's episodes — BM25's, as `keywords.coverage` weighs
# words — all in one statement: `_IDF` (a CTE) and `_idf_rank`.
def _idf_cte(terms: Sequence[str]) -> str:
    """A CTE `w` with each term's idf (`w0`, `w1`, …) among `:person`'s episodes; the terms
    are the parameters `:t0`, `:t1`, …"""
    counts = ", ".join(
        "(SELECT count(*) FROM episode_fts WHERE person_id = :person "
        f"AND document @@ to_tsquery('english', :t{i})) AS d{i}"
        for i in range(len(terms))
    )
    idfs = ", ".join(
        f"ln(1.0 + (c.n - c.d{i} + 0.5) / (c.d{i} + 0.5)) AS w{i}" for i in range(len(terms))
    )
    total = "(SELECT count(*) FROM episode_fts WHERE person_id = :person)::float8 AS n"
    return f"w AS (SELECT {idfs} FROM (SELECT {total}, {counts}) AS c)"


def _idf_rank(terms: Sequence[str], document: str, weights: str = "") -> str:
    """Σ idf × ts_rank of each term alone (normalisation 1: by the log of the length)."""
    return " + ".join(
        f"w.w{i} * ts_rank({weights}{document}, to_tsquery('english', :t{i}), 1)"
        for i in range(len(terms))
    )


def _term_params(terms: Sequence[str]) -> dict[str, object]:
    return {f"t{i}": tsquery_text([t]) for i, t in enumerate(terms)}


class PostgresFullText:
    """`FullTextSearch` (memory/search/backend.py) over tsvector columns."""

    def keyword_scores(
        self,
        session: Session,
        terms: Sequence[str],
        *,
        person: int,
        limit: int,
        model_id: str | None = None,
        ids: Sequence[int] | None = None,
        min_created: datetime | None = None,
        min_id: int | None = None,
        every: bool = False,
    ) -> dict[int, float]:
        # the person is on the row (migration 0012): their matches only, no join to find them
        join, where, params = episode_filters(
            "f.episode_id",
            person=None,
            model_id=model_id,
            min_created=min_created,
            min_id=min_id,
        )
        where.append("f.person_id = :person")
        params.update(limit=limit, tsquery=tsquery_text(terms), person=person)
        params.update(_term_params(terms))
        if ids is not None:
            params["ids"] = list(ids)
            where.append("f.episode_id IN :ids")
        if every:  # filtered by the all-words query, ranked by the any-word one (as ever)
            params["every"] = tsquery_text(terms, every=True)
            where.append("f.document @@ to_tsquery('english', :every)")
        score = _idf_rank(terms, "f.document", f"'{_WEIGHTS}', ")
        sql = f"""
            WITH {_idf_cte(terms)}
            SELECT f.episode_id AS id, {score} AS score FROM episode_fts AS f {" ".join(join)}
            , to_tsquery('english', :tsquery) AS q(query), w
            WHERE {" AND ".join(["f.document @@ q.query", *where])}
            ORDER BY score DESC, f.episode_id DESC LIMIT :limit"""
        rows = session.execute(statement(sql, *(("ids",) if ids is not None else ())), params)
        return {int(i): float(score) for i, score in rows if score > 0}

    def term_counts(
        self, session: Session, terms: Sequence[str], *, person: int
    ) -> tuple[int, list[int]]:
        """The person's episodes only: how common a word is in others' never moves a rank.
        The person is on the row (migration 0012): one statement, their rows only."""
        params: dict[str, object] = {"person": person}
        counts = ["(SELECT count(*) FROM episode_fts WHERE person_id = :person)"]
        for i, term in enumerate(terms):
            params[f"t{i}"] = tsquery_text([term])
            counts.append(
                "(SELECT count(*) FROM episode_fts WHERE person_id = :person "
                f"AND document @@ to_tsquery('english', :t{i}))"
            )
        n, *found = session.execute(statement(f"SELECT {', '.join(counts)}"), params).one()
        return int(n), [int(c) for c in found]

    def probe_contains(
        self, session: Session, terms: Sequence[str], probe_id: int, *, person: int
    ) -> list[bool]:
        if not owned(session, [probe_id], person):
            return [False] * len(terms)
        params: dict[str, object] = {"probe": probe_id}
        checks = []
        for i, term in enumerate(terms):
            params[f"t{i}"] = tsquery_text([term])
            checks.append(
                "EXISTS (SELECT 1 FROM episode_fts "
                f"WHERE episode_id = :probe AND document @@ to_tsquery('english', :t{i}))"
            )
        return all_exist(session, checks, params)

    def count_holding_all(self, session: Session, terms: Sequence[str], *, person: int) -> int:
        sql = (
            "SELECT count(*) FROM episode_fts "
            "WHERE person_id = :person AND document @@ to_tsquery('english', :q)"
        )
        return count(session, sql, {"q": tsquery_text(terms, every=True), "person": person})

    def indexed_id_range(self, session: Session, *, person: int) -> tuple[int, int]:
        _n, lo, hi = person_episodes(session, person)
        return lo, hi

    def window_scores(
        self, session: Session, terms: Sequence[str], ids: Sequence[int], *, person: int
    ) -> dict[int, dict[int, float]]:
        """Each term's ts_rank weighed by its idf among the person's episodes, as the episode
        level."""
        ids = owned(session, ids, person)
        if not ids:
            return {}
        sql = f"""
            WITH {_idf_cte(terms)}
            SELECT f.episode_id, f.window_no, {_idf_rank(terms, "f.document")}
            FROM episode_window_fts AS f, to_tsquery('english', :tsquery) AS q(query), w
            WHERE f.episode_id IN :ids AND f.document @@ q.query"""
        params = {"tsquery": tsquery_text(terms), "ids": list(ids), "person": person}
        params.update(_term_params(terms))
        return by_window(session.execute(statement(sql, "ids"), params).all())

    def has_windows(self, session: Session, episode_id: int) -> bool:
        sql = "SELECT 1 FROM episode_window_fts WHERE episode_id = :id LIMIT 1"
        return session.execute(statement(sql), {"id": episode_id}).first() is not None

    def add_windows(self, session: Session, episode_id: int, windows: Sequence[str]) -> int:
        sql = (
            "INSERT INTO episode_window_fts (episode_id, window_no, document) "
            "VALUES (:id, :k, to_tsvector('english', :body)) ON CONFLICT DO NOTHING"
        )
        rows = [{"id": episode_id, "k": k, "body": w} for k, w in enumerate(windows)]
        session.execute(text(sql), rows)
        return len(rows)

    def forget_windows(self, session: Session, episode_ids: Sequence[int]) -> int:
        return 0  # ON DELETE CASCADE: they go with their episode


class PostgresSearch(InProcessVectors, PostgresFullText):
    """PostgreSQL's `SearchBackend`: tsvector and the in-process vector index."""
