"""a person's front-end id (issue #23, step 3: a trusted front-end)

`people.frontend_id`: the user id a trusted front-end (Open WebUI) sends in its user header
with `[people] frontend_token`; unique, NULL for everyone it has not named. Nothing else
changes.

Downgrade drops the column: the people stay, and the front-end meets them as strangers.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-14
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("people", sa.Column("frontend_id", sa.String(255), nullable=True))
    op.create_index("ix_people_frontend_id", "people", ["frontend_id"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_people_frontend_id", table_name="people")
    # In place, on both engines (SQLite ≥ 3.35): a batch copy of `people` would drop the table
    # every person_id refers to, which SQLite's foreign keys refuse.
    op.execute("ALTER TABLE people DROP COLUMN frontend_id")
