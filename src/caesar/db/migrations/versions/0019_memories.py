"""memories: the things a person said, kept on their own; first the standing kinds

`memories` holds what the person says about themselves that holds until they say otherwise:
instructions to caesar, constraints, preferences and profile (issue #46, docs/standing.md).
The dated memories of what was said and done (issue #45) extend this table. A memory is
derived from the chat it was said in: deleting that chat deletes it (ON DELETE CASCADE). The
table is new and empty; the `memory.extract` worker fills it from chats it extracts from
now on; the `memory.standing` worker reads the chats from before the upgrade in the background.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07
"""

from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memories",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("person_id", sa.Integer(), sa.ForeignKey("people.id"), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("slot", sa.String(40), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("about", sa.String(200), nullable=False),
        sa.Column("polarity", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("speaker", sa.String(20), nullable=False, server_default="person"),
        sa.Column(
            "source_audit_id",
            sa.Integer(),
            sa.ForeignKey("audit_log.id", ondelete="CASCADE"),
            nullable=True,
        ),
        sa.Column("said_at", sa.DateTime(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column(
            "superseded_by",
            sa.Integer(),
            sa.ForeignKey("memories.id", ondelete="SET NULL"),
            nullable=True,
        ),
        sa.Column(
            "contradicts",
            sa.Integer(),
            sa.ForeignKey("memories.id", ondelete="SET NULL"),
            nullable=True,
        ),
        sa.Column("edit_count", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("vector", sa.LargeBinary(), nullable=True),
        sa.Column("model", sa.String(200), nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "idx_memories_person_current", "memories", ["person_id", "superseded_by", "kind"]
    )
    op.create_index("idx_memories_source_audit", "memories", ["source_audit_id"])
    op.create_index("idx_memories_superseded_by", "memories", ["superseded_by"])
    op.create_index("idx_memories_contradicts", "memories", ["contradicts"])
    cursor = op.create_table(
        "memory_standing_cursor",
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
    op.drop_table("memory_standing_cursor")
    op.drop_table("memories")
