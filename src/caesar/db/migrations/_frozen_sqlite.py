"""SQLite's full-text tables as the migrations write them: a frozen copy, as of 2026-12-07, of

- `caesar.memory.search.sqlite` (now `caesar.memory.engine.sqlite`): `WINDOW_SLOTS`,
  `EPISODE_MASK`, `fts_key`, `person_keys`, `rowids`, `sqlite_rows`, `table_has_windows`,
  `insert_windows`, `delete_windows`, `chat_windows` (there through the ORM models; here the
  same statement in SQL, so that no model, and nothing the models import, is loaded);
- `caesar.memory.search.person_tables` (now `caesar.memory.engine.person_tables`):
  `SQLITE_TOKENIZE`, `PERSON_SHIFT`, `CONVERSATION_TEXT`, `fts_table`, `window_table`,
  `person_index_ddl`, `drop_person_index` (live code has since made these `PersonTables`'
  `fts`, `windows`, `rowid`, `rowids`, `ddl` and `drop`).

A migration carries the code it runs, so that its meaning does not drift when live code
changes. Do not edit this to follow live code: a change there to the tables, their keys or the
windows they index needs a migration of its own, with its own copy.
tests/test_migrations_frozen.py fails when this and live code disagree.

Each person's tables (migration 0017): `episode_fts_p<id>`, rowid = person id << PERSON_SHIFT
| episode id, kept by triggers; `episode_window_fts_p<id>`, contentless, rowid = episode id ×
WINDOW_SLOTS + window number.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from caesar.db.migrations._frozen_turns import conversation_turns, windows

SQLITE_TOKENIZE = "porter unicode61 remove_diacritics 2"
PERSON_SHIFT = 40
EPISODE_MASK = (1 << PERSON_SHIFT) - 1
WINDOW_SLOTS = 64
# A chat row's conversation text, as the index holds it (= migration 0002's).
CONVERSATION_TEXT = """
    coalesce((SELECT group_concat(json_extract(m.value, '$.content'), char(10))
              FROM json_each(a.payload, '$.messages') AS m
              WHERE json_type(m.value) = 'object'
                AND json_extract(m.value, '$.role') IN ('user', 'assistant')), '')
    || char(10) || coalesce(json_extract(a.payload, '$.reply'), '')
"""


def fts_table(person: int) -> str:
    return f"episode_fts_p{int(person)}"


def window_table(person: int) -> str:
    return f"episode_window_fts_p{int(person)}"


def fts_key(person: int, episode_id: int) -> int:
    return (person << PERSON_SHIFT) | episode_id


def person_keys(person: int) -> tuple[int, int]:
    """The smallest and largest `episode_fts` rowid `person`'s episodes may take."""
    return fts_key(person, 0), fts_key(person, EPISODE_MASK)


def rowids(episode_id: int) -> range:
    """The rowids episode `episode_id`'s windows may take, in window order."""
    return range(episode_id * WINDOW_SLOTS, (episode_id + 1) * WINDOW_SLOTS)


def sqlite_rows(episode_id: int, texts: Sequence[str]) -> list[dict[str, object]]:
    """Parameters for the windows' rows of a window table (rowid, body)."""
    return [{"rowid": r, "body": w} for r, w in zip(rowids(episode_id), texts, strict=False)]


def person_index_ddl(person: int) -> list[str]:
    """Statements creating `person`'s full-text tables and the triggers that keep their episode
    table (idempotent)."""
    p, fts, window_fts = int(person), fts_table(person), window_table(person)
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
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {window_fts} USING "
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
    """Drop `person`'s full-text tables and triggers."""
    fts = fts_table(person)
    for sql in (
        *(f"DROP TRIGGER IF EXISTS {fts}_{t}" for t in ("insert", "delete", "update")),
        f"DROP TABLE IF EXISTS {fts}_vocab",
        f"DROP TABLE IF EXISTS {fts}",
        f"DROP TABLE IF EXISTS {window_table(person)}",
    ):
        connection.exec_driver_sql(sql)


def table_has_windows(session: Session, table: str, episode_id: int) -> bool:
    span = rowids(episode_id)
    sql = f"SELECT 1 FROM {table} WHERE rowid BETWEEN :lo AND :hi LIMIT 1"
    return session.execute(sa.text(sql), {"lo": span[0], "hi": span[-1]}).first() is not None


def insert_windows(session: Session, table: str, episode_id: int, texts: Sequence[str]) -> int:
    rows = sqlite_rows(episode_id, texts)
    session.execute(sa.text(f"INSERT INTO {table} (rowid, body) VALUES (:rowid, :body)"), rows)
    return len(rows)


def delete_windows(session: Session, table: str, episode_id: int, texts: Sequence[str]) -> int:
    """Drop an episode's windows from a contentless table, given the texts it indexed (SQLite
    < 3.43 has no `contentless_delete`). An episode with none indexed is left alone: a 'delete'
    of words that are not there would corrupt the index."""
    if not table_has_windows(session, table, episode_id):
        return 0
    session.execute(
        sa.text(f"INSERT INTO {table} ({table}, rowid, body) VALUES ('delete', :rowid, :body)"),
        sqlite_rows(episode_id, texts),
    )
    return len(texts)


_CHATS = (
    sa.text(
        "SELECT e.id, a.payload FROM episode_summaries AS e "
        "JOIN audit_log AS a ON a.id = e.audit_log_id WHERE e.id IN :ids"
    )
    .bindparams(sa.bindparam("ids", expanding=True))
    .columns(sa.column("id", sa.Integer), sa.column("payload", sa.JSON))
)


def chat_windows(session: Session, episode_ids: Sequence[int]) -> list[tuple[int, list[str]]]:
    """(episode id, its windows derived again from its chat, which the audit log never
    changes) for those of `episode_ids` still there."""
    if not episode_ids:
        return []
    rows = session.execute(_CHATS, {"ids": list(episode_ids)}).all()
    return [(int(r.id), windows(conversation_turns(r.payload))) for r in rows]
