"""PostgreSQL keeps each person's number of indexed episodes (issue #24)

Why: the keyword stage's idfs need N, the person's episodes in `episode_fts`, on every recall.
Counted there, it read every one of the person's rows: 61 of a 78 ms recall over one person's
1M episodes (docs/performance.md, "pgvector"). `episode_fts_counts` holds it, kept by
statement triggers on `episode_fts` (insert, delete, and an update that moves rows to another
person), so a recall reads one row, exact in every transaction, a forget included.

SQLite: nothing (FTS5's own tables give its counts).

Downgrade drops the triggers, their functions and the table.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# Each statement's rows grouped by person, applied in person order (so two statements lock
# the counters they share in the same order).
_UPGRADE = [
    "CREATE TABLE episode_fts_counts ("
    " person_id INTEGER PRIMARY KEY, documents BIGINT NOT NULL DEFAULT 0)",
    "INSERT INTO episode_fts_counts (person_id, documents) "
    "SELECT person_id, count(*) FROM episode_fts GROUP BY person_id",
    """CREATE FUNCTION episode_fts_counted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            UPDATE episode_fts_counts AS c SET documents = c.documents - g.n
            FROM (SELECT person_id, count(*) AS n FROM gone GROUP BY person_id
                  ORDER BY person_id) AS g
            WHERE c.person_id = g.person_id;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO episode_fts_counts AS c (person_id, documents)
            SELECT person_id, count(*) FROM added GROUP BY person_id ORDER BY person_id
            ON CONFLICT (person_id) DO UPDATE SET documents = c.documents + EXCLUDED.documents;
        END IF;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER episode_fts_count_insert AFTER INSERT ON episode_fts "
    "REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION episode_fts_counted()",
    "CREATE TRIGGER episode_fts_count_delete AFTER DELETE ON episode_fts "
    "REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION episode_fts_counted()",
    # (transition tables take no column list: every update, netted out per person)
    "CREATE TRIGGER episode_fts_count_update AFTER UPDATE ON episode_fts "
    "REFERENCING OLD TABLE AS gone NEW TABLE AS added "
    "FOR EACH STATEMENT EXECUTE FUNCTION episode_fts_counted()",
]

_DOWNGRADE = [
    "DROP TRIGGER IF EXISTS episode_fts_count_update ON episode_fts",
    "DROP TRIGGER IF EXISTS episode_fts_count_delete ON episode_fts",
    "DROP TRIGGER IF EXISTS episode_fts_count_insert ON episode_fts",
    "DROP FUNCTION IF EXISTS episode_fts_counted()",
    "DROP TABLE IF EXISTS episode_fts_counts",
]


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        for statement in _UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        for statement in _DOWNGRADE:
            op.execute(statement)
