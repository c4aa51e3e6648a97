"""episode passages: each episode's conversation windows, embedded, for dense recall

`episode_summaries.passage_vectors`: float16 vectors (n × dim) of sliding 3-turn windows over
the summarised conversation (caesar.memory.passages), written by the summarise worker with the
summary. Recall uses an episode's best window next to its summary. Nullable: episodes written
before this migration have none until `caesar episodes reembed` fills them in; recall then
uses the summary alone, as before.

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


def upgrade() -> None:
    # A plain ADD COLUMN on both engines: a batch (copy-and-rename) migration on SQLite would
    # drop the keyword-index triggers of migration 0002 with the old table.
    op.add_column(
        "episode_summaries", sa.Column("passage_vectors", sa.LargeBinary(), nullable=True)
    )


def downgrade() -> None:
    # SQLite ≥ 3.35 drops a column in place (the triggers do not read it).
    op.execute("ALTER TABLE episode_summaries DROP COLUMN passage_vectors")
