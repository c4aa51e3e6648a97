"""PostgreSQL's full text indexed again under FTS5's words (migration 0015, issue #24) — batched,
resumable, with progress — while chat goes on.

Migration 0015 creates the text search configuration `WORDS` (`caesar_porter`: unaccented,
Porter-stemmed, no stop words, as SQLite's FTS5 cuts words) and points the episodes' trigger
and the windows' writer at it, so every row written after it has the new words. It records in
`fulltext_reindex` the last episode indexed before it (`upto`). Those older rows are indexed
again here, `BATCH` episodes a transaction, their windows with them, the place kept
(`done_through`, moved in the transaction of its rows) so a stopped run resumes where it
stopped. Until then they keep `english` words (a query word both stem alike, most, still
finds them) and no word count (`tokens` is NULL: search takes `length()` instead).

A batch holds its episodes' rows until it commits, so a write to one of them (a re-summarised
or forgotten old episode) waits for it: batches are small (`BATCH`, ~0.7 s of work), and one
that meets a deadlock is retried (`Database.write_retrying`). Migration 0015 made the
per-person counters' trigger skip an update that moves no row between people, so a batch
locks no counter.

`caesar serve` runs it in the background once ready; `caesar db words` runs it by hand. One
process at a time (an advisory lock); the others see the result in the database. Measured in
docs/performance.md ("PostgreSQL's words"): about 6–7 ms an episode of LongMemEval's length.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from caesar.db.engine import Database
from caesar.errors import ConfigError
from caesar.memory import passages
from caesar.memory.scope import Scope
from caesar.memory.transcript import conversation_turns

log = logging.getLogger("caesar.words")

WORDS = "caesar_porter"  # the configuration (migration 0015)
STATE = "fulltext_reindex"  # not a SQLAlchemy model: db/migrate.py's comparison skips it
BATCH = 100  # episodes per transaction (~7 ms each at LongMemEval's length)
_LOCK = 0x6361657361727774  # pg_advisory_lock key ("caesarwt")

# A progress callback: (episodes done, episodes in all).
Progress = Callable[[int, int], None]

# Migration 0002's document of an episode: the summary (label A) and its chat (B).
_CONVERSATION = """
    coalesce((SELECT string_agg(m.value ->> 'content', E'\\n' ORDER BY m.ordinality)
              FROM jsonb_array_elements(
                  CASE WHEN jsonb_typeof(a.payload -> 'messages') = 'array'
                       THEN a.payload -> 'messages' ELSE '[]'::jsonb END
              ) WITH ORDINALITY AS m(value, ordinality)
              WHERE jsonb_typeof(m.value) = 'object'
                AND m.value ->> 'role' IN ('user', 'assistant')), '')
    || E'\\n' || coalesce(a.payload ->> 'reply', '')
"""


def document(config: str, summary: str) -> str:
    """An episode's tsvector under `config`, `summary` its summary's expression, over its chat's
    audit row `a` (migration 0002's document; 0015 writes its own frozen copy)."""
    return (
        f"setweight(to_tsvector('{config}', {summary}), 'A') || "
        f"setweight(to_tsvector('{config}', {_CONVERSATION}), 'B')"
    )


@dataclass(frozen=True)
class WordsStatus:
    left: int  # episodes not indexed again yet
    finished: bool

    def describe(self) -> str:
        if self.finished:
            return "every episode indexed under FTS5's words"
        return f"{self.left:,} episodes to index again under FTS5's words"


def status(session: Session) -> WordsStatus:
    """Where the reindex stands (finished where there is nothing to do: SQLite). A PostgreSQL
    database from before migration 0015 is a ConfigError that says to upgrade it."""
    if session.get_bind().dialect.name == "sqlite":
        return WordsStatus(0, True)
    if not installed(session.connection()):
        raise ConfigError("the database predates migration 0015: run `caesar db upgrade`")
    row = session.execute(sa.text(f"SELECT upto, done_through, finished_at FROM {STATE}")).one()
    if row.finished_at is not None:
        return WordsStatus(0, True)
    left = session.execute(
        sa.text(
            "SELECT count(*) FROM episode_fts WHERE episode_id > :after AND episode_id <= :upto"
        ),
        {"after": row.done_through, "upto": row.upto},
    ).scalar()
    return WordsStatus(int(left or 0), False)


# The english parser's word tokens (migration 0015 maps them to `unaccent` and the stemmer).
WORD_TOKENS = "asciiword, word, numword, hword_part, hword_asciipart, hword_numpart"


def mend_unaccent(session: Session) -> bool:
    """Where migration 0015 found no `unaccent` extension and it is there now (a superuser ran
    `CREATE EXTENSION unaccent`): put it before the stemmer and index every older row again.
    Returns whether it did."""
    if session.get_bind().dialect.name == "sqlite" or not installed(session.connection()):
        return False
    # one process at a time: a second one finds it done
    session.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK + 1})
    there = session.execute(
        sa.text("SELECT 1 FROM pg_extension WHERE extname = 'unaccent'")
    ).first()
    mapped = session.execute(
        sa.text(
            "SELECT 1 FROM pg_ts_config_map AS m JOIN pg_ts_config AS c ON c.oid = m.mapcfg "
            "JOIN pg_ts_dict AS d ON d.oid = m.mapdict "
            "WHERE c.cfgname = :config AND d.dictname = 'unaccent'"
        ),
        {"config": WORDS},
    ).first()
    if there is None or mapped is not None:
        return False
    session.execute(
        sa.text(
            f"ALTER TEXT SEARCH CONFIGURATION {WORDS} ALTER MAPPING FOR {WORD_TOKENS} "
            f"WITH unaccent, {WORDS}_stem"
        )
    )
    session.execute(
        sa.text(
            f"UPDATE {STATE} SET upto = (SELECT coalesce(max(episode_id), 0) FROM episode_fts), "
            "done_through = 0, finished_at = NULL"
        )
    )
    log.info("full text: unaccent added to %s; every older episode is indexed again", WORDS)
    return True


def installed(conn: Connection) -> bool:
    return conn.scalar(sa.text(f"SELECT to_regclass('{STATE}')")) is not None


def reindex_batch(
    conn: Connection, config: str, after: int, upto: int | None, batch: int
) -> list[int]:
    """Index the next `batch` episodes after `after` (up to `upto`, None: all) and their windows
    again under `config`, in `conn`'s transaction; returns their ids, in order (fewer than
    `batch`: there are no more)."""
    bound = "" if upto is None else "AND episode_id <= :upto"
    ids = [
        int(i)
        for i in conn.execute(
            sa.text(
                f"SELECT episode_id FROM episode_fts WHERE episode_id > :after {bound} "
                "ORDER BY episode_id LIMIT :n"
            ),
            {"after": after, "upto": upto, "n": batch},
        ).scalars()
    ]
    if not ids:
        return ids
    conn.execute(
        sa.text(
            f"""UPDATE episode_fts AS f SET document = {document(config, "e.summary")}
            FROM episode_summaries AS e JOIN audit_log AS a ON a.id = e.audit_log_id
            WHERE f.episode_id = e.id AND f.episode_id BETWEEN :first AND :last"""
        ),
        {"first": ids[0], "last": ids[-1]},
    )
    chats = conn.execute(
        sa.text(
            "SELECT e.id, a.payload FROM episode_summaries AS e "
            "JOIN audit_log AS a ON a.id = e.audit_log_id "
            "WHERE e.id IN (SELECT DISTINCT episode_id FROM episode_window_fts "
            "WHERE episode_id > :after AND episode_id <= :last)"
        ).columns(sa.column("id", sa.Integer), sa.column("payload", sa.JSON)),
        {"after": after, "last": ids[-1]},
    ).all()
    windows = [
        (int(chat.id), k, body)
        for chat in chats
        for k, body in enumerate(passages.windows(conversation_turns(chat.payload)))
    ]
    if windows:
        episode, number, body = (list(column) for column in zip(*windows, strict=True))
        conn.execute(
            sa.text(
                f"UPDATE episode_window_fts AS w SET document = to_tsvector('{config}', v.body) "
                "FROM unnest(CAST(:ids AS integer[]), CAST(:ks AS smallint[]), "
                "CAST(:bodies AS text[])) AS v(id, k, body) "
                "WHERE w.episode_id = v.id AND w.window_no = v.k"
            ),
            {"ids": episode, "ks": number, "bodies": body},
        )
    return ids


def reindex(
    db: Database, *, progress: Progress | None = None, batch: int = BATCH, wait: bool = False
) -> WordsStatus:
    """Index the episodes left (and their windows) again under `WORDS`, `batch` a transaction;
    returns where things stand after. Resumable: stop it anywhere and run it again. Another
    process at it: wait for it, or (not `wait`) return at once."""
    report = progress or (lambda _done, _total: None)
    if db.is_sqlite:
        return WordsStatus(0, True)
    with db.write() as session:
        mend_unaccent(session)
    with db.read() as session:
        before = status(session)
    if before.finished:
        return before
    with db.exclusively(_LOCK, "indexing the full text again", wait=wait) as held:
        if not held:
            return before
        _run(db, batch, report)
    with db.read() as session:
        return status(session)


def _run(db: Database, batch: int, report: Progress) -> None:
    with db.read() as session:
        total = status(session).left
    done = 0
    report(0, total)

    def one_batch(session: Session) -> tuple[list[int], bool]:
        conn = session.connection()
        upto, after, finished = conn.execute(
            sa.text(f"SELECT upto, done_through, finished_at FROM {STATE} FOR UPDATE")
        ).one()
        if finished is not None:
            return [], True
        ids = reindex_batch(conn, WORDS, int(after), int(upto), batch)
        last = len(ids) < batch or ids[-1] >= upto
        conn.execute(
            sa.text(
                f"UPDATE {STATE} SET done_through = :through, finished_at = "
                "CASE WHEN :last THEN now() AT TIME ZONE 'UTC' END WHERE id = 1"
            ),
            {"through": ids[-1] if ids else upto, "last": last},
        )
        return ids, last

    while True:
        ids, last = db.write_retrying(one_batch)
        done = min(total, done + len(ids))
        report(total if last else done, total)
        if last:
            return


# Migration 0016's vocabulary: each person's number of `episode_fts` rows per word.
VOCABULARY = "episode_fts_words"


def uncounted(session: Session) -> list[int]:
    """The people whose words migration 0016 left to count (none on SQLite)."""
    conn = session.connection()
    if session.get_bind().dialect.name == "sqlite":
        return []
    if conn.scalar(sa.text(f"SELECT to_regclass('{VOCABULARY}')")) is None:
        raise ConfigError("the database predates migration 0016: run `caesar db upgrade`")
    sql = "SELECT person_id FROM episode_fts_counts WHERE NOT words_counted ORDER BY person_id"
    return [int(p) for p in conn.execute(sa.text(sql)).scalars()]


def _count_in(scope: Scope, session: Session) -> bool:
    return count_person(scope.within(session))


def count_person(scope: Scope) -> bool:
    """Count `person`'s words into the vocabulary, in `session`'s transaction; from its commit
    the triggers keep them. Returns whether it counted (False: counted already).

    Episode rows are not written meanwhile (SHARE: a writer of anyone's episodes waits for
    the commit, a chat turn does not), so no change slips between the count and the flag."""
    session, person = scope.session, scope.person
    conn = session.connection()
    conn.execute(sa.text("LOCK TABLE episode_fts IN SHARE MODE"))
    done = conn.scalar(
        sa.text("SELECT words_counted FROM episode_fts_counts WHERE person_id = :p"), {"p": person}
    )
    if done is None or done:
        return False
    conn.execute(sa.text(f"DELETE FROM {VOCABULARY} WHERE person_id = :p"), {"p": person})
    conn.execute(
        sa.text(
            f"INSERT INTO {VOCABULARY} (person_id, word, documents) "
            "SELECT f.person_id, u.lexeme, count(*) FROM episode_fts AS f "
            "CROSS JOIN LATERAL unnest(f.document) AS u WHERE f.person_id = :p "
            "GROUP BY f.person_id, u.lexeme"
        ),
        {"p": person},
    )
    conn.execute(
        sa.text("UPDATE episode_fts_counts SET words_counted = true WHERE person_id = :p"),
        {"p": person},
    )
    return True


def count_words(db: Database, *, progress: Progress | None = None, wait: bool = False) -> int:
    """Count the words of the people migration 0016 left uncounted, one person a transaction
    (resumable); returns how many are left. After the reindex (`reindex`): until it finished,
    nothing (its batches would change the words counted). Another process at either: wait
    for it, or (not `wait`) return at once."""
    report = progress or (lambda _done, _total: None)
    if db.is_sqlite:
        return 0
    with db.read() as session:
        left = uncounted(session)
        if not left or not status(session).finished:
            return len(left)
    with db.exclusively(_LOCK, "counting the full text's words", wait=wait) as held:
        if not held:
            return len(left)
        report(0, len(left))
        for done, person in enumerate(left, 1):
            db.write_retrying(partial(_count_in, Scope(person)))
            report(done, len(left))
    with db.read() as session:
        return len(uncounted(session))


def progress_log(emit: Callable[[str], None], every: float = 5.0) -> Progress:
    """A Progress that says where the reindex is at most every `every` seconds, and when it
    starts and ends."""

    def say(done: int, total: int) -> str:
        share = f" ({100 * done / total:.0f}%)" if total else ""
        return f"full text: {done:,} of {total:,} episodes indexed again under FTS5's words{share}"

    return _throttled(emit, every, say)


def counting_log(emit: Callable[[str], None], every: float = 5.0) -> Progress:
    """A Progress for `count_words`: people counted, at most every `every` seconds."""
    return _throttled(
        emit,
        every,
        lambda done, total: f"full text: words counted for {done:,} of {total:,} people",
    )


def _throttled(
    emit: Callable[[str], None], every: float, say: Callable[[int, int], str]
) -> Progress:
    """`say(done, total)` emitted at the start, at the end, and at most every `every` seconds
    between."""
    last_at = [0.0]

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if 0 < done < total and now - last_at[0] < every:
            return
        last_at[0] = now
        emit(say(done, total))

    return report
