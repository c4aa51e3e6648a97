"""Each person's own SQLite full-text tables (migration 0017; memory/search/sqlite.py searches
them): their names and the statements that make and drop them. Imports nothing of caesar's, so
the `Person` model's events (db/models.py) can make a person's tables as the person is
written."""

from __future__ import annotations

import re

from sqlalchemy import Connection

# Must equal migration 0002's FTS5 tokenizer: query words are tokenized with it to look their
# document counts up in the index's vocabulary (porter stems "hiking" to "hike").
SQLITE_TOKENIZE = "porter unicode61 remove_diacritics 2"
# `episode_fts` rowid of person p's episode e: p << PERSON_SHIFT | e (migration 0011).
PERSON_SHIFT = 40

# A person's tables: episode_fts_p<id> (+ _vocab) and episode_window_fts_p<id>, with FTS5's
# shadow tables (_data, _idx, _content, _docsize, _config).
PERSON_INDEX = re.compile(r"episode_(window_)?fts_p\d+(_[a-z]+)?")
# A chat row's conversation text, as the index holds it (= migration 0002's).
CONVERSATION_TEXT = """
    coalesce((SELECT group_concat(json_extract(m.value, '$.content'), char(10))
              FROM json_each(a.payload, '$.messages') AS m
              WHERE json_type(m.value) = 'object'
                AND json_extract(m.value, '$.role') IN ('user', 'assistant')), '')
    || char(10) || coalesce(json_extract(a.payload, '$.reply'), '')
"""


def fts_table(person: int) -> str:
    """`person`'s episode full-text table. Pure."""
    return f"episode_fts_p{int(person)}"


def window_table(person: int) -> str:
    """`person`'s window full-text table. Pure."""
    return f"episode_window_fts_p{int(person)}"


def is_person_index(name: str) -> bool:
    """Whether `name` is one of a person's full-text tables (or its FTS5 shadow). Pure."""
    return PERSON_INDEX.fullmatch(name) is not None


def person_index_ddl(person: int) -> list[str]:
    """Statements creating `person`'s full-text tables and the triggers that keep their episode
    table (idempotent). Pure."""
    p, fts, windows = int(person), fts_table(person), window_table(person)
    new_key = f"(new.person_id << {PERSON_SHIFT}) | new.id"
    old_key = f"(old.person_id << {PERSON_SHIFT}) | old.id"
    insert = f"""
        INSERT INTO {fts} (rowid, summary, conversation)
        SELECT {new_key}, new.summary, {CONVERSATION_TEXT}
        FROM audit_log AS a
        WHERE a.id = new.audit_log_id AND new.summary != '' AND new.person_id = {p};"""
    return [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {fts} USING "
        f"fts5(summary, conversation, tokenize = '{SQLITE_TOKENIZE}')",
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {fts}_vocab USING fts5vocab({fts}, 'row')",
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {windows} USING "
        f"fts5(body, content = '', tokenize = '{SQLITE_TOKENIZE}')",
        f"CREATE TRIGGER IF NOT EXISTS {fts}_insert AFTER INSERT ON episode_summaries "
        f"WHEN new.person_id = {p} BEGIN {insert} END",
        f"CREATE TRIGGER IF NOT EXISTS {fts}_delete AFTER DELETE ON episode_summaries "
        f"WHEN old.person_id = {p} BEGIN DELETE FROM {fts} WHERE rowid = {old_key}; END",
        f"CREATE TRIGGER IF NOT EXISTS {fts}_update "
        "AFTER UPDATE OF summary, audit_log_id, person_id ON episode_summaries "
        f"WHEN old.person_id = {p} OR new.person_id = {p} "
        f"BEGIN DELETE FROM {fts} WHERE rowid = {old_key}; {insert} END",
    ]


def drop_person_index(connection: Connection, person: int) -> None:
    """Drop `person`'s full-text tables and triggers: every word of theirs goes with them."""
    fts = fts_table(person)
    for sql in (
        *(f"DROP TRIGGER IF EXISTS {fts}_{t}" for t in ("insert", "delete", "update")),
        f"DROP TABLE IF EXISTS {fts}_vocab",
        f"DROP TABLE IF EXISTS {fts}",
        f"DROP TABLE IF EXISTS {window_table(person)}",
    ):
        connection.exec_driver_sql(sql)


def create_person_index(connection: Connection, person: int) -> None:
    for sql in person_index_ddl(person):
        connection.exec_driver_sql(sql)
