"""memories: dated memories of what was said and done, beside the standing kinds

The `memory.extract` worker now also keeps the things said in a conversation, by the person or
caesar, one short self-contained sentence each (kind `said`; issue #45, docs/memories.md). A
dated memory keeps the turn it was said in (`turn`, in its chat row's conversation), its
conversation (`conversation_id`, conversations.id) and the time its words name, resolved on the
person's clock (`refers_start`, `refers_end`). Forgetting the chat deletes it, as for every
memory (`source_audit_id` ON DELETE CASCADE). The columns are new and empty: the chats from
before the upgrade (up to the extract worker's cursor now) are read for them in the background
by the `memory.dated` worker (`memory_dated_cursor`).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""

from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # nullable columns: SQLite adds them in place, PostgreSQL without a rewrite
    op.add_column("memories", sa.Column("conversation_id", sa.Integer(), nullable=True))
    op.add_column("memories", sa.Column("turn", sa.Integer(), nullable=True))
    op.add_column("memories", sa.Column("refers_start", sa.DateTime(), nullable=True))
    op.add_column("memories", sa.Column("refers_end", sa.DateTime(), nullable=True))
    # a person's dated memories in time order, and a conversation's
    op.create_index("idx_memories_person_kind_said", "memories", ["person_id", "kind", "said_at"])
    op.create_index("idx_memories_conversation", "memories", ["conversation_id"])
    cursor = op.create_table(
        "memory_dated_cursor",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("last_audit_id", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("until_audit_id", sa.Integer(), nullable=False, server_default="0"),
    )
    extracted = op.get_bind().scalar(
        sa.text("SELECT last_audit_id FROM memory_extract_cursor WHERE id = 1")
    )
    op.bulk_insert(
        cursor,
        [
            {
                "id": 1,
                "last_audit_id": 0,
                "updated_at": datetime(2026, 12, 7),
                "until_audit_id": int(extracted or 0),
            }
        ],
    )


def downgrade() -> None:
    op.drop_table("memory_dated_cursor")
    op.drop_index("idx_memories_conversation", table_name="memories")
    op.drop_index("idx_memories_person_kind_said", table_name="memories")
    with op.batch_alter_table("memories") as batch:
        batch.drop_column("refers_end")
        batch.drop_column("refers_start")
        batch.drop_column("turn")
        batch.drop_column("conversation_id")
