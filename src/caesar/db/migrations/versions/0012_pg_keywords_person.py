"""PostgreSQL's `episode_fts` carries its episode's person (issue #23)

Why: a person's keyword search, word counts and all-words count in a household found every
person's matches in the GIN index and joined them to `episode_summaries` to drop the others':
among 20 people × 1,000 episodes the counts took 38.7 ms a turn and the search 15.6 ms, against
4.2 and 3.9 ms for one person alone (bench/bench_people.py, `sql_ms_per_turn`). With the person
on the row and a b-tree on it, PostgreSQL ANDs the GIN bitmap with the person's and reads no
one else's rows.

The column is filled from the episodes; two triggers keep it: a row inserted into
`episode_fts` (migration 0002's `episode_fts_sync`) takes its episode's person, and an
episode given to another person moves its row along. SQLite: nothing (migration 0011 keys its
index by person).

Downgrade drops the triggers, the index and the column.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-17
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_UPGRADE = [
    "ALTER TABLE episode_fts ADD COLUMN person_id INTEGER",
    "UPDATE episode_fts AS f SET person_id = e.person_id FROM episode_summaries AS e "
    "WHERE e.id = f.episode_id",
    "ALTER TABLE episode_fts ALTER COLUMN person_id SET NOT NULL",
    "CREATE INDEX idx_episode_fts_person ON episode_fts (person_id, episode_id)",
    """CREATE FUNCTION episode_fts_person() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.person_id := (SELECT person_id FROM episode_summaries WHERE id = NEW.episode_id);
        RETURN NEW;
    END $$""",
    "CREATE TRIGGER episode_fts_person BEFORE INSERT ON episode_fts "
    "FOR EACH ROW EXECUTE FUNCTION episode_fts_person()",
    """CREATE FUNCTION episode_fts_moved() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE episode_fts SET person_id = NEW.person_id WHERE episode_id = NEW.id;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER episode_fts_moved AFTER UPDATE OF person_id ON episode_summaries "
    "FOR EACH ROW WHEN (OLD.person_id IS DISTINCT FROM NEW.person_id) "
    "EXECUTE FUNCTION episode_fts_moved()",
]

_DOWNGRADE = [
    "DROP TRIGGER IF EXISTS episode_fts_moved ON episode_summaries",
    "DROP FUNCTION IF EXISTS episode_fts_moved()",
    "DROP TRIGGER IF EXISTS episode_fts_person ON episode_fts",
    "DROP FUNCTION IF EXISTS episode_fts_person()",
    "DROP INDEX IF EXISTS idx_episode_fts_person",
    "ALTER TABLE episode_fts DROP COLUMN IF EXISTS person_id",
]


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        for statement in _UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        for statement in _DOWNGRADE:
            op.execute(statement)
