"""Keyword relevance of a conversation's best window (issue #6), next to the whole episode's.

Why: BM25 over a whole conversation is diluted when a question is about one exchange in a
20-turn chat — a long episode that mentions the words here and there outscores the one where
they meet. Scoring the same 3-turn windows the dense side uses (memory/search/passages.py) and taking
an episode's best ("MaxP") puts that exchange back on top. Measured on LoCoMo (decay off):
the mean of the episode-level and the best-window keyword relevance lifted MRR 0.783 → 0.807,
R@5 0.920 → 0.922; LongMemEval unchanged (docs/recall-quality.md has every variant tried).

The index holds each window's words only (SQLite: a contentless FTS5 table, ~5–9 KiB an
episode; PostgreSQL: a tsvector per window). It is a re-ranking signal, like the window
vectors: recall scores the windows of its candidates only, never searches the table for new
ones. Rows are written by whoever writes an episode's window vectors (the `memory.passages`
worker, `caesar episodes reembed`), in the same transaction, once per episode.

Deletes: PostgreSQL's rows go with their episode (ON DELETE CASCADE). SQLite's contentless
table drops a row only when given the text it indexed (SQLite < 3.43 has no
`contentless_delete`), so retention calls `forget_windows` before it deletes chats: the
windows are derived again from the chat, which the audit log never changes. That is why
`passages.windows` must not change without a migration that rebuilds this index.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from caesar.db.models import AuditLog, EpisodeSummary
from caesar.memory.search import passages
from caesar.memory.search.keywords import (
    driver_rows,
    fts5_match,
    is_sqlite,
    marks,
    statement,
    tsquery_text,
)
from caesar.memory.transcript import conversation_turns

# SQLite rowid of window k of episode e: e × WINDOW_SLOTS + k, so an episode's windows are one
# rowid range (FTS5 seeks a range; it restarts for every value of an IN list).
WINDOW_SLOTS = 64
assert passages.MAX_WINDOWS <= WINDOW_SLOTS


def rowids(episode_id: int) -> range:
    """The SQLite rowids episode `episode_id`'s windows may take, in window order. Pure."""
    return range(episode_id * WINDOW_SLOTS, (episode_id + 1) * WINDOW_SLOTS)


def sqlite_rows(episode_id: int, windows: Sequence[str]) -> list[dict[str, object]]:
    """Parameters for the windows' rows of the SQLite table (rowid, body). Pure."""
    return [{"rowid": r, "body": w} for r, w in zip(rowids(episode_id), windows, strict=False)]


def has_windows(session: Session, episode_id: int) -> bool:
    if is_sqlite(session):
        span = rowids(episode_id)
        sql = "SELECT 1 FROM episode_window_fts WHERE rowid BETWEEN :lo AND :hi LIMIT 1"
        params = {"lo": span[0], "hi": span[-1]}
    else:
        sql = "SELECT 1 FROM episode_window_fts WHERE episode_id = :id LIMIT 1"
        params = {"id": episode_id}
    return session.execute(statement(sql), params).first() is not None


def index_windows(session: Session, episode_id: int, windows: Sequence[str]) -> int:
    """Index the episode's window texts (passages.windows) unless it has some already — so a
    re-embed, or two workers racing, never index an episode twice. Returns rows written."""
    windows = list(windows)[:WINDOW_SLOTS]
    if not windows or has_windows(session, episode_id):
        return 0
    if is_sqlite(session):
        sql = "INSERT INTO episode_window_fts (rowid, body) VALUES (:rowid, :body)"
        rows = sqlite_rows(episode_id, windows)
    else:
        sql = (
            "INSERT INTO episode_window_fts (episode_id, window_no, document) "
            "VALUES (:id, :k, to_tsvector('english', :body)) ON CONFLICT DO NOTHING"
        )
        rows = [{"id": episode_id, "k": k, "body": w} for k, w in enumerate(windows)]
    session.execute(text(sql), rows)
    return len(rows)


def forget_windows(session: Session, episode_ids: Sequence[int]) -> int:
    """Remove the windows' words of episodes about to be deleted (with their chats), in the
    caller's transaction. Returns rows removed. PostgreSQL: nothing to do (ON DELETE CASCADE)."""
    if not episode_ids or not is_sqlite(session):
        return 0
    rows = session.execute(
        select(EpisodeSummary.id, AuditLog.payload)
        .join(AuditLog, AuditLog.id == EpisodeSummary.audit_log_id)
        .where(EpisodeSummary.id.in_(list(episode_ids)))
    ).all()
    removed = 0
    for episode_id, payload in rows:
        if not has_windows(session, episode_id):
            continue  # never indexed: a 'delete' of words that are not there would corrupt it
        windows = passages.windows(conversation_turns(payload))
        session.execute(
            statement(
                "INSERT INTO episode_window_fts (episode_window_fts, rowid, body) "
                "VALUES ('delete', :rowid, :body)"
            ),
            sqlite_rows(episode_id, windows),
        )
        removed += len(windows)
    return removed


def window_scores(session: Session, terms: list[str], ids: Iterable[int]) -> dict[int, float]:
    """{episode_id: its best window's full-text score > 0} (see `each_window_score`)."""
    return {
        episode_id: max(scores.values())
        for episode_id, scores in each_window_score(session, terms, ids).items()
    }


def each_window_score(
    session: Session, terms: list[str], ids: Iterable[int]
) -> dict[int, dict[int, float]]:
    """{episode_id: {window number: full-text score > 0}} for the windows of the episodes `ids`
    matching any of `terms` (the words the episode-level stage matched). SQLite: FTS5 bm25()
    over the windows; PostgreSQL: ts_rank over each window's tsvector (normalisation 1, as the
    episode-level stage). Scores compare within one query only."""
    id_list = sorted({int(i) for i in ids})
    if not terms or not id_list:
        return {}
    if is_sqlite(session):
        # The id filter is kept out of FTS5 (unary +) and the rowid range pushed in; bm25 is
        # computed only for the rows that pass.
        sql = f"""
            SELECT f.rowid / {WINDOW_SLOTS}, f.rowid % {WINDOW_SLOTS}, -bm25(episode_window_fts)
            FROM episode_window_fts AS f
            WHERE episode_window_fts MATCH ? AND f.rowid BETWEEN ? AND ?
              AND +(f.rowid / {WINDOW_SLOTS}) IN ({marks(session, len(id_list))})"""
        params: list[object] = [
            fts5_match(terms),
            rowids(id_list[0])[0],
            rowids(id_list[-1])[-1],
            *id_list,
        ]
    else:
        sql = f"""
            SELECT f.episode_id, f.window_no, ts_rank(f.document, q.query, 1)
            FROM episode_window_fts AS f, to_tsquery('english', %s) AS q(query)
            WHERE f.episode_id IN ({marks(session, len(id_list))}) AND f.document @@ q.query"""
        params = [tsquery_text(terms), *id_list]
    out: dict[int, dict[int, float]] = {}
    for episode_id, window_no, score in driver_rows(session, sql, params):
        if score > 0:
            out.setdefault(int(episode_id), {})[int(window_no)] = float(score)
    return out


def fused_keyword(episode: float, window: float | None) -> float:
    """The keyword relevance recall uses: the mean of the episode-level and the best-window
    relevance where the episode's windows are indexed, the episode-level one alone where not
    (an episode summarised before windows existed is not penalised for it). Pure."""
    return episode if window is None else (episode + window) / 2.0
