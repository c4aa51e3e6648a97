"""SQLite's search backend: FTS5 full text (`bm25()`) and the in-process vector index.

Tables (migrations 0002, 0003, 0005, 0011): `episode_fts` holds each episode's summary and
conversation (trigger-maintained; rowid = its person's id << PERSON_SHIFT | episode id, so a
person's episodes are one rowid range: FTS5 seeks it, and in a household reads nobody else's
rows — no join to `episode_summaries` to drop them), `episode_fts_vocab` its vocabulary, and
`episode_window_fts` the words of its 3-turn windows — contentless, rowid = episode id ×
WINDOW_SLOTS + window number, so an episode's windows are one rowid range (FTS5 seeks a range;
it restarts for every value of an IN list).

Cost on large histories (memory/search/keywords.py has the rest):
- per-word document counts come from the vocabulary, not a COUNT, and are remembered while the
  index is unchanged;
- the dense candidates the pool left out are scored with the rowid filter kept out of FTS5
  (`+rowid IN`): pushed into it, FTS5 restarts — and bm25 recounts every word's documents —
  once per id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from caesar.db.models import AuditLog, EpisodeSummary
from caesar.memory.search import passages
from caesar.memory.search.in_process import InProcessVectors
from caesar.memory.search.sql import (
    all_exist,
    alone,
    by_window,
    count,
    driver_rows,
    episode_filters,
    marks,
    owned,
    statement,
)
from caesar.memory.transcript import conversation_turns

# The summary is what recall shows; a word there counts double a word in the conversation.
SUMMARY_WEIGHT = 2.0
CONVERSATION_WEIGHT = 1.0
# Must equal migration 0002's FTS5 tokenizer: query words are tokenized with it to look their
# document counts up in the index's vocabulary (porter stems "hiking" to "hike").
SQLITE_TOKENIZE = "porter unicode61 remove_diacritics 2"
_TOKEN_CACHE_SIZE = 10_000
_DATABASES_CACHED = 16
_token_cache: dict[str, tuple[str, ...]] = {}

# `episode_fts` rowid of person p's episode e: p << PERSON_SHIFT | e (migration 0011).
PERSON_SHIFT = 40
EPISODE_MASK = (1 << PERSON_SHIFT) - 1

# SQLite rowid of window k of episode e: e × WINDOW_SLOTS + k.
WINDOW_SLOTS = 64
assert passages.MAX_WINDOWS <= WINDOW_SLOTS


def fts_key(person: int, episode_id: int) -> int:
    """The `episode_fts` rowid of `person`'s episode `episode_id` (migration 0011). Pure."""
    return (person << PERSON_SHIFT) | episode_id


def person_keys(person: int) -> tuple[int, int]:
    """The smallest and largest `episode_fts` rowid `person`'s episodes may take. Pure."""
    return fts_key(person, 0), fts_key(person, EPISODE_MASK)


def fts5_match(terms: Iterable[str], *, every: bool = False) -> str:
    """An FTS5 MATCH expression: any of the terms (every one if `every`). Quoted, so no term is
    read as syntax."""
    return (" AND " if every else " OR ").join(f'"{t}"' for t in terms)


def rowids(episode_id: int) -> range:
    """The rowids episode `episode_id`'s windows may take, in window order. Pure."""
    return range(episode_id * WINDOW_SLOTS, (episode_id + 1) * WINDOW_SLOTS)


def sqlite_rows(episode_id: int, windows: Sequence[str]) -> list[dict[str, object]]:
    """Parameters for the windows' rows of the window table (rowid, body). Pure."""
    return [{"rowid": r, "body": w} for r, w in zip(rowids(episode_id), windows, strict=False)]


class SqliteFullText:
    """`FullTextSearch` (memory/search/backend.py) over FTS5."""

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
        # The person's rows are one rowid range (see the module doc): FTS5 reads only theirs,
        # and bm25 is computed for no one else's (its document frequencies stay the
        # household's: docs/household.md, "Known limits").
        join, where, params = episode_filters(
            f"(f.rowid & {EPISODE_MASK})",
            person=None,
            model_id=model_id,
            min_created=min_created,
            min_id=None,
        )
        lo, hi = person_keys(person)
        if min_id is not None:
            lo = max(lo, fts_key(person, min_id))
        if ids is not None:
            # The list is kept out of FTS5 (unary +: see the module doc); the range around it
            # is pushed into it.
            lo, hi = max(lo, fts_key(person, ids[0])), fts_key(person, ids[-1])
            params["keys"] = [fts_key(person, i) for i in ids]
            where.append("+f.rowid IN :keys")
        params.update(limit=limit, match=fts5_match(terms, every=every), lo=lo, hi=hi)
        score = f"-bm25(episode_fts, {SUMMARY_WEIGHT}, {CONVERSATION_WEIGHT})"
        sql = f"""
            SELECT f.rowid & {EPISODE_MASK} AS id, {score} AS score
            FROM episode_fts AS f {" ".join(join)}
            WHERE {" AND ".join(["episode_fts MATCH :match", "f.rowid BETWEEN :lo AND :hi", *where])}
            ORDER BY score DESC, f.rowid DESC LIMIT :limit"""
        rows = session.execute(statement(sql, *(("keys",) if ids is not None else ())), params)
        return {int(i): float(score) for i, score in rows if score > 0}

    def term_counts(
        self, session: Session, terms: Sequence[str], *, person: int
    ) -> tuple[int, list[int]]:
        """By the index's tokenizer. Alone: the counts from its vocabulary (see _doc_counts)
        and the total from FTS5's averages record (count(*) on episode_fts reads every row:
        ~35 ms at 100k episodes); a word the tokenizer splits in several tokens (or none) is
        counted as a phrase. Where others have episodes too, each term's matches in the
        person's rowid range are counted (FTS5 reads that part of its doclist only), and
        their rows in the docsize table."""
        if not alone(session, person):
            lo, hi = person_keys(person)
            params: dict[str, object] = {"lo": lo, "hi": hi}
            counts = ["(SELECT count(*) FROM episode_fts_docsize WHERE id BETWEEN :lo AND :hi)"]
            for i, term in enumerate(terms):
                params[f"t{i}"] = fts5_match([term])
                counts.append(
                    f"(SELECT count(*) FROM episode_fts WHERE episode_fts MATCH :t{i} "
                    "AND rowid BETWEEN :lo AND :hi)"
                )
            n, *found = session.execute(statement(f"SELECT {', '.join(counts)}"), params).one()
            return int(n), [int(c) for c in found]
        tokens = sqlite_tokens(session, list(terms))
        n, docs = _doc_counts(session, {t[0] for t in tokens.values() if len(t) == 1})
        per_term = "SELECT count(*) FROM episode_fts WHERE episode_fts MATCH :term"
        return n, [
            docs[tokens[t][0]]
            if len(tokens[t]) == 1
            else count(session, per_term, {"term": fts5_match([t])})
            for t in terms
        ]

    def probe_contains(
        self, session: Session, terms: Sequence[str], probe_id: int, *, person: int
    ) -> list[bool]:
        """One statement: a cheap lookup per term (no bm25, the rowid pushed into FTS5). Under
        another person's key the episode is not there: all False."""
        params: dict[str, object] = {"probe": fts_key(person, probe_id)}
        checks = []
        for i, term in enumerate(terms):
            params[f"t{i}"] = fts5_match([term])
            checks.append(
                f"EXISTS (SELECT 1 FROM episode_fts WHERE episode_fts MATCH :t{i} AND rowid = :probe)"
            )
        return all_exist(session, checks, params)

    def count_holding_all(self, session: Session, terms: Sequence[str], *, person: int) -> int:
        lo, hi = person_keys(person)
        sql = "SELECT count(*) FROM episode_fts WHERE episode_fts MATCH :q AND rowid BETWEEN :lo AND :hi"
        return count(session, sql, {"q": fts5_match(terms, every=True), "lo": lo, "hi": hi})

    def indexed_id_range(self, session: Session, *, person: int) -> tuple[int, int]:
        # Two subqueries: each seeks one end of the person's range of the docsize table's
        # primary key (min and max in one SELECT scan).
        lo, hi = person_keys(person)
        first, last = session.execute(
            statement(
                "SELECT (SELECT min(id) FROM episode_fts_docsize WHERE id BETWEEN :lo AND :hi), "
                "(SELECT max(id) FROM episode_fts_docsize WHERE id BETWEEN :lo AND :hi)"
            ),
            {"lo": lo, "hi": hi},
        ).one()
        return (0, 0) if first is None else (first & EPISODE_MASK, last & EPISODE_MASK)

    def window_scores(
        self, session: Session, terms: Sequence[str], ids: Sequence[int], *, person: int
    ) -> dict[int, dict[int, float]]:
        ids = owned(session, ids, person)
        if not ids:
            return {}
        # The id filter is kept out of FTS5 (unary +) and the rowid range pushed in; bm25 is
        # computed only for the rows that pass.
        sql = f"""
            SELECT f.rowid / {WINDOW_SLOTS}, f.rowid % {WINDOW_SLOTS}, -bm25(episode_window_fts)
            FROM episode_window_fts AS f
            WHERE episode_window_fts MATCH ? AND f.rowid BETWEEN ? AND ?
              AND +(f.rowid / {WINDOW_SLOTS}) IN ({marks(session, len(ids))})"""
        params = [fts5_match(terms), rowids(ids[0])[0], rowids(ids[-1])[-1], *ids]
        return by_window(driver_rows(session, sql, params))

    def has_windows(self, session: Session, episode_id: int) -> bool:
        span = rowids(episode_id)
        sql = "SELECT 1 FROM episode_window_fts WHERE rowid BETWEEN :lo AND :hi LIMIT 1"
        return session.execute(statement(sql), {"lo": span[0], "hi": span[-1]}).first() is not None

    def add_windows(self, session: Session, episode_id: int, windows: Sequence[str]) -> int:
        rows = sqlite_rows(episode_id, windows)
        sql = "INSERT INTO episode_window_fts (rowid, body) VALUES (:rowid, :body)"
        session.execute(text(sql), rows)
        return len(rows)

    def forget_windows(self, session: Session, episode_ids: Sequence[int]) -> int:
        """The contentless table drops a row only when given the text it indexed (SQLite <
        3.43 has no `contentless_delete`): the windows are derived again from the chat, which
        the audit log never changes."""
        rows = session.execute(
            select(EpisodeSummary.id, AuditLog.payload)
            .join(AuditLog, AuditLog.id == EpisodeSummary.audit_log_id)
            .where(EpisodeSummary.id.in_(list(episode_ids)))
        ).all()
        removed = 0
        for episode_id, payload in rows:
            if not self.has_windows(session, episode_id):
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


class SqliteSearch(InProcessVectors, SqliteFullText):
    """SQLite's `SearchBackend`: FTS5 and the in-process vector index."""


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


# Per database: the index's state and the token document counts read in that state. The
# vocabulary counts a token's documents by reading its whole doclist (~0.5 ms for a word in 17k
# episodes), and a chat's common words come back turn after turn.
_doc_count_cache: dict[str, tuple[tuple[object, ...], dict[str, int]]] = {}
# FTS5's averages record (rowid 1: rows, then tokens per column) and structure record (rowid
# 10: its segments and a write counter) are rewritten by every commit that changes the index.
_INDEX_STATE = """SELECT (SELECT block FROM episode_fts_data WHERE id = 1),
    (SELECT block FROM episode_fts_data WHERE id = 10)"""


def _doc_counts(session: Session, tokens: set[str]) -> tuple[int, dict[str, int]]:
    """(indexed episodes, {token: episodes holding it}), remembered while the index is
    unchanged (the read session's snapshot holds it still between the two reads). The number
    of episodes is the averages record's first field, as FTS5's own bm25() reads it: counting
    the docsize table instead read 100k rows a search (0.4 ms)."""
    state = tuple(session.execute(statement(_INDEX_STATE)).one())
    key = str(session.get_bind().engine.url)
    cached = _doc_count_cache.get(key)
    if cached is None or cached[0] != state:
        if len(_doc_count_cache) >= _DATABASES_CACHED:
            _doc_count_cache.clear()
        cached = _doc_count_cache[key] = (state, {})
    counts = cached[1]
    missing = {f"t{i}": t for i, t in enumerate(tokens - counts.keys())}
    if missing:
        if len(counts) + len(missing) > _TOKEN_CACHE_SIZE:
            counts.clear()
        sql = f"SELECT term, doc FROM episode_fts_vocab WHERE term IN ({', '.join(':' + k for k in missing)})"
        counts.update(dict.fromkeys(missing.values(), 0))
        counts.update({str(r.term): int(r.doc) for r in session.execute(text(sql), missing)})
    return indexed_rows(state[0]), {t: counts[t] for t in tokens}


def indexed_rows(averages: bytes | None) -> int:
    """The row count at the head of an FTS5 averages record (an SQLite varint: big-endian
    7-bit groups, the high bit set on all but the last; a 9th byte carries 8 bits). An empty
    index has no record: 0. Pure."""
    value = 0
    for at, byte in enumerate(averages or b""):
        if at == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return value
