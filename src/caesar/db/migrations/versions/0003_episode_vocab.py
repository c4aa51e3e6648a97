"""episode keyword vocabulary: per-term document counts of the SQLite keyword index

An `fts5vocab` table over `episode_fts` (one row per indexed token: episodes holding it,
occurrences). Hybrid recall reads a query word's document frequency from it in one indexed
lookup instead of a COUNT over the index per word, and uses it to leave very common words out
of the MATCH. It is a view of the index, so it needs no backfill or triggers. PostgreSQL
counts through its GIN index and gets nothing here. Not an SQLAlchemy model: see
caesar.db.migrate.unmanaged_tables.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("CREATE VIRTUAL TABLE episode_fts_vocab USING fts5vocab(episode_fts, 'row')")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE IF EXISTS episode_fts_vocab")
