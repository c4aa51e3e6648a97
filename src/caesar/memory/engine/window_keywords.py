"""Keyword relevance of a conversation's best window (issue #6), next to the whole episode's.

Why: BM25 over a whole conversation is diluted when a question is about one exchange in a
20-turn chat — a long episode that mentions the words here and there outscores the one where
they meet. Scoring the same 3-turn windows the dense side uses (memory/passages.py) and taking
an episode's best ("MaxP") puts that exchange back on top. Measured on LoCoMo (decay off):
the mean of the episode-level and the best-window keyword relevance lifted MRR 0.783 → 0.807,
R@5 0.920 → 0.922; LongMemEval unchanged (docs/recall-quality.md has every variant tried).

The index holds each window's words only (SQLite: a contentless FTS5 table, ~5–9 KiB an
episode; PostgreSQL: a tsvector per window), through the engine's search backend
(memory/engine/backend.py). It is a re-ranking signal, like the window
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

from sqlalchemy.orm import Session

from caesar.memory.engine.backend import FullTextSearch
from caesar.memory.engine.sqlite import (  # noqa: F401 - re-exported
    WINDOW_SLOTS,
    rowids,
    sqlite_rows,
)
from caesar.memory.scope import Scope


def has_windows(words: FullTextSearch, session: Session, episode_id: int) -> bool:
    return words.has_windows(session, episode_id)


def index_windows(
    words: FullTextSearch,
    session: Session,
    episode_id: int,
    windows: Sequence[str],
) -> int:
    """Index the episode's window texts (passages.windows) unless it has some already — so a
    re-embed, or two workers racing, never index an episode twice. Returns rows written."""
    windows = list(windows)[:WINDOW_SLOTS]
    if not windows or words.has_windows(session, episode_id):
        return 0
    return words.add_windows(session, episode_id, windows)


def forget_windows(words: FullTextSearch, session: Session, episode_ids: Sequence[int]) -> int:
    """Remove the windows' words of episodes about to be deleted (with their chats), in the
    caller's transaction. Returns rows removed. PostgreSQL: nothing to do (ON DELETE CASCADE)."""
    if not episode_ids:
        return 0
    return words.forget_windows(session, episode_ids)


def window_scores(scope: Scope, terms: list[str], ids: Iterable[int]) -> dict[int, float]:
    """{episode_id: its best window's full-text score > 0} (see `each_window_score`)."""
    return {
        episode_id: max(scores.values())
        for episode_id, scores in each_window_score(scope, terms, ids).items()
    }


def each_window_score(
    scope: Scope, terms: list[str], ids: Iterable[int]
) -> dict[int, dict[int, float]]:
    """{episode_id: {window number: full-text score > 0}} for the windows of the episodes `ids`
    matching any of `terms` (the words the episode-level stage matched). SQLite: FTS5 bm25()
    over the windows; PostgreSQL: the same BM25 over each window's tsvector, with the
    candidates' windows' statistics (postgres.window_bm25). Scores compare within one query
    only."""
    id_list = sorted({int(i) for i in ids})
    if not terms or not id_list:
        return {}
    return scope.search.window_scores(scope, terms, id_list)


def fused_keyword(episode: float, window: float | None) -> float:
    """The keyword relevance recall uses: the mean of the episode-level and the best-window
    relevance where the episode's windows are indexed, the episode-level one alone where not
    (an episode summarised before windows existed is not penalised for it). Pure."""
    return episode if window is None else (episode + window) / 2.0
