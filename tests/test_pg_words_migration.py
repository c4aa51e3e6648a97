"""Migration 0015 (issue #24): PostgreSQL cuts and counts words as SQLite's FTS5 does — new rows
under `caesar_porter` (unaccented, Porter-stemmed, no stop words) at once, older episodes and
windows indexed again afterwards (memory/engine/pg_words.py: batched, resumable), each row's
word count in `tokens`; the downgrade gives `english` back."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime

import pytest
import sqlalchemy as sa

from caesar.db import Database, migrate
from caesar.memory import passages
from caesar.memory.engine import pg_words
from caesar.memory.scope import Scope
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
    from caesar.memory.engine.postgres import PostgresFullText

    db = pg_at_0014
    _episode(db, 1, CHAT)
    _episode(db, 2, "A quiet evening with a book")
    # english: stop words dropped ("other", "because"), Porter2's stems
    assert _holding(db, "episode_fts", "simple", "other") == []
    assert "generous" in _lexemes(db, 1)

    migrate.upgrade(db)
    with db.read() as session:
        assert pg_words.status(session) == pg_words.WordsStatus(left=2, finished=False)
    assert _holding(db, "episode_fts", "simple", "other") == []  # the older words, for now
    with db.read() as session:  # still found (their length: distinct words, until counted)
        owner = int(session.scalar(sa.text("SELECT id FROM people WHERE is_owner")))
        assert session.scalar(sa.text("SELECT count(tokens) FROM episode_fts")) == 0
        assert set(PostgresFullText().keyword_scores(Scope(owner, session), ["rain"], limit=5)) == {
            1
        }
    _episode(db, 3, "Other plans because of snow")  # the trigger writes the new words at once
    assert _holding(db, "episode_fts", "simple", "other") == [3]

    # stopped after its first batch (one episode), then run again: it resumes
    def stop(done: int, total: int) -> None:
        if 0 < done < total:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pg_words.reindex(db, progress=stop, batch=1)
    assert _holding(db, "episode_fts", "simple", "other") == [1, 3]
    with db.read() as session:
        assert pg_words.status(session) == pg_words.WordsStatus(left=1, finished=False)
    seen: list[tuple[int, int]] = []
    status = pg_words.reindex(db, progress=lambda d, t: seen.append((d, t)), batch=1)
    assert status == pg_words.WordsStatus(left=0, finished=True)
    assert seen[0] == (0, 1) and seen[-1] == (1, 1)

    # (episode 3's windows were written by this test's helper, as before 0015: not the reindex's)
    for table, holding in (("episode_fts", [1, 3]), ("episode_window_fts", [1])):
        assert _holding(db, table, "simple", "other") == holding
        assert _holding(db, table, "simple", "becaus") == holding  # stemmed
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

    fts = PostgresFullText()
    with db.read() as session:
        owner = int(session.scalar(sa.text("SELECT id FROM people WHERE is_owner")))
        scores = fts.keyword_scores(Scope(owner, session), ["because", "rain"], limit=10)
        assert set(scores) == {1, 3} and scores[1] > scores[3]  # "rain" is the rarer word
        windows_scored = fts.window_scores(Scope(owner, session), ["café", "rain"], [1, 2])
        assert set(windows_scored) == {1} and min(windows_scored[1].values()) > 0


def test_a_downgrade_gives_the_english_words_back(pg_at_0014):
    db = pg_at_0014
    _episode(db, 1, CHAT)
    migrate.upgrade(db)
    pg_words.reindex(db)
    assert _holding(db, "episode_window_fts", "simple", "other") == [1]
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


def test_caesar_db_upgrade_says_what_is_left_and_caesar_db_words_does_it(
    pg_at_0014, pg_url, tmp_path
):
    """The real commands: the upgrade is quick and says how many episodes are left; `caesar db
    words` indexes them with progress, and run again has nothing to do."""
    from crashkit import settings_dict, settings_env

    db = pg_at_0014
    for n in range(1, 6):
        _episode(db, n, f"{CHAT} {n}")
    env = settings_env(
        settings_dict(
            tmp_path / "home",
            pg_url,
            "http://127.0.0.1:9",
            "-",
        )
    )
    caesar = [sys.executable, "-c", "from caesar.cli.main import main; main()", "db"]
    upgraded = subprocess.run(
        [*caesar, "upgrade"], env=env, capture_output=True, text=True, timeout=120
    )
    assert upgraded.returncode == 0, upgraded.stderr
    assert "5 episodes to index again under FTS5's words" in upgraded.stdout
    assert "caesar db words" in upgraded.stdout
    assert "the words of 1 person to count" in upgraded.stdout  # migration 0016's, the owner's

    words = subprocess.run(
        [*caesar, "words", "--batch-size", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert words.returncode == 0, words.stderr
    assert "0 of 5 episodes indexed again" in words.stderr
    assert "5 of 5 episodes indexed again" in words.stderr
    assert "every episode indexed under FTS5's words" in words.stdout
    assert "words counted for 1 of 1 people" in words.stderr
    assert "every person's words counted" in words.stdout
    assert _holding(db, "episode_window_fts", "simple", "other") == [1, 2, 3, 4, 5]

    again = subprocess.run([*caesar, "words"], env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "indexed again" not in again.stderr


def test_caesar_db_words_says_what_to_do_where_it_has_nothing_to_do(pg_at_0014, pg_url, tmp_path):
    """A PostgreSQL database from before 0015 is told to upgrade; SQLite needs nothing."""
    from crashkit import settings_dict, settings_env

    caesar = [sys.executable, "-c", "from caesar.cli.main import main; main()", "db", "words"]
    for url, said in (
        (pg_url, "predates migration 0015: run `caesar db upgrade`"),
        (f"sqlite:///{tmp_path / 'caesar.db'}", "SQLite's words are FTS5's already"),
    ):
        home = tmp_path / f"home-{len(said)}"
        env = settings_env(settings_dict(home, url, "http://127.0.0.1:9", "-"))
        run = subprocess.run(caesar, env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode != 0 and said in run.stderr, run.stderr
        assert "Traceback" not in run.stderr


def test_serves_warm_up_indexes_the_older_words_once_ready(pg_at_0014, pg_url, make_services):
    from caesar.cli.main import _warm

    _episode(pg_at_0014, 1, CHAT)
    migrate.upgrade(pg_at_0014)
    services = make_services(database_url=pg_url)
    ready: list[bool] = []
    _warm(services, when_ready=lambda: ready.append(True))
    assert ready == [True]
    with pg_at_0014.read() as session:
        assert pg_words.status(session).finished
        assert pg_words.uncounted(session) == []  # then the words counted (migration 0016)
        assert session.scalar(sa.text("SELECT count(*) FROM episode_fts_words")) > 5
    assert _holding(pg_at_0014, "episode_window_fts", "simple", "other") == [1]


def test_unaccent_created_later_is_put_in_and_the_older_rows_indexed_again(pg_at_0014):
    """As if migration 0015 had found no `unaccent` (the configuration then stems alone): once
    it exists, the next reindex puts it before the stemmer and indexes every row again."""
    db = pg_at_0014
    _episode(db, 1, CHAT)
    migrate.upgrade(db)
    with db.engine.begin() as c:  # what 0015 builds without the extension
        c.execute(
            sa.text(
                f"ALTER TEXT SEARCH CONFIGURATION caesar_porter ALTER MAPPING FOR "
                f"{pg_words.WORD_TOKENS} WITH caesar_porter_stem"
            )
        )
    _episode(db, 2, CHAT)  # written meanwhile: its accents kept (and 1's, under english)
    assert _holding(db, "episode_fts", "simple", "café") == [1, 2]

    assert pg_words.reindex(db).finished  # the extension is there: mended, all indexed again
    assert _holding(db, "episode_fts", "simple", "cafe") == [1, 2]
    assert _holding(db, "episode_fts", "simple", "café") == []
    assert _holding(db, "episode_window_fts", "simple", "cafe") == [1, 2]
    with db.write() as session:
        assert not pg_words.mend_unaccent(session)  # once


def test_a_reindex_batch_in_flight_blocks_no_new_episode_and_no_forget(pg_at_0014):
    """A batch holds its own episodes' rows until it commits, and nothing else: not the
    person's counter (migration 0015's counter trigger skips an update that moves no row
    between people). Before, a new episode of the same person waited for the batch, and a
    forget that had deleted another episode first deadlocked with it."""
    db = pg_at_0014
    for n in range(1, 5):
        _episode(db, n, f"{CHAT} {n}")
    migrate.upgrade(db)
    with db.engine.connect() as batch, db.engine.connect() as writer:
        open_batch = batch.begin()
        assert pg_words.reindex_batch(batch, pg_words.WORDS, 0, 4, 2) == [1, 2]
        written = writer.begin()
        writer.execute(sa.text("SET LOCAL lock_timeout = '2s'"))
        writer.execute(sa.text("DELETE FROM episode_summaries WHERE id = 4"))  # a forget
        owner = int(writer.scalar(sa.text("SELECT id FROM people WHERE is_owner")))
        chat = json.dumps({"messages": [{"role": "user", "content": "kayak"}], "reply": "ok"})
        writer.execute(
            sa.text(
                "INSERT INTO audit_log (id, event_type, created_at, payload, subject_id, "
                "person_id) VALUES (9, 'chat.completed', :t, :p, 9, :o)"
            ),
            {"t": WHEN, "p": chat, "o": owner},
        )
        writer.execute(  # a new episode of the same person: its row and its person's counter
            sa.text(
                "INSERT INTO episode_summaries (id, audit_log_id, summary, embedding, model, "
                "created_at, person_id) VALUES (9, 9, 'kayaking', '[0.6, 0.8]', 'm', :t, :o)"
            ),
            {"t": WHEN, "o": owner},
        )
        written.commit()
        open_batch.commit()
    with db.engine.connect() as c:
        counted = c.scalar(sa.text("SELECT documents FROM episode_fts_counts"))
        assert counted == c.scalar(sa.text("SELECT count(*) FROM episode_fts")) == 4


def test_a_second_process_leaves_the_reindex_to_the_first(pg_at_0014):
    """One process at a time (Database.exclusively): while another holds the job, a reindex
    without `wait` returns at once and touches nothing."""
    db = pg_at_0014
    _episode(db, 1, CHAT)
    migrate.upgrade(db)
    other = Database(str(db.engine.url.render_as_string(hide_password=False)))
    try:
        with other.exclusively(pg_words._LOCK, "indexing", wait=False) as held:
            assert held
            assert pg_words.reindex(db) == pg_words.WordsStatus(left=1, finished=False)
            assert _holding(db, "episode_fts", "simple", "other") == []
        assert pg_words.reindex(db).finished  # released: done
        assert _holding(db, "episode_fts", "simple", "other") == [1]
    finally:
        other.dispose()
