"""episode turn vectors: each turn of an episode's conversation, embedded, for its excerpts

`episode_summaries.turn_vectors`: float16 vectors (n × dim) of the summarised conversation's
turns (caesar.memory.passages.turn_texts), one per turn with text, in order. The
excerpts shown from a conversation are picked by their windows' relevance; a turn's own cosine
with the message finds the turn that answers it among windows that all say the message's words
(docs/recall-by-time.md, "Turns that answer"). NULL until the `memory.passages` worker embeds
them, episodes written before this migration included (the worker then embeds their turns
alone: their windows are kept); until then their excerpts are picked by the windows alone, as
before. A partial index holds the worker's queue.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_NO_TURNS = "turn_vectors IS NULL AND summary != ''"


def upgrade() -> None:
    # A plain ADD COLUMN on both engines, as migration 0004's (a batch migration on SQLite
    # would drop the keyword-index triggers with the old table).
    op.add_column("episode_summaries", sa.Column("turn_vectors", sa.LargeBinary(), nullable=True))
    # The memory.passages worker's queue: existing episodes are in it from the start.
    op.create_index(
        "idx_episode_summaries_no_turns",
        "episode_summaries",
        ["id"],
        sqlite_where=sa.text(_NO_TURNS),
        postgresql_where=sa.text(_NO_TURNS),
    )


def downgrade() -> None:
    op.drop_index("idx_episode_summaries_no_turns", table_name="episode_summaries")
    op.execute("ALTER TABLE episode_summaries DROP COLUMN turn_vectors")
