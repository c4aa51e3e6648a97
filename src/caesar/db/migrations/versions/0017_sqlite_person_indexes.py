"""SQLite: each person's own full-text tables (issue #23)

Why: FTS5's bm25() counts each query word's documents over its whole table, every query. With
one table for the household, a person's keyword search read everyone's doclists: among 100
people × 10k episodes the keyword statement took 9.7 ms against 3.5 ms alone, and the window
search 3.0 against 0.6 ms (+5.19 ms a turn in all), and their scores took the household's word
counts. migrations/_frozen_sqlite.py has the tables (`person_index_ddl`).

The owner's tables are the old shared ones, renamed: an install of one moves nothing. Another
person's episode rows are copied to their own table and deleted from the owner's; their window
rows (contentless: the text is not stored) are derived again from their chats, as migration
0005 derived them, and moved the same way.

The DDL and the windowing are frozen copies of live code's (migrations/_frozen_sqlite.py,
_frozen_turns.py), which makes each new person's tables and derives the windows again to delete
them: tests/test_migrations_frozen.py holds them equal, and a later change to either needs a
migration of its own that rebuilds these tables.

Downgrade: everyone's rows back into the shared tables, with migration 0011's triggers.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.orm import Session

from caesar.db.migrations import _frozen_sqlite as sqlite

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_SHARED, _SHARED_WINDOWS = "episode_fts", "episode_window_fts"
_SHARED_TRIGGERS = ("episode_fts_insert", "episode_fts_delete", "episode_fts_update")
_BATCH = 500


def _people(bind: sa.Connection) -> tuple[int, list[int]]:
    owner = int(bind.execute(sa.text("SELECT id FROM people WHERE is_owner")).scalar_one())
    everyone = [
        int(p) for p in bind.execute(sa.text("SELECT id FROM people ORDER BY id")).scalars()
    ]
    return owner, everyone


def _episodes(session: Session, person: int) -> list[list[int]]:
    ids = [
        int(i)
        for i in session.execute(
            sa.text("SELECT id FROM episode_summaries WHERE person_id = :p ORDER BY id"),
            {"p": person},
        ).scalars()
    ]
    return [ids[i : i + _BATCH] for i in range(0, len(ids), _BATCH)]


def _move_windows(session: Session, person: int, source: str, target: str) -> None:
    """`person`'s windows from the contentless table `source` to `target`."""
    for batch in _episodes(session, person):
        for episode_id, windows in sqlite.chat_windows(session, batch):
            if sqlite.delete_windows(session, source, episode_id, windows):
                sqlite.insert_windows(session, target, episode_id, windows)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    owner, everyone = _people(bind)
    for trigger in _SHARED_TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    op.execute("DROP TABLE IF EXISTS episode_fts_vocab")
    op.execute(f"ALTER TABLE {_SHARED} RENAME TO {sqlite.fts_table(owner)}")
    op.execute(f"ALTER TABLE {_SHARED_WINDOWS} RENAME TO {sqlite.window_table(owner)}")
    for person in everyone:
        for statement in sqlite.person_index_ddl(person):
            op.execute(statement)
    with Session(bind=bind) as session:
        for person in everyone:
            if person == owner:
                continue
            lo, hi = sqlite.person_keys(person)
            keys = {"lo": lo, "hi": hi}
            source, target = sqlite.fts_table(owner), sqlite.fts_table(person)
            session.execute(
                sa.text(
                    f"INSERT INTO {target} (rowid, summary, conversation) SELECT rowid, summary, "
                    f"conversation FROM {source} WHERE rowid BETWEEN :lo AND :hi"
                ),
                keys,
            )
            session.execute(sa.text(f"DELETE FROM {source} WHERE rowid BETWEEN :lo AND :hi"), keys)
            _move_windows(session, person, sqlite.window_table(owner), sqlite.window_table(person))


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    owner, everyone = _people(bind)
    for person in everyone:  # the triggers and vocabularies first: they name the tables
        fts = sqlite.fts_table(person)
        for trigger in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER IF EXISTS {fts}_{trigger}")
        op.execute(f"DROP TABLE IF EXISTS {fts}_vocab")
    op.execute(f"ALTER TABLE {sqlite.fts_table(owner)} RENAME TO {_SHARED}")
    op.execute(f"ALTER TABLE {sqlite.window_table(owner)} RENAME TO {_SHARED_WINDOWS}")
    with Session(bind=bind) as session:
        for person in everyone:
            if person != owner:
                session.execute(
                    sa.text(
                        f"INSERT INTO {_SHARED} (rowid, summary, conversation) "
                        f"SELECT rowid, summary, conversation FROM {sqlite.fts_table(person)}"
                    )
                )
                _move_windows(session, person, sqlite.window_table(person), _SHARED_WINDOWS)
                sqlite.drop_person_index(session.connection(), person)
    # Migration 0011's triggers and 0003's vocabulary, as they were.
    key = f"(new.person_id << {sqlite.PERSON_SHIFT}) | new.id"
    old_key = f"(old.person_id << {sqlite.PERSON_SHIFT}) | old.id"
    insert = f"""
        INSERT INTO {_SHARED} (rowid, summary, conversation)
        SELECT {key}, new.summary, {sqlite.CONVERSATION_TEXT}
        FROM audit_log AS a WHERE a.id = new.audit_log_id AND new.summary != '';"""
    op.execute(
        f"CREATE TRIGGER episode_fts_insert AFTER INSERT ON episode_summaries BEGIN {insert} END"
    )
    op.execute(
        "CREATE TRIGGER episode_fts_delete AFTER DELETE ON episode_summaries BEGIN "
        f"DELETE FROM {_SHARED} WHERE rowid = {old_key}; END"
    )
    op.execute(
        "CREATE TRIGGER episode_fts_update AFTER UPDATE OF summary, audit_log_id, person_id "
        f"ON episode_summaries BEGIN DELETE FROM {_SHARED} WHERE rowid = {old_key}; {insert} END"
    )
    op.execute(f"CREATE VIRTUAL TABLE episode_fts_vocab USING fts5vocab({_SHARED}, 'row')")
