"""episode vectors in PostgreSQL (issue #24): pgvector's copy of each episode's embedding

PostgreSQL only (SQLite is untouched): the `vector` extension, the table `episode_vectors` kept
in step with `episode_summaries` by a trigger, `episode_vectors_backfill`, where the copy
of the episodes written before the trigger stands, and an index of episode_summaries' recall
counts per model (migrations/_frozen_pgvector.py has the schema: a frozen copy of live code's,
held equal to it by tests/test_migrations_frozen.py). Nothing is copied here, so the upgrade
is quick whatever the size: `caesar serve` copies them in the background after its warm-up —
batched, resumable, recall searching its in-process index meanwhile — and builds the HNSW
index; or `caesar db vectors` does.

Where the extension cannot be created (not installed on the server, or the role may not
create it), nothing is created: a warning names the fix, and recall keeps the in-process
vector index; once fixed, `caesar db vectors` (or the next `caesar serve`) creates it all.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

import logging

from alembic import op
from sqlalchemy.orm import Session

from caesar.db.migrations import _frozen_pgvector as pgvector_migration
from caesar.errors import ConfigError

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    try:
        pgvector_migration.install(Session(bind=bind))
    except ConfigError as exc:
        log.warning("%s", exc)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    # The extension stays: other databases' objects, or the operator's, may use it.
    op.execute("DROP TRIGGER IF EXISTS episode_vectors_sync ON episode_summaries")
    op.execute("DROP FUNCTION IF EXISTS episode_vectors_sync()")
    op.execute("DROP TABLE IF EXISTS episode_vectors")
    op.execute("DROP TABLE IF EXISTS episode_vectors_backfill")
    op.execute(f"DROP INDEX IF EXISTS {pgvector_migration.RECALLS_INDEX}")
