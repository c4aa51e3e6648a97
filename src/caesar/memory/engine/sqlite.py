"""SQLite's search backend: FTS5 full text (`bm25()`) and the in-process vector index.

Each person has their own full-text tables (migration 0017; person_tables.py's `PersonTables`
names them, `.create` makes them when the person is written, `.drop` drops them when they are
deleted: db/models.py's events on `Person`):
- `episode_fts_p<id>` holds each of their episodes' summary and conversation
  (trigger-maintained; rowid = person id << PERSON_SHIFT | episode id), and
  `episode_fts_p<id>_vocab` its vocabulary;
- `episode_window_fts_p<id>` the words of their episodes' 3-turn windows — contentless, rowid =
  episode id × WINDOW_SLOTS + window number, so an episode's windows are one rowid range (FTS5
  seeks a range; it restarts for every value of an IN list).

Why one set per person: FTS5's bm25() counts each query word's documents over the whole
table, every query. In one shared table a person's turn read every household member's
doclists (100 people × 10k episodes: the keyword statement 9.7 ms against 3.5 ms alone, the
windows' 3.0 against 0.6), and their scores took the household's word counts. In their own
tables a person's search is exactly an install of one's.

Cost on large histories (memory/recall/keywords.py has the rest):
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
from caesar.memory import passages
from caesar.memory.engine.in_process import InProcessVectors
from caesar.memory.engine.person_tables import (  # noqa: F401 - re-exported
    CONVERSATION_TEXT,
    EPISODE_MASK,
    PERSON_SHIFT,
    SQLITE_TOKENIZE,
    PersonTables,
    is_person_index,
)
from caesar.memory.engine.sql import (
    all_exist,
    by_window,
    count,
    driver_rows,
    episode_filters,
    marks,
    owned,
    statement,
)
from caesar.memory.scope import Scope
from caesar.memory.transcript import conversation_turns

# The summary is what recall shows; a word there counts double a word in the conversation.
SUMMARY_WEIGHT = 2.0
CONVERSATION_WEIGHT = 1.0
_TOKEN_CACHE_SIZE = 10_000
_TABLES_CACHED = 256  # (database, person) pairs
_token_cache: dict[str, tuple[str, ...]] = {}


# SQLite rowid of window k of episode e: e × WINDOW_SLOTS + k.
WINDOW_SLOTS = 64
assert passages.MAX_WINDOWS <= WINDOW_SLOTS


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


def episode_people(session: Session, episode_ids: Sequence[int]) -> dict[int, int]:
    """{episode id: its person} for those of `episode_ids` still there."""
    rows = session.execute(
        select(EpisodeSummary.id, EpisodeSummary.person_id).where(
            EpisodeSummary.id.in_(list(episode_ids))
        )
    )
    return {int(i): int(p) for i, p in rows}


def table_has_windows(session: Session, table: str, episode_id: int) -> bool:
    span = rowids(episode_id)
    sql = f"SELECT 1 FROM {table} WHERE rowid BETWEEN :lo AND :hi LIMIT 1"
    return session.execute(statement(sql), {"lo": span[0], "hi": span[-1]}).first() is not None


def insert_windows(session: Session, table: str, episode_id: int, windows: Sequence[str]) -> int:
    rows = sqlite_rows(episode_id, windows)
    session.execute(text(f"INSERT INTO {table} (rowid, body) VALUES (:rowid, :body)"), rows)
    return len(rows)


def delete_windows(session: Session, table: str, episode_id: int, windows: Sequence[str]) -> int:
    """Drop an episode's windows from a contentless table, given the texts it indexed (SQLite
    < 3.43 has no `contentless_delete`). An episode with none indexed is left alone: a 'delete'
    of words that are not there would corrupt the index."""
    if not table_has_windows(session, table, episode_id):
        return 0
    session.execute(
        statement(f"INSERT INTO {table} ({table}, rowid, body) VALUES ('delete', :rowid, :body)"),
        sqlite_rows(episode_id, windows),
    )
    return len(windows)


def merge_person_index(scope: Scope) -> None:
    """FTS5 deletes are markers over older segments until a merge: merge the person's tables
    now, so no segment keeps a forgotten word."""
    session, person = scope.session, scope.person
    for table in (PersonTables(person).fts, PersonTables(person).windows):
        session.execute(text(f"INSERT INTO {table} ({table}) VALUES ('optimize')"))


def chat_windows(session: Session, episode_ids: Sequence[int]) -> list[tuple[int, list[str]]]:
    """(episode id, its windows derived again from its chat, which the audit log never
    changes) for those of `episode_ids` still there."""
    rows = session.execute(
        select(EpisodeSummary.id, AuditLog.payload)
        .join(AuditLog, AuditLog.id == EpisodeSummary.audit_log_id)
        .where(EpisodeSummary.id.in_(list(episode_ids)))
    ).all()
    return [(int(i), passages.windows(conversation_turns(payload))) for i, payload in rows]


class SqliteFullText:
    """`FullTextSearch` (memory/engine/backend.py) over FTS5."""

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
        # The person's own table (see the module doc): bm25's counts are theirs.
        session, person = scope.session, scope.person
        join, where, params = episode_filters(
            f"(f.rowid & {EPISODE_MASK})",
            model_id=model_id,
            min_created=min_created,
            min_id=None,
        )
        lo, hi = PersonTables(person).rowids()
        if min_id is not None:
            lo = max(lo, PersonTables(person).rowid(min_id))
        if ids is not None:
            # The list is kept out of FTS5 (unary +: see the module doc); the range around it
            # is pushed into it.
            lo, hi = (
                max(lo, PersonTables(person).rowid(ids[0])),
                PersonTables(person).rowid(ids[-1]),
            )
            params["keys"] = [PersonTables(person).rowid(i) for i in ids]
            where.append("+f.rowid IN :keys")
        params.update(limit=limit, match=fts5_match(terms, every=every), lo=lo, hi=hi)
        table = PersonTables(person).fts
        score = f"-bm25({table}, {SUMMARY_WEIGHT}, {CONVERSATION_WEIGHT})"
        sql = f"""
            SELECT f.rowid & {EPISODE_MASK} AS id, {score} AS score
            FROM {table} AS f {" ".join(join)}
            WHERE {" AND ".join([f"{table} MATCH :match", "f.rowid BETWEEN :lo AND :hi", *where])}
            ORDER BY score DESC, f.rowid DESC LIMIT :limit"""
        rows = session.execute(statement(sql, *(("keys",) if ids is not None else ())), params)
        return {int(i): float(score) for i, score in rows if score > 0}

    def term_counts(self, scope: Scope, terms: Sequence[str]) -> tuple[int, list[int]]:
        """By the index's tokenizer: the counts from the person's vocabulary (see _doc_counts)
        and the total from FTS5's averages record (count(*) reads every row: ~35 ms at 100k
        episodes); a word the tokenizer splits in several tokens (or none) is counted as a
        phrase."""
        session, person = scope.session, scope.person
        table = PersonTables(person).fts
        tokens = sqlite_tokens(session, list(terms))
        n, docs = _doc_counts(session, table, {t[0] for t in tokens.values() if len(t) == 1})
        per_term = f"SELECT count(*) FROM {table} WHERE {table} MATCH :term"
        return n, [
            docs[tokens[t][0]]
            if len(tokens[t]) == 1
            else count(session, per_term, {"term": fts5_match([t])})
            for t in terms
        ]

    def probe_contains(self, scope: Scope, terms: Sequence[str], probe_id: int) -> list[bool]:
        """One statement: a cheap lookup per term (no bm25, the rowid pushed into FTS5). Under
        another person's key the episode is not there: all False."""
        session, person = scope.session, scope.person
        params: dict[str, object] = {"probe": PersonTables(person).rowid(probe_id)}
        table, checks = PersonTables(person).fts, []
        for i, term in enumerate(terms):
            params[f"t{i}"] = fts5_match([term])
            checks.append(
                f"EXISTS (SELECT 1 FROM {table} WHERE {table} MATCH :t{i} AND rowid = :probe)"
            )
        return all_exist(session, checks, params)

    def count_holding_all(self, scope: Scope, terms: Sequence[str]) -> int:
        session, person = scope.session, scope.person
        lo, hi, table = *PersonTables(person).rowids(), PersonTables(person).fts
        sql = f"SELECT count(*) FROM {table} WHERE {table} MATCH :q AND rowid BETWEEN :lo AND :hi"
        return count(session, sql, {"q": fts5_match(terms, every=True), "lo": lo, "hi": hi})

    def indexed_id_range(self, scope: Scope) -> tuple[int, int]:
        # Two subqueries: each seeks one end of the person's range of the docsize table's
        # primary key (min and max in one SELECT scan).
        session, person = scope.session, scope.person
        lo, hi, docsize = *PersonTables(person).rowids(), f"{PersonTables(person).fts}_docsize"
        first, last = session.execute(
            statement(
                f"SELECT (SELECT min(id) FROM {docsize} WHERE id BETWEEN :lo AND :hi), "
                f"(SELECT max(id) FROM {docsize} WHERE id BETWEEN :lo AND :hi)"
            ),
            {"lo": lo, "hi": hi},
        ).one()
        return (0, 0) if first is None else (first & EPISODE_MASK, last & EPISODE_MASK)

    def window_scores(
        self, scope: Scope, terms: Sequence[str], ids: Sequence[int]
    ) -> dict[int, dict[int, float]]:
        session, person = scope.session, scope.person
        ids = owned(scope, ids)
        if not ids:
            return {}
        # The id filter is kept out of FTS5 (unary +) and the rowid range pushed in; bm25 is
        # computed only for the rows that pass.
        table = PersonTables(person).windows
        sql = f"""
            SELECT f.rowid / {WINDOW_SLOTS}, f.rowid % {WINDOW_SLOTS}, -bm25({table})
            FROM {table} AS f
            WHERE {table} MATCH ? AND f.rowid BETWEEN ? AND ?
              AND +(f.rowid / {WINDOW_SLOTS}) IN ({marks(session, len(ids))})"""
        params = [fts5_match(terms), rowids(ids[0])[0], rowids(ids[-1])[-1], *ids]
        return by_window(driver_rows(session, sql, params))

    def has_windows(self, session: Session, episode_id: int) -> bool:
        person = episode_people(session, [episode_id]).get(episode_id)
        return person is not None and table_has_windows(
            session, PersonTables(person).windows, episode_id
        )

    def add_windows(self, session: Session, episode_id: int, windows: Sequence[str]) -> int:
        person = episode_people(session, [episode_id]).get(episode_id)
        if person is None:
            return 0
        return insert_windows(session, PersonTables(person).windows, episode_id, windows)

    def forget_windows(self, session: Session, episode_ids: Sequence[int]) -> int:
        """From each episode's person's table, by the texts it indexed (see delete_windows)."""
        people = episode_people(session, episode_ids)
        return sum(
            delete_windows(session, PersonTables(people[episode_id]).windows, episode_id, windows)
            for episode_id, windows in chat_windows(session, episode_ids)
        )


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


# Per database and person: the person's index's state and the token document counts read in that state. The
# vocabulary counts a token's documents by reading its whole doclist (~0.5 ms for a word in 17k
# episodes), and a chat's common words come back turn after turn.
_doc_count_cache: dict[str, tuple[tuple[object, ...], dict[str, int]]] = {}
# FTS5's averages record (rowid 1: rows, then tokens per column) and structure record (rowid
# 10: its segments and a write counter) are rewritten by every commit that changes the index.
_INDEX_STATE = """SELECT (SELECT block FROM {table}_data WHERE id = 1),
    (SELECT block FROM {table}_data WHERE id = 10)"""


def _doc_counts(session: Session, table: str, tokens: set[str]) -> tuple[int, dict[str, int]]:
    """(indexed episodes, {token: episodes holding it}), remembered while the index is
    unchanged (the read session's snapshot holds it still between the two reads). The number
    of episodes is the averages record's first field, as FTS5's own bm25() reads it: counting
    the docsize table instead read 100k rows a search (0.4 ms)."""
    state = tuple(session.execute(statement(_INDEX_STATE.format(table=table))).one())
    key = f"{session.get_bind().engine.url} {table}"
    cached = _doc_count_cache.get(key)
    if cached is None or cached[0] != state:
        if len(_doc_count_cache) >= _TABLES_CACHED:
            _doc_count_cache.clear()
        cached = _doc_count_cache[key] = (state, {})
    counts = cached[1]
    missing = {f"t{i}": t for i, t in enumerate(tokens - counts.keys())}
    if missing:
        if len(counts) + len(missing) > _TOKEN_CACHE_SIZE:
            counts.clear()
        sql = f"SELECT term, doc FROM {table}_vocab WHERE term IN ({', '.join(':' + k for k in missing)})"
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
