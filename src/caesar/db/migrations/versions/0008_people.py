"""people: who caesar remembers for (issue #23)

A `people` table: a unique name, the SHA-256 of the person's token (never the token), whether
the person is the owner, when they were added. The owner is created here, on a fresh database
and on an upgrade alike: named "owner" (`caesar people rename owner NAME`), with no token of
their own, because the owner's token is the `api_token` setting, which stays where it is.
At most one owner (a partial unique index). Nothing else changes: the memory there is stays
the one memory, until a later revision makes each row a person's.

Downgrade drops the table, with every person added since and their tokens.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-10
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

OWNER_NAME = "owner"  # caesar.people.OWNER_NAME, as of this revision


def _utcnow() -> datetime:
    """Naive UTC, as caesar stores times (caesar.clock.utcnow, as of this revision)."""
    return datetime.now(UTC).replace(tzinfo=None)


def upgrade() -> None:
    people = op.create_table(
        "people",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("token_hash", sa.String(64), nullable=True, unique=True),
        sa.Column("is_owner", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "uq_people_owner",
        "people",
        ["is_owner"],
        unique=True,
        sqlite_where=sa.text("is_owner"),
        postgresql_where=sa.text("is_owner"),
    )
    op.bulk_insert(
        people,
        [{"name": OWNER_NAME, "token_hash": None, "is_owner": True, "created_at": _utcnow()}],
    )


def downgrade() -> None:
    op.drop_index("uq_people_owner", table_name="people")
    op.drop_table("people")
