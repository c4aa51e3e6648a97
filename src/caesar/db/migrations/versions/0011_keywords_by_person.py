"""episode keywords keyed by person (issue #23): SQLite's `episode_fts` rowid becomes
person_id << 40 | episode id

Why: FTS5 can seek a rowid range but cannot join. With the rowid the episode id, one
person's questions in a household matched everybody's episodes and then dropped the others'
by a join to `episode_summaries` — or, counting a word, looked each of the person's episodes
up in FTS5 one by one (SQLite's plan): 370 ms a turn among 20 people × 2,000 episodes, against
4 ms alone. Keyed by person, a person's rows are one rowid range, which FTS5 seeks in every
segment: what a question reads is that person's, as in an install of one
(memory/search/sqlite.py has the key). bm25's document counts stay the whole table's
(docs/household.md, "Known limits").

The rows are copied into a new table under their new rowids (the words as stored, not read
again from the chats), the triggers key by the episode's person (and re-key it should its
person change), and the vocabulary (migration 0003) is rebuilt over the new table. PostgreSQL:
nothing changes (its index is a table joined by episode id).

Downgrade: the same copy back to rowid = episode id.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-16
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# Must equal memory/search/sqlite.py's PERSON_SHIFT (a migration does not import live code).
_SHIFT = 40
# Must equal migration 0002's tokenizer.
_TOKENIZE = "porter unicode61 remove_diacritics 2"
_CONVERSATION = """
    coalesce((SELECT group_concat(json_extract(m.value, '$.content'), char(10))
              FROM json_each(a.payload, '$.messages') AS m
              WHERE json_type(m.value) = 'object'
                AND json_extract(m.value, '$.role') IN ('user', 'assistant')), '')
    || char(10) || coalesce(json_extract(a.payload, '$.reply'), '')
"""
_TRIGGERS = ("episode_fts_insert", "episode_fts_delete", "episode_fts_update")


def _triggers(new_key: str, old_key: str, update_of: str) -> list[str]:
    insert = f"""
        INSERT INTO episode_fts (rowid, summary, conversation)
        SELECT {new_key}, new.summary, {_CONVERSATION}
        FROM audit_log AS a WHERE a.id = new.audit_log_id AND new.summary != '';
    """
    return [
        f"CREATE TRIGGER episode_fts_insert AFTER INSERT ON episode_summaries BEGIN {insert} END",
        (
            "CREATE TRIGGER episode_fts_delete AFTER DELETE ON episode_summaries BEGIN "
            f"DELETE FROM episode_fts WHERE rowid = {old_key}; END"
        ),
        (
            f"CREATE TRIGGER episode_fts_update AFTER UPDATE OF {update_of} ON episode_summaries "
            f"BEGIN DELETE FROM episode_fts WHERE rowid = {old_key}; {insert} END"
        ),
    ]


def _rekey(select_rows: str, triggers: list[str]) -> None:
    """Copy episode_fts's rows under new rowids (`select_rows`: rowid, summary, conversation
    from `episode_fts AS f`) into a fresh table that takes its name, with `triggers`."""
    for trigger in _TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    op.execute("DROP TABLE IF EXISTS episode_fts_vocab")
    op.execute(
        "CREATE VIRTUAL TABLE episode_fts_rekeyed USING "
        f"fts5(summary, conversation, tokenize = '{_TOKENIZE}')"
    )
    op.execute(f"INSERT INTO episode_fts_rekeyed (rowid, summary, conversation) {select_rows}")
    op.execute("DROP TABLE episode_fts")
    op.execute("ALTER TABLE episode_fts_rekeyed RENAME TO episode_fts")
    op.execute("CREATE VIRTUAL TABLE episode_fts_vocab USING fts5vocab(episode_fts, 'row')")
    for statement in triggers:
        op.execute(statement)


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    _rekey(
        f"SELECT (e.person_id << {_SHIFT}) | f.rowid, f.summary, f.conversation "
        "FROM episode_fts AS f JOIN episode_summaries AS e ON e.id = f.rowid ORDER BY 1",
        _triggers(
            f"(new.person_id << {_SHIFT}) | new.id",
            f"(old.person_id << {_SHIFT}) | old.id",
            "summary, audit_log_id, person_id",
        ),
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    _rekey(
        f"SELECT f.rowid & {(1 << _SHIFT) - 1}, f.summary, f.conversation "
        "FROM episode_fts AS f ORDER BY 1",
        _triggers("new.id", "old.id", "summary, audit_log_id"),
    )
