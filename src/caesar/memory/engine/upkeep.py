"""What each engine needs done beside recall, behind the same door as its search: the code
outside memory/engine/ says what happened (a person was added, a conversation forgotten, the
server is ready) and this module does what the database's engine needs for it, nothing on an
engine that needs nothing. No caller asks which engine it runs on.

- SQLite: each person's full-text tables are made with their row (person_tables.py); after a
  forget the deleted words are merged out of the index and the WAL, which still holds the old
  pages, is checkpointed.
- PostgreSQL: each person's partial indexes are built concurrently after their row commits
  (pgvector_migration.py) and dropped with them; the vectors move into pgvector and the words
  written before migrations 0015/0016 are indexed and counted in the background once the
  server is ready (pg_words.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from caesar.db.engine import Database
from caesar.errors import ConfigError
from caesar.memory.scope import Scope

if TYPE_CHECKING:
    from caesar.memory.engine.pgvector_migration import VectorStatus

log = logging.getLogger(__name__)


def _sqlite(db: Database) -> bool:
    return db.is_sqlite


@dataclass(frozen=True)
class Notice:
    """Something `caesar db upgrade` tells the operator: `warning`, or an ordinary line."""

    text: str
    warning: bool = False


def after_upgrade(db: Database, vector_search: str) -> list[Notice]:
    """What is left to do in the background after the schema is up to date: vectors to copy
    into pgvector, words to index or count (PostgreSQL); nothing on SQLite."""
    if _sqlite(db):
        return []
    from caesar.memory.engine import pg_words, pgvector_migration

    notices: list[Notice] = []
    if vector_search != "in_process":
        with db.read() as session:
            status = pgvector_migration.status(session, "")
        if not status.installed:
            notices.append(Notice(status.describe(), warning=True))
        elif not status.copied:
            notices.append(
                Notice(
                    f"episode vectors: up to {status.left:,} to copy into pgvector; `caesar "
                    "serve` copies them in the background (recall goes on meanwhile), or run "
                    "`caesar db vectors`"
                )
            )
    with db.read() as session:
        words = pg_words.status(session)
        uncounted = len(pg_words.uncounted(session))
    if not words.finished:
        notices.append(
            Notice(
                f"full text: {words.describe()}; `caesar serve` does it in the background "
                "(recall goes on meanwhile), or run `caesar db words`"
            )
        )
    if uncounted:
        notices.append(
            Notice(
                f"full text: the words of {uncounted:,} "
                f"{'person' if uncounted == 1 else 'people'} to count; `caesar serve` counts "
                "them in the background (recall goes on meanwhile), or run `caesar db words`"
            )
        )
    return notices


def require_postgresql(db: Database, command: str, on_sqlite: str) -> None:
    """Refuse `command`, a PostgreSQL upkeep command, on SQLite, saying why (`on_sqlite`)."""
    if _sqlite(db):
        raise ConfigError(f"{command} is for PostgreSQL; {on_sqlite}")


def catch_up(db: Database, model: str | None) -> None:
    """Ready and serving (PostgreSQL): index the full text written before migration 0015 again
    under FTS5's words and count the words of the people who had episodes before migration
    0016 (recall reads the older words until then), then build a household's people's own
    indexes that are missing (`model`'s beside its HNSW index only, if given), concurrently
    while chat goes on. Nothing on SQLite. A failure is logged; the next start resumes."""
    if _sqlite(db):
        return
    from caesar.memory.engine import pg_words
    from caesar.memory.engine.pgvector_migration import build_person_indexes, progress_log

    words = logging.getLogger("caesar.words")
    try:
        pg_words.reindex(db, progress=pg_words.progress_log(words.info))
        pg_words.count_words(db, progress=pg_words.counting_log(words.info))
    except Exception:
        words.exception(
            "full text: indexing again under FTS5's words stopped (recall goes on); the next "
            "start resumes it, or run `caesar db words`"
        )
    vectors = logging.getLogger("caesar.vectors")
    try:
        build_person_indexes(db, progress_log(vectors.info), model=model)
    except Exception:
        vectors.exception("the people's own indexes: the build stopped; the next start resumes it")


def person_added(db: Database, person: int) -> None:
    """A new person's own search indexes (PostgreSQL, docs/household.md), built concurrently
    after their row is committed (seconds among 1M episodes, once). Should it fail, their
    searches use the shared indexes, with the same results, and the next `caesar serve` builds
    what is missing. SQLite made their tables with their row."""
    if _sqlite(db):
        return
    from caesar.memory.engine.pgvector_migration import build_person_indexes

    try:
        build_person_indexes(db, person=person)
    except Exception:
        log.exception("person %d's own search indexes: the build stopped", person)


def person_removed(db: Database, person: int) -> None:
    """After a person's rows are gone: their partial indexes dropped concurrently (PostgreSQL),
    or the WAL that still holds their old pages checkpointed (SQLite)."""
    if _sqlite(db):
        checkpoint_wal(db)
        return
    from caesar.memory.engine.pgvector_migration import drop_person_indexes

    drop_person_indexes(db, person)


def compact_words(scope: Scope) -> None:
    """In a forget's transaction: merge the deleted words out of the person's full-text index
    (SQLite's FTS5 keeps them in its segments until merged); PostgreSQL's go with their rows."""
    if scope.session.get_bind().dialect.name != "sqlite":
        return
    from caesar.memory.engine.sqlite import merge_person_index

    merge_person_index(scope)


def after_forget(db: Database) -> None:
    """After a forget commits: SQLite's WAL, which still holds the old pages, copied into the
    database file and truncated. PostgreSQL: nothing (VACUUM reclaims the rows)."""
    if _sqlite(db):
        checkpoint_wal(db)


def checkpoint_wal(db: Database) -> None:
    """Copy the WAL into the database file and truncate it: the WAL holds the old pages."""
    with db.engine.connect() as connection:
        busy, _log, _done = connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
        if busy:
            log.warning("forget: the WAL checkpoint was blocked by a reader; it completes later")


def vector_status(db: Database, vector_search: str, model: str) -> VectorStatus | None:
    """Where the embedder's episode vectors stand in PostgreSQL (pgvector_migration.status);
    None where they are searched in this process by choice (SQLite, or "in_process")."""
    if _sqlite(db) or vector_search == "in_process":
        return None
    from caesar.memory.engine import pgvector_migration

    with db.read() as session:
        return pgvector_migration.status(session, model)
