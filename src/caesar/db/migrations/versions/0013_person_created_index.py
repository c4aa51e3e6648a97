"""a person's episodes by time (issue #22 on top of #23)

`idx_episode_summaries_person_created (person_id, created_at)`: a message that names a span of
time reads the person's conversations held in it, newest first (memory/search/hybrid.py,
`dated_episodes`). Without it SQLite read the person's whole (person_id, model, id) index and
sorted it: 280–450 ms for a dated message at 100k episodes (bench/bench_turn.py).

Downgrade drops the index; nothing else changes.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "idx_episode_summaries_person_created", "episode_summaries", ["person_id", "created_at"]
    )


def downgrade() -> None:
    op.drop_index("idx_episode_summaries_person_created", table_name="episode_summaries")
