"""Migrations 0011 and 0017 (issue #23): SQLite's episode keywords keyed by person — every row
kept under person_id << 40 | episode id (0011), in its person's own table (0017), the triggers
keying new, re-owned and deleted episodes, the backend answering each person from their own
rows; the downgrade gives the episode ids back, in one table."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from conftest import sqlite_fts_tables

from caesar.db import Database, migrate
from caesar.memory import passages
from caesar.memory.engine.person_tables import PersonTables
from caesar.memory.engine.sqlite import WINDOW_SLOTS, SqliteFullText, sqlite_rows
from caesar.memory.scope import Scope
from caesar.memory.transcript import conversation_turns

WHEN = datetime(2026, 12, 1, 12, 0)


@pytest.fixture
def at_0010(tmp_path: Path) -> Iterator[Database]:
    """SQLite only: PostgreSQL's index is a table joined by episode id, which 0011 leaves be."""
    db = Database(f"sqlite:///{tmp_path / 'caesar.db'}")
    migrate.upgrade(db, "0010")
    yield db
    db.dispose()


def _people(db: Database) -> tuple[int, int]:
    """(the owner, Bea), Bea added."""
    with db.engine.begin() as c:
        owner = int(c.scalar(sa.text("SELECT id FROM people WHERE is_owner")))
        c.execute(
            sa.text("INSERT INTO people (name, is_owner, created_at) VALUES ('Bea', false, :t)"),
            {"t": WHEN},
        )
        bea = int(c.scalar(sa.text("SELECT id FROM people WHERE name = 'Bea'")))
    return owner, bea


def _episode(db: Database, n: int, person: int, words: str) -> None:
    chat = json.dumps({"messages": [{"role": "user", "content": words}], "reply": "ok"})
    with db.engine.begin() as c:
        c.execute(
            sa.text(
                "INSERT INTO audit_log (id, event_type, created_at, payload, subject_id, person_id) "
                "VALUES (:n, 'chat.completed', :t, :p, :n, :who)"
            ),
            {"n": n, "t": WHEN, "p": chat, "who": person},
        )
        c.execute(
            sa.text(
                "INSERT INTO episode_summaries (id, audit_log_id, summary, embedding, model, "
                "created_at, person_id) VALUES (:n, :n, :s, '[0.6, 0.8]', 'm', :t, :who)"
            ),
            {"n": n, "s": f"talked about {words}", "t": WHEN, "who": person},
        )


def _rowids(db: Database, word: str, table: str | None = None) -> list[int]:
    found = []
    with db.engine.connect() as c:
        for t in [table] if table else sqlite_fts_tables(db):
            sql = f"SELECT rowid FROM {t} WHERE {t} MATCH :w"
            found += [int(i) for i in c.execute(sa.text(sql), {"w": word}).scalars()]
    return sorted(found)


def _vocab_docs(db: Database, term: str) -> int:
    with db.engine.connect() as c:
        return sum(
            int(c.scalar(sa.text(f"SELECT doc FROM {t}_vocab WHERE term = :t"), {"t": term}) or 0)
            for t in sqlite_fts_tables(db)
        )


def test_an_upgrade_keys_every_row_by_its_person_and_the_backend_reads_only_theirs(at_0010):
    owner, bea = _people(at_0010)
    _episode(at_0010, 1, owner, "kayaking on the lake")
    _episode(at_0010, 2, bea, "kayaking in the sea")
    _episode(at_0010, 3, owner, "a canoe trip")
    assert _rowids(at_0010, "kayaking") == [1, 2]

    migrate.upgrade(at_0010)

    assert _rowids(at_0010, "kayaking") == [
        PersonTables(owner).rowid(1),
        PersonTables(bea).rowid(2),
    ]
    assert _rowids(at_0010, "canoe") == [PersonTables(owner).rowid(3)]
    # each in their person's own table (0017)
    assert _rowids(at_0010, "kayaking", PersonTables(bea).fts) == [PersonTables(bea).rowid(2)]
    assert _rowids(at_0010, "kayaking", PersonTables(owner).fts) == [PersonTables(owner).rowid(1)]
    assert _vocab_docs(at_0010, "kayak") == 2  # the vocabularies read the new tables
    text = SqliteFullText()
    with at_0010.read() as s:
        assert set(text.keyword_scores(Scope(bea, s), ["kayaking"], limit=10)) == {2}
        assert set(text.keyword_scores(Scope(owner, s), ["kayaking", "canoe"], limit=10)) == {
            1,
            3,
        }
        assert set(text.keyword_scores(Scope(owner, s), ["kayaking"], limit=10, ids=[1, 2])) == {1}
        assert text.keyword_scores(Scope(bea, s), ["canoe"], limit=10) == {}
        assert text.term_counts(Scope(owner, s), ["kayaking", "canoe"]) == (2, [1, 1])
        assert text.term_counts(Scope(bea, s), ["kayaking", "canoe"]) == (1, [1, 0])
        assert text.count_holding_all(Scope(owner, s), ["kayaking", "lake"]) == 1
        assert text.count_holding_all(Scope(bea, s), ["kayaking", "lake"]) == 0
        assert text.indexed_id_range(Scope(owner, s)) == (1, 3)
        assert text.indexed_id_range(Scope(bea, s)) == (2, 2)
        assert text.probe_contains(Scope(bea, s), ["kayaking"], 2) == [True]
        assert text.probe_contains(Scope(owner, s), ["kayaking"], 2) == [False]


def test_the_triggers_key_new_reowned_and_deleted_episodes(at_0010):
    owner, bea = _people(at_0010)
    migrate.upgrade(at_0010)
    _episode(at_0010, 4, bea, "a canoe trip")
    assert _rowids(at_0010, "canoe") == [PersonTables(bea).rowid(4)]
    with at_0010.engine.begin() as c:
        c.execute(sa.text(f"UPDATE episode_summaries SET person_id = {owner} WHERE id = 4"))
    assert _rowids(at_0010, "canoe") == [PersonTables(owner).rowid(4)]
    with at_0010.engine.begin() as c:
        c.execute(sa.text("DELETE FROM episode_summaries WHERE id = 4"))
    assert _rowids(at_0010, "canoe") == []
    with at_0010.engine.connect() as c:  # nothing left behind: FTS5's own integrity check
        for t in sqlite_fts_tables(at_0010):
            c.execute(sa.text(f"INSERT INTO {t} ({t}) VALUES ('integrity-check')"))


def test_a_downgrade_gives_the_episode_ids_back(at_0010):
    owner, bea = _people(at_0010)
    _episode(at_0010, 1, owner, "kayaking on the lake")
    migrate.upgrade(at_0010)
    _episode(at_0010, 2, bea, "kayaking in the sea")

    migrate.downgrade(at_0010, "0010")

    assert _rowids(at_0010, "kayaking") == [1, 2]
    assert _vocab_docs(at_0010, "kayak") == 2
    _episode(at_0010, 3, bea, "kayaking again")  # the 0002 triggers are back
    assert _rowids(at_0010, "kayaking") == [1, 2, 3]
    with at_0010.engine.begin() as c:
        c.execute(sa.text("DELETE FROM episode_summaries WHERE id = 1"))
    assert _rowids(at_0010, "kayaking") == [2, 3]


# -- PostgreSQL (migration 0012): the person on every full-text row ------------------------------
@pytest.fixture
def pg_at_0011(pg_url: str) -> Iterator[Database]:
    db = Database(pg_url)
    migrate.upgrade(db, "0011")
    yield db
    db.dispose()


def _fts_people(db: Database) -> dict[int, int]:
    with db.engine.connect() as c:
        rows = c.execute(sa.text("SELECT episode_id, person_id FROM episode_fts")).all()
    return {int(e): int(p) for e, p in rows}


def test_postgres_rows_carry_their_person_and_the_backend_reads_only_theirs(pg_at_0011):
    from caesar.memory.engine.postgres import PostgresFullText

    owner, bea = _people(pg_at_0011)
    _episode(pg_at_0011, 1, owner, "kayaking on the lake")
    _episode(pg_at_0011, 2, bea, "kayaking in the sea")
    migrate.upgrade(pg_at_0011)
    assert _fts_people(pg_at_0011) == {1: owner, 2: bea}  # filled from the episodes

    _episode(pg_at_0011, 3, bea, "a kayaking race")  # a new row takes its episode's person
    assert _fts_people(pg_at_0011)[3] == bea
    with pg_at_0011.engine.begin() as c:  # an episode given to another moves its row along
        c.execute(sa.text("UPDATE episode_summaries SET person_id = :o WHERE id = 3"), {"o": owner})
    assert _fts_people(pg_at_0011)[3] == owner

    fts = PostgresFullText()
    with pg_at_0011.read() as session:
        assert set(fts.keyword_scores(Scope(owner, session), ["kayaking"], limit=10)) == {1, 3}
        assert set(fts.keyword_scores(Scope(bea, session), ["kayaking"], limit=10)) == {2}
        assert fts.term_counts(Scope(bea, session), ["kayaking", "lake"]) == (1, [1, 0])
        assert fts.term_counts(Scope(owner, session), ["kayaking", "lake"]) == (2, [2, 1])
        assert fts.count_holding_all(Scope(owner, session), ["kayaking", "sea"]) == 0
        assert fts.count_holding_all(Scope(bea, session), ["kayaking", "sea"]) == 1

    migrate.downgrade(pg_at_0011, "0011")
    with pg_at_0011.engine.connect() as c:
        columns = c.execute(
            sa.text(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'episode_fts'"
            )
        ).scalars()
        assert "person_id" not in set(columns)


def _index_windows(db: Database, episode_id: int) -> None:
    """The episode's windows into the shared window table, as memory.passages wrote them
    before migration 0017."""
    with db.engine.begin() as c:
        payload = c.execute(
            sa.text("SELECT payload FROM audit_log WHERE id = :n"), {"n": episode_id}
        ).scalar_one()
        windows = passages.windows(conversation_turns(json.loads(payload)))
        c.execute(
            sa.text("INSERT INTO episode_window_fts (rowid, body) VALUES (:rowid, :body)"),
            sqlite_rows(episode_id, windows),
        )


def _window_hits(db: Database, table: str, word: str) -> list[int]:
    sql = f"SELECT rowid / {WINDOW_SLOTS} FROM {table} WHERE {table} MATCH :w ORDER BY 1"
    with db.engine.connect() as c:
        return [int(i) for i in c.execute(sa.text(sql), {"w": word}).scalars()]


def test_0017_moves_each_persons_windows_to_their_own_table_and_back(at_0010):
    owner, bea = _people(at_0010)
    migrate.upgrade(at_0010, "0016")
    for n, who, words in ((1, owner, "kayaking on the lake"), (2, bea, "kayaking in the sea")):
        _episode(at_0010, n, who, words)
        _index_windows(at_0010, n)
    assert _window_hits(at_0010, "episode_window_fts", "kayaking") == [1, 2]

    migrate.upgrade(at_0010)

    assert _window_hits(at_0010, PersonTables(owner).windows, "kayaking") == [1]
    assert _window_hits(at_0010, PersonTables(bea).windows, "kayaking") == [2]
    with at_0010.engine.connect() as c:  # FTS5's own check: the owner's 'delete' was exact
        for t in (PersonTables(owner).windows, PersonTables(bea).windows):
            c.execute(sa.text(f"INSERT INTO {t} ({t}) VALUES ('integrity-check')"))
    with at_0010.read() as s:
        scores = SqliteFullText().window_scores(Scope(bea, s), ["kayaking"], [1, 2])
    assert list(scores) == [2]

    migrate.downgrade(at_0010, "0016")

    assert _window_hits(at_0010, "episode_window_fts", "kayaking") == [1, 2]
    assert sqlite_fts_tables(at_0010, "episode_window_fts") == ["episode_window_fts"]
