"""Migration 0016 (issue #23): PostgreSQL keeps each person's number of episodes per word
(`episode_fts_words`), so the keyword stage's idfs read one row a word instead of picking the
person's rows out of everyone's in the GIN index. People who had episodes before it are
counted afterwards (pg_words.count_words), after the reindex of migration 0015; until then
their counts come from the index, the same numbers."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest
import sqlalchemy as sa
from conftest import OWNER

from caesar import audit, people
from caesar.db import Database, migrate
from caesar.db.models import EpisodeSummary
from caesar.memory.engine import pg_words
from caesar.memory.engine.postgres import PostgresFullText
from caesar.memory.scope import Scope

WHEN = datetime(2026, 12, 1, 12, 0)
WORDS = ["rain", "kayak", "the", "café", "cafe", "snowing", "unheard", "42"]
TEXTS = [
    "Rain again, so the kayak stays in the shed",
    "We met at the café when it started snowing",
    "Kayaking in the rain: 42 km",
]


def _episode(db: Database, text: str, person: int = OWNER) -> int:
    with db.write() as session:
        payload = {"messages": [{"role": "user", "content": text}], "reply": "ok"}
        chat = audit.Audit().append(
            Scope(person, session), audit.CHAT_COMPLETED, payload, created_at=WHEN
        )
        # these columns alone: the tables may be at an older revision than the models
        values = dict(
            audit_log_id=chat.id,
            summary="a day",
            embedding=[1.0],
            model="m",
            created_at=WHEN,
            person_id=person,
        )
        table = EpisodeSummary.__table__
        return int(session.execute(sa.insert(table).values(values).returning(table.c.id)).scalar())


def _truth(db: Database) -> dict[tuple[int, str], int]:
    """Every person's documents per word, counted from the rows."""
    sql = (
        "SELECT f.person_id, u.lexeme, count(*) FROM episode_fts AS f "
        "CROSS JOIN LATERAL unnest(f.document) AS u GROUP BY f.person_id, u.lexeme"
    )
    with db.engine.connect() as c:
        return {(int(p), str(w)): int(n) for p, w, n in c.execute(sa.text(sql))}


def _kept(db: Database) -> dict[tuple[int, str], int]:
    sql = "SELECT person_id, word, documents FROM episode_fts_words"  # none at 0: deleted
    with db.engine.connect() as c:
        return {(int(p), str(w)): int(n) for p, w, n in c.execute(sa.text(sql))}


def _counts(db: Database, person: int) -> tuple[int, list[int]]:
    with db.read() as session:
        return PostgresFullText().term_counts(Scope(person, session), WORDS)


def _by_index(db: Database, person: int) -> list[int]:
    """Each word's documents among the person's rows, by the GIN index (the count before 0016)."""
    sql = (
        "SELECT count(*) FROM episode_fts WHERE person_id = :p "
        f"AND document @@ to_tsquery('{pg_words.WORDS}', :w)"
    )
    with db.engine.connect() as c:
        return [int(c.scalar(sa.text(sql), {"p": person, "w": w})) for w in WORDS]


@pytest.fixture
def pg_at_0015(pg_url: str) -> Iterator[Database]:
    db = Database(pg_url)
    migrate.upgrade(db, "0015")
    yield db
    db.dispose()


def test_older_words_are_counted_after_the_upgrade_and_kept_by_the_triggers(pg_at_0015):
    db = pg_at_0015
    ids = [_episode(db, t) for t in TEXTS]
    migrate.upgrade(db)
    with db.read() as session:
        assert pg_words.uncounted(session) == [OWNER]
    # not counted yet: the counts come from the index, and are the same
    assert _kept(db) == {}
    assert _counts(db, OWNER) == (3, _by_index(db, OWNER))
    assert _counts(db, OWNER)[1][:3] == [2, 2, 3]  # "kayaking" is stemmed as "kayak"

    said: list[tuple[int, int]] = []
    assert pg_words.count_words(db, progress=lambda d, t: said.append((d, t))) == 0
    assert said == [(0, 1), (1, 1)]
    assert _kept(db) == _truth(db) and len(_truth(db)) > 10
    assert _counts(db, OWNER) == (3, _by_index(db, OWNER))
    assert pg_words.count_words(db) == 0  # nothing left: a second run does nothing

    # from now on the triggers keep them: a new person (counted from their first episode),
    # inserts, a forget, an episode moved from one person to another, a re-summary
    with db.write() as session:
        ben = people.add(session, audit.Audit(), "Ben")[0].id
    _episode(db, "Ben's kayak and the rain", person=ben)
    _episode(db, "snowing on the lake", person=OWNER)
    with db.write() as session:
        session.execute(sa.text("DELETE FROM episode_summaries WHERE id = :i"), {"i": ids[0]})
        session.execute(
            sa.text("UPDATE episode_summaries SET person_id = :p WHERE id = :i"),
            {"p": ben, "i": ids[1]},
        )
        session.execute(
            sa.text("UPDATE episode_summaries SET summary = 'rain and more rain' WHERE id = :i"),
            {"i": ids[2]},
        )
    with db.read() as session:
        assert pg_words.uncounted(session) == []
    assert _kept(db) == _truth(db)
    for person in (OWNER, ben):
        total, found = _counts(db, person)
        assert total == 2 and found == _by_index(db, person)
    assert _counts(db, ben)[1][:2] == [1, 1]


def test_words_are_counted_only_after_the_reindex_of_migration_0015(pg_url):
    """Episodes from before 0015 are indexed again (their words change) first: counting them
    before would count words the reindex then changes."""
    db = Database(pg_url)
    try:
        migrate.upgrade(db, "0014")
        _episode(db, TEXTS[0])
        migrate.upgrade(db)
        with db.read() as session:
            assert not pg_words.status(session).finished
        assert pg_words.count_words(db) == 1  # left for after the reindex
        assert _kept(db) == {}
        assert _counts(db, OWNER) == (1, _by_index(db, OWNER))
        assert pg_words.reindex(db).finished
        assert pg_words.count_words(db) == 0
        assert _kept(db) == _truth(db)
        assert _counts(db, OWNER) == (1, _by_index(db, OWNER))
        assert _counts(db, OWNER)[1][:3] == [1, 1, 1]
    finally:
        db.dispose()


def test_the_words_stay_counted_when_unaccent_comes_later_and_every_row_is_indexed_again(pg_url):
    """A reindex of counted people's rows (here: `unaccent` created after migration 0015, so
    every row is indexed again) moves their words' counts with the rows."""
    db = Database(pg_url)
    try:
        migrate.upgrade(db)
        with db.engine.begin() as c:  # what 0015 builds without the extension
            c.execute(
                sa.text(
                    f"ALTER TEXT SEARCH CONFIGURATION {pg_words.WORDS} ALTER MAPPING FOR "
                    f"{pg_words.WORD_TOKENS} WITH {pg_words.WORDS}_stem"
                )
            )
        for text in TEXTS:
            _episode(db, text)
        assert (OWNER, "café") in _kept(db) and _kept(db) == _truth(db)
        assert pg_words.reindex(db).finished  # mended: every row indexed again
        assert (OWNER, "café") not in _kept(db) and (OWNER, "cafe") in _kept(db)
        assert _kept(db) == _truth(db)
        assert _counts(db, OWNER) == (3, _by_index(db, OWNER))
    finally:
        db.dispose()
