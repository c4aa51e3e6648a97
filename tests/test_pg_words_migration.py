"""Migration 0015 (issue #24): PostgreSQL cuts and counts words as SQLite's FTS5 does — every
episode and window indexed again under `caesar_porter` (unaccented, Porter-stemmed, no stop
words), each row's word count in `tokens`; new rows the same; the downgrade gives `english`
back."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import datetime

import pytest
import sqlalchemy as sa

from caesar.db import Database, migrate
from caesar.memory.search import passages
from caesar.memory.transcript import conversation_turns

WHEN = datetime(2026, 12, 1, 12, 0)
CHAT = "Other people were running to the café because of the rain"
REPLY = "They were generously sheltered"


@pytest.fixture
def pg_at_0014(pg_url: str) -> Iterator[Database]:
    db = Database(pg_url)
    migrate.upgrade(db, "0014")
    yield db
    db.dispose()


def _episode(db: Database, n: int, words: str, reply: str = REPLY) -> None:
    """An episode and (as migration 0005 wrote them at this revision) its windows."""
    payload = {"messages": [{"role": "user", "content": words}], "reply": reply}
    with db.engine.begin() as c:
        owner = int(c.scalar(sa.text("SELECT id FROM people WHERE is_owner")))
        c.execute(
            sa.text(
                "INSERT INTO audit_log (id, event_type, created_at, payload, subject_id, person_id) "
                "VALUES (:n, 'chat.completed', :t, :p, :n, :who)"
            ),
            {"n": n, "t": WHEN, "p": json.dumps(payload), "who": owner},
        )
        c.execute(
            sa.text(
                "INSERT INTO episode_summaries (id, audit_log_id, summary, embedding, model, "
                "created_at, person_id) VALUES (:n, :n, 'a rainy day', '[0.6, 0.8]', 'm', :t, :who)"
            ),
            {"n": n, "t": WHEN, "who": owner},
        )
        windows = passages.windows(conversation_turns(payload))
        assert windows
        for k, body in enumerate(windows):
            c.execute(
                sa.text(
                    "INSERT INTO episode_window_fts (episode_id, window_no, document) "
                    "VALUES (:n, :k, to_tsvector('english', :body))"
                ),
                {"n": n, "k": k, "body": body},
            )


def _holding(db: Database, table: str, config: str, word: str) -> list[int]:
    sql = f"SELECT DISTINCT episode_id FROM {table} WHERE document @@ to_tsquery('{config}', :w)"
    with db.engine.connect() as c:
        return sorted(int(i) for i in c.execute(sa.text(sql), {"w": word}).scalars())


def _fts5_tokens(text: str) -> int:
    """The number of words SQLite's FTS5 counts in `text` (migration 0002's tokenizer)."""
    c = sqlite3.connect(":memory:")
    c.execute(
        "CREATE VIRTUAL TABLE t USING fts5(body, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    c.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    c.execute("INSERT INTO t (body) VALUES (?)", (text,))
    return int(c.execute("SELECT count(*) FROM v").fetchone()[0])


def _lexemes(db: Database, n: int) -> set[str]:
    sql = "SELECT u.lexeme FROM episode_fts AS f, unnest(f.document) AS u WHERE f.episode_id = :n"
    with db.engine.connect() as c:
        return set(c.execute(sa.text(sql), {"n": n}).scalars())


def test_an_upgrade_indexes_every_episode_and_window_again_under_fts5s_words(pg_at_0014):
    from caesar.memory.search.postgres import PostgresFullText

    db = pg_at_0014
    _episode(db, 1, CHAT)
    _episode(db, 2, "A quiet evening with a book")
    # english: stop words dropped ("other", "because"), Porter2's stems
    assert _holding(db, "episode_fts", "simple", "other") == []
    assert "generous" in _lexemes(db, 1)

    migrate.upgrade(db)

    for table in ("episode_fts", "episode_window_fts"):
        assert _holding(db, table, "simple", "other") == [1]
        assert _holding(db, table, "simple", "becaus") == [1]  # stemmed
        assert _holding(db, table, "simple", "cafe") == [1]  # unaccented
        assert _holding(db, table, "caesar_porter", "Café") == [1]
    assert {"gener", "run", "other"} <= _lexemes(db, 1)  # Porter 1, as FTS5's porter
    with db.engine.connect() as c:
        tokens = dict(c.execute(sa.text("SELECT episode_id, tokens FROM episode_fts")).all())
        windows = c.execute(
            sa.text("SELECT tokens FROM episode_window_fts WHERE episode_id = 1 ORDER BY window_no")
        ).scalars()
        window_tokens = list(windows)
    # as FTS5 counts a row: summary + conversation, every word
    assert tokens[1] == _fts5_tokens("a rainy day") + _fts5_tokens(f"{CHAT}\n{REPLY}")
    texts = passages.windows(
        conversation_turns({"messages": [{"role": "user", "content": CHAT}], "reply": REPLY})
    )
    assert window_tokens == [_fts5_tokens(t) for t in texts]

    _episode(db, 3, "Other plans because of snow")  # the trigger writes the new words too
    assert _holding(db, "episode_fts", "simple", "other") == [1, 3]
    fts = PostgresFullText()
    with db.read() as session:
        owner = int(session.scalar(sa.text("SELECT id FROM people WHERE is_owner")))
        scores = fts.keyword_scores(session, ["because", "rain"], person=owner, limit=10)
        assert set(scores) == {1, 3} and scores[1] > scores[3]  # "rain" is the rarer word
        windows_scored = fts.window_scores(session, ["café", "rain"], [1, 2], person=owner)
        assert set(windows_scored) == {1} and min(windows_scored[1].values()) > 0


def test_a_downgrade_gives_the_english_words_back(pg_at_0014):
    db = pg_at_0014
    _episode(db, 1, CHAT)
    migrate.upgrade(db)
    migrate.downgrade(db, "0014")

    assert _holding(db, "episode_fts", "simple", "other") == []
    assert _holding(db, "episode_window_fts", "simple", "other") == []
    assert "generous" in _lexemes(db, 1)
    with db.engine.connect() as c:
        configs = c.execute(sa.text("SELECT cfgname FROM pg_ts_config")).scalars()
        assert "caesar_porter" not in set(configs)
        columns = c.execute(
            sa.text(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name IN ('episode_fts', 'episode_window_fts')"
            )
        ).scalars()
        assert "tokens" not in set(columns)
    _episode(db, 2, CHAT)  # migration 0002's trigger, english again
    assert _holding(db, "episode_fts", "simple", "other") == []
