"""episode vectors in PostgreSQL (issue #24): pgvector's copy of each episode's embedding

PostgreSQL only (SQLite is untouched): the `vector` extension and a table
`episode_vectors(episode_id, model, created_at, embedding vector)`, kept in step with
`episode_summaries` by a trigger — written in the same transaction as the row, gone with it
(ON DELETE CASCADE) — from the JSON embedding, the record. Trivial (empty) summaries are left
out, as recall skips them. The column has no dimension: each embedding model gets its own
HNSW index over `embedding::vector(<its dimension>)` (memory/search/pgvector.py builds it).
Existing episodes are copied here, in one statement (a batched, resumable copy with progress
is issue #24's item 3).

Where the extension cannot be created (not installed on the server, or the role may not
create it), nothing is created: a warning names the fix, and recall keeps the in-process
vector index. The table is not an SQLAlchemy model: see
caesar.memory.search.pgvector.VECTOR_TABLES.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

import logging

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")

_TABLE = [
    """CREATE TABLE episode_vectors (
        episode_id INTEGER PRIMARY KEY REFERENCES episode_summaries (id) ON DELETE CASCADE,
        model VARCHAR(200) NOT NULL,
        created_at TIMESTAMP WITHOUT TIME ZONE NOT NULL,
        embedding vector NOT NULL
    )""",
    "CREATE INDEX idx_episode_vectors_model_id ON episode_vectors (model, episode_id)",
    """CREATE FUNCTION episode_vectors_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM episode_vectors WHERE episode_id = OLD.id;
        END IF;
        IF NEW.summary <> '' AND jsonb_typeof(NEW.embedding) = 'array'
           AND jsonb_array_length(NEW.embedding) > 0 THEN
            INSERT INTO episode_vectors (episode_id, model, created_at, embedding)
            VALUES (NEW.id, NEW.model, NEW.created_at, NEW.embedding::text::vector);
        END IF;
        RETURN NULL;
    END $$""",
    (
        "CREATE TRIGGER episode_vectors_sync AFTER INSERT OR UPDATE OF summary, embedding, "
        "model, created_at ON episode_summaries FOR EACH ROW EXECUTE FUNCTION episode_vectors_sync()"
    ),
    # Backfill: episodes written before this migration.
    """INSERT INTO episode_vectors (episode_id, model, created_at, embedding)
    SELECT id, model, created_at, embedding::text::vector FROM episode_summaries
    WHERE summary <> '' AND jsonb_typeof(embedding) = 'array' AND jsonb_array_length(embedding) > 0""",
]

FIX = (
    "pgvector is not available to caesar's database role, so recall keeps its in-process "
    "vector index. To search in PostgreSQL instead: install pgvector >= 0.8 on the server and "
    "run `CREATE EXTENSION vector;` in caesar's database as a role allowed to, before "
    "`caesar db upgrade` (docs/configuration.md, PostgreSQL). An install already upgraded "
    "without it stays on the in-process index until the vector migration (issue #24 item 3)."
)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    available = bind.execute(
        sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    ).first()
    if available is None:
        log.warning(FIX)
        return
    try:
        with bind.begin_nested():
            bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
    except sa.exc.DBAPIError:
        log.warning(FIX)
        return
    for statement in _TABLE:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    # The extension stays: other databases' objects, or the operator's, may use it.
    op.execute("DROP TRIGGER IF EXISTS episode_vectors_sync ON episode_summaries")
    op.execute("DROP FUNCTION IF EXISTS episode_vectors_sync()")
    op.execute("DROP TABLE IF EXISTS episode_vectors")
