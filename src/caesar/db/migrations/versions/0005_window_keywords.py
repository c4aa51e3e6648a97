"""window keywords: full text over each episode's conversation windows (issue #6)

SQLite: a contentless FTS5 table `episode_window_fts(body)`, rowid = episode id × 64 + window
number, same tokenizer as `episode_fts`. PostgreSQL: a table `episode_window_fts(episode_id,
window_no, document tsvector)` whose rows go with their episode. Recall scores an episode's
best window by keyword next to the whole episode (caesar.memory.engine.window_keywords). Rows are
written with the window vectors (memory.passages worker, `caesar episodes reembed`); episodes
that already have window vectors are indexed here, from their source chat, with the windowing
of this revision (migrations/_frozen_turns.py, a frozen copy of live code's `windows`, which
tests/test_migrations_frozen.py holds equal to it: a later change to the windowing needs a
migration of its own that rebuilds this index — retention on SQLite derives the windows again
to delete them). Not SQLAlchemy models: see the unmanaged tables in caesar.db.migrate.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.orm import Session

from caesar.db.migrations import _frozen_sqlite as sqlite
from caesar.db.migrations._frozen_turns import conversation_turns, windows

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_SQLITE_TOKENIZE = "porter unicode61 remove_diacritics 2"  # = migration 0002's
_BACKFILL_BATCH = 500
_TABLE = "episode_window_fts"
_PG_INSERT = sa.text(
    "INSERT INTO episode_window_fts (episode_id, window_no, document) "
    "VALUES (:id, :k, to_tsvector('english', :body)) ON CONFLICT DO NOTHING"
)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        op.execute(
            "CREATE VIRTUAL TABLE episode_window_fts USING "
            f"fts5(body, content = '', tokenize = '{_SQLITE_TOKENIZE}')"
        )
    else:
        op.execute(
            "CREATE TABLE episode_window_fts ("
            " episode_id INTEGER NOT NULL REFERENCES episode_summaries (id) ON DELETE CASCADE,"
            " window_no SMALLINT NOT NULL,"
            " document TSVECTOR NOT NULL,"
            " PRIMARY KEY (episode_id, window_no))"
        )
    with Session(bind=bind) as session:
        _backfill(session)


def _backfill(session: Session) -> None:
    """Index the windows of episodes whose window vectors exist already."""
    query = sa.text(
        "SELECT e.id, a.payload FROM episode_summaries AS e "
        "JOIN audit_log AS a ON a.id = e.audit_log_id "
        "WHERE e.passage_vectors IS NOT NULL AND e.summary != '' AND e.id > :after "
        "ORDER BY e.id LIMIT :limit"
    ).columns(sa.column("id", sa.Integer), sa.column("payload", sa.JSON))
    is_sqlite = session.get_bind().dialect.name == "sqlite"
    after = 0
    while True:
        rows = session.execute(query, {"after": after, "limit": _BACKFILL_BATCH}).all()
        for row in rows:
            texts = windows(conversation_turns(row.payload))
            if is_sqlite:  # the shared table of this revision (0017 gives each person theirs)
                if texts and not sqlite.table_has_windows(session, _TABLE, int(row.id)):
                    sqlite.insert_windows(
                        session, _TABLE, int(row.id), texts[: sqlite.WINDOW_SLOTS]
                    )
            elif texts:  # this revision's words (migration 0015 changes them)
                session.execute(
                    _PG_INSERT, [{"id": row.id, "k": k, "body": w} for k, w in enumerate(texts)]
                )
        if len(rows) < _BACKFILL_BATCH:
            return
        after = int(rows[-1].id)


def downgrade() -> None:
    op.execute("DROP TABLE episode_window_fts")
