"""episode passages: each episode's conversation windows, embedded, for dense recall

`episode_summaries.passage_vectors`: float16 vectors (n × dim) of sliding 3-turn windows over
the summarised conversation (caesar.memory.passages). Recall uses an episode's best window
next to its summary. NULL until the `memory.passages` worker (or `caesar episodes reembed`)
embeds them, episodes written before this migration included; until then recall uses the
summary alone, as before. A partial index holds the worker's queue.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_NO_PASSAGES = "passage_vectors IS NULL AND summary != ''"


def upgrade() -> None:
    # A plain ADD COLUMN on both engines: a batch (copy-and-rename) migration on SQLite would
    # drop the keyword-index triggers of migration 0002 with the old table.
    op.add_column(
        "episode_summaries", sa.Column("passage_vectors", sa.LargeBinary(), nullable=True)
    )
    # The memory.passages worker's queue: existing episodes are in it from the start.
    op.create_index(
        "idx_episode_summaries_no_passages",
        "episode_summaries",
        ["id"],
        sqlite_where=sa.text(_NO_PASSAGES),
        postgresql_where=sa.text(_NO_PASSAGES),
    )


def downgrade() -> None:
    op.drop_index("idx_episode_summaries_no_passages", table_name="episode_summaries")
    # SQLite ≥ 3.35 drops a column in place (the triggers do not read it).
    op.execute("ALTER TABLE episode_summaries DROP COLUMN passage_vectors")
