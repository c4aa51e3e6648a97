"""initial schema: audit log, facts, episode summaries (ADR-0034 §1), semantic chunks, cursors

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from datetime import datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(JSONB(), "postgresql")


def _cursor_table(name: str) -> None:
    table = op.create_table(
        name,
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("last_audit_id", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
    )
    # The singleton row exists from the start, so workers only ever UPDATE it (compare-and-swap).
    op.bulk_insert(table, [{"id": 1, "last_audit_id": 0, "updated_at": datetime(2026, 1, 1)}])


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("subject_id", sa.Integer(), nullable=True),
        sa.Column("subject_key", sa.String(200), nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index("idx_audit_log_type_id", "audit_log", ["event_type", "id"])
    op.create_index("idx_audit_log_created", "audit_log", ["created_at"])
    op.create_index("idx_audit_log_type_subject_key", "audit_log", ["event_type", "subject_key"])
    op.create_index("idx_audit_log_type_subject_id", "audit_log", ["event_type", "subject_id"])

    op.create_table(
        "facts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("key", sa.String(100), nullable=False, unique=True),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column(
            "source_audit_id",
            sa.Integer(),
            sa.ForeignKey("audit_log.id", ondelete="SET NULL"),
            nullable=True,
        ),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
    )
    op.create_index("idx_facts_source_audit", "facts", ["source_audit_id"])

    op.create_table(
        "episode_summaries",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "audit_log_id",
            sa.Integer(),
            sa.ForeignKey("audit_log.id", ondelete="CASCADE"),
            nullable=False,
            unique=True,
        ),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("embedding", JSON, nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("last_recalled_at", sa.DateTime(), nullable=True),
        sa.Column("recall_count", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("embedding_f32", sa.LargeBinary(), nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index("idx_episode_summaries_audit", "episode_summaries", ["audit_log_id"])
    op.create_index("idx_episode_summaries_created", "episode_summaries", ["created_at"])
    op.create_index("idx_episode_summaries_model_id", "episode_summaries", ["model", "id"])

    op.create_table(
        "semantic_chunks",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "audit_log_id",
            sa.Integer(),
            sa.ForeignKey("audit_log.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("chunk_index", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("embedding", JSON, nullable=False),
        sa.Column("embedding_f32", sa.LargeBinary(), nullable=True),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("audit_log_id", "chunk_index", name="uq_semantic_chunks_audit_chunk"),
        sqlite_autoincrement=True,
    )
    op.create_index("idx_semantic_chunks_model_id", "semantic_chunks", ["model", "id"])

    for name in ("memory_extract_cursor", "memory_summarise_cursor", "semantic_index_cursor"):
        _cursor_table(name)


def downgrade() -> None:
    for name in ("semantic_index_cursor", "memory_summarise_cursor", "memory_extract_cursor"):
        op.drop_table(name)
    op.drop_table("semantic_chunks")
    op.drop_table("episode_summaries")
    op.drop_table("facts")
    op.drop_table("audit_log")
