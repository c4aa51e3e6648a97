"""episode keyword index (issue #6): full text over each episode's summary and source chat

SQLite: an FTS5 table `episode_fts(summary, conversation)` whose rowid is the episode id.
PostgreSQL: a table `episode_fts(episode_id, document tsvector)` with a GIN index, the summary
weighted 'A' and the conversation 'B'. On both, triggers on `episode_summaries` keep it in step:
the summarise worker needs no extra call, and the conversation text is read from the source
`audit_log` payload (its user/assistant `messages` plus `reply`, as memory/transcript.py reads
it). Empty (trivial) summaries are not indexed, as recall skips them. Existing episodes are
indexed here. The tables are not SQLAlchemy models: see caesar.db.migrate.unmanaged_tables.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Porter stemming so "hiking" finds "hiked"; diacritics folded so "cafe" finds "café".
_SQLITE_TOKENIZE = "porter unicode61 remove_diacritics 2"

# The conversation text of audit row `a`: user/assistant message contents, then the reply.
_SQLITE_CONVERSATION = """
    coalesce((SELECT group_concat(json_extract(m.value, '$.content'), char(10))
              FROM json_each(a.payload, '$.messages') AS m
              WHERE json_type(m.value) = 'object'
                AND json_extract(m.value, '$.role') IN ('user', 'assistant')), '')
    || char(10) || coalesce(json_extract(a.payload, '$.reply'), '')
"""

_SQLITE_INSERT = f"""
    INSERT INTO episode_fts (rowid, summary, conversation)
    SELECT new.id, new.summary, {_SQLITE_CONVERSATION}
    FROM audit_log AS a WHERE a.id = new.audit_log_id AND new.summary != '';
"""

_SQLITE = [
    f"CREATE VIRTUAL TABLE episode_fts USING fts5(summary, conversation, tokenize = '{_SQLITE_TOKENIZE}')",
    f"CREATE TRIGGER episode_fts_insert AFTER INSERT ON episode_summaries BEGIN {_SQLITE_INSERT} END",
    (
        "CREATE TRIGGER episode_fts_delete AFTER DELETE ON episode_summaries BEGIN "
        "DELETE FROM episode_fts WHERE rowid = old.id; END"
    ),
    (
        "CREATE TRIGGER episode_fts_update AFTER UPDATE OF summary, audit_log_id ON episode_summaries "
        f"BEGIN DELETE FROM episode_fts WHERE rowid = old.id; {_SQLITE_INSERT} END"
    ),
    # Backfill: episodes written before this migration.
    (
        f"INSERT INTO episode_fts (rowid, summary, conversation) "
        f"SELECT e.id, e.summary, {_SQLITE_CONVERSATION} "
        f"FROM episode_summaries AS e JOIN audit_log AS a ON a.id = e.audit_log_id "
        f"WHERE e.summary != ''"
    ),
]

_PG_CONVERSATION = """
    coalesce((SELECT string_agg(m.value ->> 'content', E'\\n' ORDER BY m.ordinality)
              FROM jsonb_array_elements(
                  CASE WHEN jsonb_typeof(a.payload -> 'messages') = 'array'
                       THEN a.payload -> 'messages' ELSE '[]'::jsonb END
              ) WITH ORDINALITY AS m(value, ordinality)
              WHERE jsonb_typeof(m.value) = 'object'
                AND m.value ->> 'role' IN ('user', 'assistant')), '')
    || E'\\n' || coalesce(a.payload ->> 'reply', '')
"""


def _pg_document(summary: str) -> str:
    return (
        f"setweight(to_tsvector('english', {summary}), 'A') || "
        f"setweight(to_tsvector('english', {_PG_CONVERSATION}), 'B')"
    )


_PG = [
    """CREATE TABLE episode_fts (
        episode_id INTEGER PRIMARY KEY REFERENCES episode_summaries (id) ON DELETE CASCADE,
        document TSVECTOR NOT NULL
    )""",
    "CREATE INDEX idx_episode_fts_document ON episode_fts USING GIN (document)",
    f"""CREATE FUNCTION episode_fts_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM episode_fts WHERE episode_id = OLD.id;
        END IF;
        IF NEW.summary <> '' THEN
            INSERT INTO episode_fts (episode_id, document)
            SELECT NEW.id, {_pg_document("NEW.summary")}
            FROM audit_log AS a WHERE a.id = NEW.audit_log_id;
        END IF;
        RETURN NULL;
    END $$""",
    (
        "CREATE TRIGGER episode_fts_sync AFTER INSERT OR UPDATE OF summary, audit_log_id "
        "ON episode_summaries FOR EACH ROW EXECUTE FUNCTION episode_fts_sync()"
    ),
    (
        f"INSERT INTO episode_fts (episode_id, document) SELECT e.id, {_pg_document('e.summary')} "
        f"FROM episode_summaries AS e JOIN audit_log AS a ON a.id = e.audit_log_id "
        f"WHERE e.summary <> ''"
    ),
]


def upgrade() -> None:
    statements = _SQLITE if op.get_bind().dialect.name == "sqlite" else _PG
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for trigger in ("episode_fts_insert", "episode_fts_delete", "episode_fts_update"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS episode_fts")
    else:
        op.execute("DROP TRIGGER IF EXISTS episode_fts_sync ON episode_summaries")
        op.execute("DROP FUNCTION IF EXISTS episode_fts_sync()")
        op.execute("DROP TABLE IF EXISTS episode_fts")
