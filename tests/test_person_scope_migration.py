"""Migration 0009 (issue #23, step 3): every row of memory becomes the owner's on upgrade, on
SQLite and PostgreSQL; keys become unique per person; the full-text triggers still work."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime

import pytest
import sqlalchemy as sa
from conftest import sqlite_fts_tables

from caesar.db import Database, migrate
from caesar.errors import ConfigError
from caesar.memory.engine.sqlite import EPISODE_MASK, PersonTables

TABLES = ("audit_log", "conversations", "facts", "episode_summaries", "semantic_chunks")
WHEN = datetime(2026, 11, 1, 12, 0)


@pytest.fixture
def at_0008(db_url: str) -> Iterator[Database]:
    db = Database(db_url)
    migrate.upgrade(db, "0008")
    yield db
    db.dispose()


def _chat(n: int) -> str:
    return json.dumps(
        {"messages": [{"role": "user", "content": f"my dog {n} likes kayaking"}], "reply": "ok"}
    )


def _fill(db: Database) -> None:
    """A single operator's memory as 0008 held it, written as that schema had it."""
    with db.engine.begin() as c:
        for n in range(1, 4):
            c.execute(
                sa.text(
                    "INSERT INTO audit_log (id, event_type, created_at, payload, subject_id) "
                    "VALUES (:n, 'chat.completed', :t, :p, :n)"
                ),
                {"n": n, "t": WHEN, "p": _chat(n)},
            )
            c.execute(
                sa.text(
                    "INSERT INTO conversations (id, key, started_at, last_turn_at, touched_at, "
                    "turns, tip_audit_id) VALUES (:n, :k, :t, :t, :t, 1, :n)"
                ),
                {"n": n, "k": f"chat-{n}", "t": WHEN},
            )
            c.execute(
                sa.text(
                    "INSERT INTO episode_summaries (id, audit_log_id, summary, embedding, model, "
                    "created_at, conversation_id) VALUES (:n, :n, :s, :e, 'm', :t, :n)"
                ),
                {"n": n, "s": f"talked about kayaking {n}", "e": "[0.6, 0.8]", "t": WHEN},
            )
            c.execute(
                sa.text(
                    "INSERT INTO semantic_chunks (audit_log_id, chunk_index, text, embedding, "
                    "model, created_at) VALUES (:n, 0, 'ok', '[1.0, 0.0]', 'm', :t)"
                ),
                {"n": n, "t": WHEN},
            )
        c.execute(
            sa.text(
                "INSERT INTO facts (key, value, confidence, source_audit_id, created_at, "
                "updated_at) VALUES ('dog_name', 'Biscuit', 1.0, 1, :t, :t)"
            ),
            {"t": WHEN},
        )
        if not db.is_sqlite:  # explicit ids leave PostgreSQL's sequences behind
            for table in ("audit_log", "conversations", "episode_summaries"):
                c.execute(sa.text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), 3)"))


def _rows(db: Database) -> dict[str, list[tuple[object, ...]]]:
    with db.engine.connect() as c:
        return {
            t: [tuple(r) for r in c.execute(sa.text(f"SELECT * FROM {t} ORDER BY id"))]
            for t in TABLES
        }


def _keyword_hits(db: Database, word: str) -> list[int]:
    if db.is_sqlite:
        # the episode id, whether the rowid is it (0008) or holds it (0011: keyed by person),
        # in the shared table or each person's (0017)
        with db.engine.connect() as c:
            return sorted(
                int(i)
                for t in sqlite_fts_tables(db)
                for i in c.execute(
                    sa.text(f"SELECT rowid & {EPISODE_MASK} FROM {t} WHERE {t} MATCH :w"),
                    {"w": word},
                ).scalars()
            )
    else:
        sql = (
            "SELECT episode_id FROM episode_fts WHERE document @@ plainto_tsquery('english', :w) "
            "ORDER BY episode_id"
        )
    with db.engine.connect() as c:
        return [int(i) for i in c.execute(sa.text(sql), {"w": word}).scalars()]


def test_an_upgrade_keeps_every_row_and_gives_it_to_the_owner(at_0008):
    _fill(at_0008)
    with at_0008.engine.begin() as c:  # a row swept before the upgrade: its id stays used
        c.execute(
            sa.text(
                "INSERT INTO audit_log (event_type, created_at, payload) "
                "VALUES ('chat.completed', :t, '{}')"
            ),
            {"t": WHEN},
        )
        c.execute(sa.text("DELETE FROM audit_log WHERE id = (SELECT max(id) FROM audit_log)"))
    before = _rows(at_0008)
    assert _keyword_hits(at_0008, "kayaking") == [1, 2, 3]

    migrate.upgrade(at_0008)

    after = _rows(at_0008)
    with at_0008.engine.connect() as c:
        owner = c.scalar(sa.text("SELECT id FROM people WHERE is_owner"))
        for table in TABLES:
            owners = c.execute(sa.text(f"SELECT DISTINCT person_id FROM {table}")).scalars()
            assert list(owners) == [owner], table
            columns = [col["name"] for col in sa.inspect(c).get_columns(table)]
            at = columns.index("person_id")
            # every row, every value as it was, plus its person (and, at the end, the
            # columns later migrations add: migration 0018's turn vectors, NULL)
            width = len(before[table][0]) + 1 if before[table] else len(columns)
            assert [r[:at] + r[at + 1 : width] for r in after[table]] == before[table], table
            assert all(v is None for r in after[table] for v in r[width:]), table
        if not at_0008.is_sqlite:  # pgvector's copy of the episodes is theirs too
            vectors = "SELECT episode_id, person_id FROM episode_vectors ORDER BY episode_id"
            assert [tuple(r) for r in c.execute(sa.text(vectors))] == [
                (n, owner) for n in (1, 2, 3)
            ]
    assert _keyword_hits(at_0008, "kayaking") == [1, 2, 3]
    with at_0008.engine.begin() as c:  # ids are never given twice, across the copy too
        new = c.execute(
            sa.text(
                "INSERT INTO audit_log (event_type, created_at, payload, person_id) "
                "VALUES ('chat.completed', :t, '{}', :p) RETURNING id"
            ),
            {"t": WHEN, "p": owner},
        ).scalar_one()
    assert new > 4


def test_keys_are_unique_per_person_and_the_triggers_still_index(at_0008):
    _fill(at_0008)
    migrate.upgrade(at_0008)
    with at_0008.engine.begin() as c:
        anna = c.execute(
            sa.text(
                "INSERT INTO people (name, is_owner, created_at) VALUES ('Anna', :f, :t) "
                "RETURNING id"
            ),
            {"f": False, "t": WHEN},
        ).scalar_one()
        if at_0008.is_sqlite:  # her full-text tables, as an ORM write of a person makes them
            PersonTables(anna).create(c)
        fact = (
            "INSERT INTO facts (key, value, confidence, created_at, updated_at, person_id) "
            "VALUES ('dog_name', 'Rex', 1.0, :t, :t, :p)"
        )
        c.execute(sa.text(fact), {"t": WHEN, "p": anna})
        c.execute(
            sa.text(
                "INSERT INTO audit_log (id, event_type, created_at, payload, person_id) "
                "VALUES (4, 'chat.completed', :t, :p, :who)"
            ),
            {"t": WHEN, "p": _chat(4), "who": anna},
        )
        c.execute(
            sa.text(
                "INSERT INTO conversations (id, key, started_at, last_turn_at, touched_at, "
                "person_id) VALUES (4, 'chat-1', :t, :t, :t, :p)"
            ),
            {"t": WHEN, "p": anna},
        )
        c.execute(
            sa.text(
                "INSERT INTO episode_summaries (id, audit_log_id, summary, embedding, model, "
                "created_at, person_id) VALUES (4, 4, 'paddling a canoe', '[0.6, 0.8]', 'm', "
                ":t, :p)"
            ),
            {"t": WHEN, "p": anna},
        )
    assert _keyword_hits(at_0008, "canoe") == [4]
    with pytest.raises(sa.exc.IntegrityError), at_0008.engine.begin() as c:
        c.execute(sa.text(fact), {"t": WHEN, "p": anna})  # Anna's key, twice
    with pytest.raises(sa.exc.IntegrityError), at_0008.engine.begin() as c:
        c.execute(sa.text(fact), {"t": WHEN, "p": 999})  # nobody's


def test_a_downgrade_refuses_while_someone_else_has_memory(at_0008):
    _fill(at_0008)
    migrate.upgrade(at_0008, "0009")  # the revision under test, whatever head is
    with at_0008.engine.begin() as c:
        anna = c.execute(
            sa.text(
                "INSERT INTO people (name, is_owner, created_at) VALUES ('Anna', :f, :t) "
                "RETURNING id"
            ),
            {"f": False, "t": WHEN},
        ).scalar_one()
        c.execute(
            sa.text(
                "INSERT INTO facts (key, value, confidence, created_at, updated_at, person_id) "
                "VALUES ('dog_name', 'Rex', 1.0, :t, :t, :p)"
            ),
            {"t": WHEN, "p": anna},
        )
    with pytest.raises(ConfigError, match="caesar people remove"):
        migrate.downgrade(at_0008, "0008")
    assert migrate.current_revision(at_0008) == "0009"
    with at_0008.engine.begin() as c:
        c.execute(sa.text("DELETE FROM facts WHERE person_id = :p"), {"p": anna})
    migrate.downgrade(at_0008, "0008")  # only the owner's rows: fine, and they stay
    assert {t: len(r) for t, r in _rows(at_0008).items()} == {
        "audit_log": 3,
        "conversations": 3,
        "facts": 1,
        "episode_summaries": 3,
        "semantic_chunks": 3,
    }
    assert _keyword_hits(at_0008, "kayaking") == [1, 2, 3]
