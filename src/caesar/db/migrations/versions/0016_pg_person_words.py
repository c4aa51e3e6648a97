"""PostgreSQL keeps each person's word counts (issue #23)

Why: the keyword stage's idfs need, for each query word, the number of the person's episodes
that hold it. Counted in `episode_fts`, the GIN index answers with everyone's rows holding the
word and the person's are picked out of them: in a household of 100 people × 1,000 episodes
that statement took 9.84 ms a turn against 1.61 ms alone, nearly all of the household's cost
(docs/performance.md, "A household"). `episode_fts_words` holds (person, word, documents), as
FTS5's vocabulary table does for SQLite, so a count is one row read per word.

- Kept by statement triggers on `episode_fts` (insert, delete, update), each statement's
  changes netted out per (person, word) and applied in that order, so two writers lock the
  rows they share in the same order. An update that changes no count (the words of a row
  indexed again under the same words) locks nothing. A word whose count falls to 0 is
  deleted: a forgotten conversation's words leave no row behind.
- Only for a person whose words are counted (`episode_fts_counts.words_counted`). A person
  new after this migration is counted from their first episode (the column's default). The
  people who had episodes before it are counted afterwards, in the background, one person a
  transaction (memory/search/pg_words.py, `count_words`: `caesar serve` once ready, or
  `caesar db words`), so this migration is quick whatever the size. Until a person is counted
  the keyword stage counts in `episode_fts`, as before.

SQLite: nothing (FTS5's vocabulary is its own).

Downgrade drops the triggers, their function, the column and the table.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05
"""

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# One (person, word, ±1) per lexeme of each row; only counted people's.
_CHANGES = """
    SELECT r.person_id, u.lexeme AS word, {sign} AS n
    FROM {table} AS r CROSS JOIN LATERAL unnest(r.document) AS u
    WHERE r.person_id IN (SELECT person_id FROM episode_fts_counts WHERE words_counted)"""
_APPLY = """
    INSERT INTO episode_fts_words AS w (person_id, word, documents)
    SELECT person_id, word, sum(n) FROM ({changes}) AS d
    GROUP BY person_id, word HAVING sum(n) <> 0 ORDER BY person_id, word
    ON CONFLICT (person_id, word) DO UPDATE SET documents = w.documents + EXCLUDED.documents"""

# A word none of the person's rows holds any more is gone from their vocabulary (what the
# operator forgets is gone: a forgotten conversation's words included).
_EMPTIED = """
    DELETE FROM episode_fts_words AS w
    USING (SELECT DISTINCT r.person_id, u.lexeme AS word
           FROM gone AS r CROSS JOIN LATERAL unnest(r.document) AS u) AS g
    WHERE w.person_id = g.person_id AND w.word = g.word AND w.documents <= 0"""

_UPGRADE = [
    "CREATE TABLE episode_fts_words ("
    " person_id INTEGER NOT NULL, word TEXT NOT NULL, documents INTEGER NOT NULL,"
    " PRIMARY KEY (person_id, word))",
    # the people with episodes now are counted later (pg_words.count_words); new ones at once
    "ALTER TABLE episode_fts_counts ADD COLUMN words_counted BOOLEAN NOT NULL DEFAULT false",
    "ALTER TABLE episode_fts_counts ALTER COLUMN words_counted SET DEFAULT true",
    f"""CREATE FUNCTION episode_fts_worded() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            {_APPLY.format(changes=_CHANGES.format(sign=1, table="added"))};
        ELSIF TG_OP = 'DELETE' THEN
            {_APPLY.format(changes=_CHANGES.format(sign=-1, table="gone"))};
            {_EMPTIED};
        ELSE
            {
        _APPLY.format(
            changes=_CHANGES.format(sign=1, table="added")
            + " UNION ALL "
            + _CHANGES.format(sign=-1, table="gone")
        )
    };
            {_EMPTIED};
        END IF;
        RETURN NULL;
    END $$""",
    # After migration 0014's counter triggers (same event: by name), which create a new
    # person's counter row, counted.
    "CREATE TRIGGER episode_fts_words_insert AFTER INSERT ON episode_fts "
    "REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION episode_fts_worded()",
    "CREATE TRIGGER episode_fts_words_delete AFTER DELETE ON episode_fts "
    "REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION episode_fts_worded()",
    "CREATE TRIGGER episode_fts_words_update AFTER UPDATE ON episode_fts "
    "REFERENCING OLD TABLE AS gone NEW TABLE AS added "
    "FOR EACH STATEMENT EXECUTE FUNCTION episode_fts_worded()",
]

_DOWNGRADE = [
    "DROP TRIGGER IF EXISTS episode_fts_words_update ON episode_fts",
    "DROP TRIGGER IF EXISTS episode_fts_words_delete ON episode_fts",
    "DROP TRIGGER IF EXISTS episode_fts_words_insert ON episode_fts",
    "DROP FUNCTION IF EXISTS episode_fts_worded()",
    "ALTER TABLE episode_fts_counts DROP COLUMN IF EXISTS words_counted",
    "DROP TABLE IF EXISTS episode_fts_words",
]


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        for statement in _UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        for statement in _DOWNGRADE:
            op.execute(statement)
