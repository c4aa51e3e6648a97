"""An existing PostgreSQL install moving its episode vectors into pgvector (issue #24 item 3),
on the suite's real PostgreSQL: the copy is batched and resumes where it was stopped, a stopped
index build is built again, recall answers the same before, during and after (the in-process
index until the vectors are ready), and a database where pgvector cannot be used says how to
fix it.

"Stopped" here is an exception raised from the progress callback between two batches, or an
index left invalid as a stopped CREATE INDEX CONCURRENTLY leaves it: each batch is its own
transaction, so what a killed process leaves behind is one of these states.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import numpy as np
import pytest
from conftest import OWNER
from psycopg import sql
from sqlalchemy import text
from test_vectors import DIM, MODEL, Corpus, queries_for

from caesar.cli.main import _refuse_missing_pgvector, startup_summary
from caesar.db import Database, migrate
from caesar.errors import ConfigError
from caesar.memory.engine import pgvector_migration as migration
from caesar.memory.engine.pgvector import PgvectorSearch, PgvectorVectors
from caesar.memory.scope import Scope


class Stop(Exception):
    """What stops a migration in these tests."""


def stop_after(batches: int) -> Any:
    """A progress callback that stops the copy after `batches` batches."""
    seen = []

    def report(phase: str, done: int, total: int) -> None:
        if phase == "copy":
            seen.append(done)
            if len(seen) > batches:  # the first call announces the copy
                raise Stop

    return report


def copied(db: Database) -> dict[int, np.ndarray]:
    with db.read() as session:
        rows = session.execute(text("SELECT episode_id, embedding::text FROM episode_vectors"))
        return {int(i): np.array(json.loads(v), dtype=np.float32) for i, v in rows}


def status(db: Database, model: str = MODEL) -> migration.VectorStatus:
    with db.read() as session:
        return migration.status(session, model)


@pytest.fixture
def upgraded_with_episodes(pg_url: str) -> Any:
    """An install at migration 0006 with 50 episodes (one with an empty summary), upgraded:
    their vectors are still to copy."""
    db = Database(pg_url)
    migrate.upgrade(db, "0006")
    corpus = Corpus(db, seed=7)
    corpus.add(50)
    with db.write() as session:  # a trivial summary is not searched
        session.execute(text("UPDATE episode_summaries SET summary = '' WHERE id = 3"))
    migrate.upgrade(db)
    yield db, corpus
    db.dispose()


def test_the_upgrade_copies_nothing_and_the_trigger_follows_new_rows(upgraded_with_episodes):
    db, corpus = upgraded_with_episodes
    now = status(db)
    assert now.installed and not now.copied and now.left == 50 and now.index is None
    assert not now.ready
    assert copied(db) == {}
    added = corpus.add(3)  # written after the trigger: in the same transaction
    assert sorted(copied(db)) == added


def test_a_stopped_copy_resumes_where_it_stopped(upgraded_with_episodes):
    db, corpus = upgraded_with_episodes
    with pytest.raises(Stop):
        migration.migrate(db, MODEL, progress=stop_after(2), batch=8)
    assert sorted(copied(db)) == [i for i in range(1, 17) if i != 3]
    assert status(db).left == 50 - 16 and not status(db).ready
    # meanwhile: a new episode, a copied one and a waiting one deleted, a summary filled in
    added = corpus.add(2)
    corpus.delete([5, 30])
    with db.write() as session:
        session.execute(text("UPDATE episode_summaries SET summary = 'back' WHERE id = 3"))
    seen: list[tuple[str, int, int]] = []
    after = migration.migrate(
        db, MODEL, progress=lambda *p: seen.append(p), batch=8, dimension=lambda: DIM
    )
    assert after.ready and after.copied and after.left == 0 and after.dims == DIM
    assert (
        seen[0] == ("copy", 0, 33) and ("copy", 33, 33) in seen
    )  # 30 is gone and seen[-1] == ("index", 1, 1)
    live = [i for i in range(1, 51) if i not in (5, 30)] + added
    vectors = copied(db)
    assert sorted(vectors) == live  # each once, none deleted
    for i in live:
        np.testing.assert_allclose(vectors[i], corpus.vectors[i], atol=1e-6)
    # done: a second run finds nothing to do
    assert migration.migrate(db, MODEL, progress=stop_after(0)).ready


def test_a_stopped_index_build_is_built_again(upgraded_with_episodes, pg_server):
    db, corpus = upgraded_with_episodes
    built = migration.migrate(db, MODEL)
    assert built.ready and built.index == migration.index_name(MODEL, DIM)
    # what a CREATE INDEX CONCURRENTLY stopped half-way leaves: the index, marked invalid
    name = db.engine.url.database
    with pg_server.connect(name) as conn:
        conn.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
            [built.index],
        )
    assert status(db).index is None and not status(db).ready
    assert migration.migrate(db, MODEL).ready
    with db.read() as session:
        valid = session.execute(
            text("SELECT indisvalid FROM pg_index WHERE indexrelid = CAST(:n AS regclass)"),
            {"n": built.index},
        ).scalar()
    assert valid is True


def test_another_process_migrating_is_waited_for_or_left_to_it(upgraded_with_episodes):
    db, _corpus = upgraded_with_episodes
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as other:
        other.execute(text("SELECT pg_advisory_lock(:k)"), {"k": migration._LOCK})
        left = migration.migrate(db, MODEL)  # serve's warm-up: leaves it to the other
        assert not left.copied and copied(db) == {}
        other.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": migration._LOCK})
    assert migration.migrate(db, MODEL, wait=True).ready


def test_a_vector_of_another_size_is_stored_but_not_searched(upgraded_with_episodes):
    """As the in-process index skips it: the write succeeds, searches go on."""
    db, corpus = upgraded_with_episodes
    assert migration.migrate(db, MODEL).ready
    odd = [0.1] * (DIM + 3)
    with db.write() as session:
        session.execute(
            text(
                "INSERT INTO audit_log (id, event_type, created_at, payload, person_id) "
                f"VALUES (900, 'chat.completed', now(), '{{}}', {OWNER})"
            )
        )
        session.execute(
            text(
                "INSERT INTO episode_summaries (id, audit_log_id, summary, embedding, model, "
                "created_at, recall_count, person_id) VALUES (900, 900, 'odd', "
                f"CAST(:e AS jsonb), :m, now(), 0, {OWNER})"
            ),
            {"e": str(odd), "m": MODEL},
        )
    assert 900 in copied(db)
    vectors = PgvectorVectors(lambda: MODEL)
    query = queries_for(corpus)[0]
    with db.read() as session:
        hits = vectors.search(Scope(OWNER, session), query, limit=100)
        assert 900 not in hits.ids and hits.ids.size == 49
        assert 900 not in vectors.cosines(Scope(OWNER, session), [1, 2, 900], query)
        with pytest.raises(ValueError, match=f"query has {DIM + 3} dims, index has {DIM}"):
            vectors.search(Scope(OWNER, session), np.asarray(odd, dtype=np.float32), limit=3)


def test_caesar_db_vectors_killed_mid_copy_resumes_where_it_stopped(pg_url, tmp_path):
    """The real command, killed (SIGKILL) while copying one episode per transaction, then run
    again: every episode copied once, the index built."""
    from crashkit import settings_dict, settings_env

    db = Database(pg_url)
    try:
        migrate.upgrade(db, "0006")
        Corpus(db, seed=8).add(600)
        migrate.upgrade(db)
        env = settings_env(settings_dict(tmp_path / "home", pg_url, "http://127.0.0.1:9", "-"))
        command = [sys.executable, "-c", "from caesar.cli.main import main; main()", "db"]
        command += ["vectors", "--batch-size", "1"]
        first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        through = 0
        deadline = time.monotonic() + 120
        while first.poll() is None and time.monotonic() < deadline:
            with db.read() as session:
                sql_ = "SELECT copied_through FROM episode_vectors_backfill"
                through = int(session.execute(text(sql_)).scalar() or 0)
            if 0 < through:
                first.kill()
                break
            time.sleep(0.02)
        assert first.wait(30) == -signal.SIGKILL, first.communicate()
        stopped = status(db)
        assert not stopped.copied and 0 < stopped.left < 600
        assert sorted(copied(db)) == list(range(1, 601 - stopped.left))  # whole batches only

        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
        assert second.returncode == 0, second.stderr
        assert f"0 of {stopped.left:,} episodes copied" in second.stderr
        assert f"{stopped.left:,} of {stopped.left:,} episodes copied" in second.stderr
        assert "HNSW index built" in second.stderr and ": pgvector (" in second.stdout
        assert sorted(copied(db)) == list(range(1, 601))
    finally:
        db.dispose()


# -- through Services: recall before, during and after ------------------------------------------
CHATS = [
    [("user", "I am planning the garden beds for spring tomatoes."), ("assistant", "Water them.")],
    [("user", "Can you help me write a cover letter?"), ("assistant", "Open with the role.")],
    [("user", "My dog Biscuit hates the vet."), ("assistant", "Try treats before the visit.")],
    [("user", "Which kayak should I buy for the lake?"), ("assistant", "A stable touring one.")],
    [("user", "The tomatoes got blight in July."), ("assistant", "Remove the leaves.")],
]
QUERIES = ["what tomatoes did I plant?", "the vet and my dog", "a kayak for the lake"]


def _summarised(make_services: Any, database_url: str, vector_search: str = "auto") -> Any:
    from caesar.importer import import_conversations
    from caesar.workers import run_until_caught_up

    services = make_services(
        database_url=database_url,
        gateway={"routes": {"memory_summarise": "offline:textrank"}},
        memory={
            "episodes_summarise": {"enabled": True},
            "episodes_recall": {"vector_search": vector_search},
        },
    )
    import_conversations(
        services,
        [
            {
                "created_at": f"2026-05-{10 + i}T12:00:00",
                "messages": [{"role": r, "content": c} for r, c in chat],
            }
            for i, chat in enumerate(CHATS)
        ],
        scope=Scope(OWNER),
    )
    run_until_caught_up(services.workers["memory.summarise"])
    return services


def _recalled(services: Any) -> list[list[tuple[int, float]]]:
    out = []
    for query in QUERIES:
        for fusion in ("hybrid", "dense"):
            found = services.episodes.preview(
                query, fusion=fusion, similarity_threshold=0.0, scope=Scope(OWNER)
            )
            out.append([(e.episode_id, e.relevance) for e in found])
    return out


def assert_same(got: list[list[tuple[int, float]]], want: list[list[tuple[int, float]]]) -> None:
    """The same episodes in the same order, each as relevant (to float32 rounding)."""
    assert [[i for i, _ in hits] for hits in got] == [[i for i, _ in hits] for hits in want]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose([r for _, r in a], [r for _, r in b], atol=1e-5)


def _as_before_the_migration(services: Any) -> None:
    """The state migration 0007 leaves an install whose episodes predate it."""
    with services.db.write() as session:
        session.execute(text("DELETE FROM episode_vectors"))
        session.execute(
            text(
                "UPDATE episode_vectors_backfill SET upto = (SELECT max(id) FROM "
                "episode_summaries), copied_through = 0, finished_at = NULL"
            )
        )


def test_recall_answers_the_same_before_during_and_after_the_migration(
    make_services, pg_url, monkeypatch
):
    from caesar.memory.engine import pgvector

    monkeypatch.setattr(pgvector, "RELEASE_AFTER_SECONDS", 0.0)  # no search in flight here
    services = _summarised(make_services, pg_url)
    backend = services.episodes.backend
    assert isinstance(backend, PgvectorSearch)  # "auto" on PostgreSQL
    _as_before_the_migration(services)
    assert services.episodes.warm() == len(CHATS)  # the in-process index, loaded
    with services.db.read() as session:
        assert not backend.searches_database(session)
    before = _recalled(services)
    assert all(before)

    with pytest.raises(Stop):  # 2 batches of 2: 4 of 5 copied
        migration.migrate(services.db, backend.model_id, progress=stop_after(2), batch=2)
    assert status(services.db, backend.model_id).left == 1
    with services.db.read() as session:
        assert not backend.searches_database(session)
    assert_same(_recalled(services), before)
    # another server, starting now: the in-process index too
    other = make_services(settings=services.settings)
    assert other.episodes.warm() == len(CHATS)

    done = services.episodes.migrate_vectors()
    assert done is not None and done.ready
    with services.db.read() as session:
        assert backend.searches_database(session)
    assert_same(_recalled(services), before)
    assert backend.in_process._indexes.everyone_loaded() == []  # let go: PostgreSQL searches now
    other.episodes.warm()  # its next start, or its next check, sees it ready
    with other.db.read() as session:
        assert other.episodes.backend.searches_database(session)
    assert_same(_recalled(other), before)


def test_serve_warms_up_in_process_then_migrates_in_the_background(make_services, pg_url, caplog):
    """`caesar serve`'s warm-up thread, as it runs: ready on the in-process index, then the
    migration, then searching PostgreSQL."""
    from caesar.cli.main import _warm

    caplog.set_level(logging.INFO)
    services = _summarised(make_services, pg_url)
    _as_before_the_migration(services)
    before = _recalled(services)
    _warm(services)
    said = [r.getMessage() for r in caplog.records if r.name in ("caesar.warm", "caesar.vectors")]
    assert said.index("episode index ready: 5 episodes") < said.index(
        "episode vectors: 5 of 5 episodes copied into pgvector (100%)"
    )
    assert "episode search: in-process until the vectors are migrated" in said[0]
    assert said[-1].startswith("episode search: pgvector (idx_episode_vectors_hnsw_")
    with services.db.read() as session:
        assert services.episodes.backend.searches_database(session)
    assert_same(_recalled(services), before)


def test_a_fresh_install_searches_pgvector_from_its_first_episode(make_services, pg_url):
    services = make_services(database_url=pg_url)
    status = services.episodes.migrate_vectors()  # serve's warm-up: nothing to copy
    assert status is not None and status.ready and status.dims == 384  # the embedder's
    with services.db.read() as session:
        assert services.episodes.backend.searches_database(session)


def test_tables_missing_where_the_extension_is_there_are_created_by_the_migration(
    make_services, pg_url
):
    """As after an upgrade without pgvector, fixed since: "pgvector" starts, and migrates."""
    services = _summarised(make_services, pg_url, "pgvector")
    with services.db.write() as session:  # what migration 0007 leaves without pgvector
        session.execute(text("DROP TRIGGER episode_vectors_sync ON episode_summaries"))
        session.execute(text("DROP FUNCTION episode_vectors_sync()"))
        session.execute(text("DROP TABLE episode_vectors, episode_vectors_backfill"))
    _refuse_missing_pgvector(services.settings, services)
    assert services.episodes.warm() == len(CHATS)  # in-process meanwhile
    done = services.episodes.migrate_vectors()
    assert done is not None and done.ready and sorted(copied(services.db)) == [1, 2, 3, 4, 5]


def test_in_process_on_postgresql_migrates_nothing(make_services, pg_url):
    services = _summarised(make_services, pg_url, "in_process")
    assert services.episodes.migrate_vectors() is None


def search_line(services: Any) -> str:
    """What `caesar serve` prints of where recall searches."""
    lines = startup_summary(services.settings, services, run_workers=False)
    return next(line for line in lines if line.startswith("search "))


# -- pgvector that cannot be used ----------------------------------------------------------------
@pytest.fixture
def limited_url(pg_server: Any) -> str:
    """A database owned by a role that is not a superuser: it may create tables, not the
    (untrusted) pgvector extension."""
    from pg import create_database

    role = f"caesar_{uuid.uuid4().hex[:8]}"
    url = create_database(pg_server)
    name = url.rsplit("/", 1)[1]
    with pg_server.connect() as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                sql.Identifier(name), sql.Identifier(role)
            )
        )
    return url.replace(f"//{pg_server.user}@", f"//{role}@")


def test_create_extension_denied_says_how_to_fix_it(make_services, limited_url, pg_server, caplog):
    caplog.set_level(logging.INFO)
    services = _summarised(make_services, limited_url)  # migrated as that role
    warned = [r.getMessage() for r in caplog.records if r.name == "alembic.runtime.migration"]
    fix = "as a superuser, run `CREATE EXTENSION vector;` in database"
    assert any("may not create the pgvector extension" in m and fix in m for m in warned)

    # "pgvector" insists: a start-up error naming the fix
    insists = make_services(
        database_url=limited_url, memory={"episodes_recall": {"vector_search": "pgvector"}}
    )
    with pytest.raises(ConfigError, match="CREATE EXTENSION vector"):
        insists.episodes.warm()
    with pytest.raises(ConfigError, match="may not create the pgvector extension"):
        _refuse_missing_pgvector(insists.settings, insists)  # caesar serve, before listening
    _refuse_missing_pgvector(services.settings, services)  # "auto": serves, and says so
    search = search_line(services)
    assert search.startswith("search     tsvector and an index in this process — caesar's")
    assert fix in search
    # "auto": a warning naming the fix, and recall as before
    caplog.clear()
    assert services.episodes.warm() == len(CHATS)
    assert any(fix in r.getMessage() for r in caplog.records if r.name == "caesar.vectors")
    before = _recalled(services)
    assert all(before)
    with pytest.raises(ConfigError, match="may not create the pgvector extension"):
        services.episodes.migrate_vectors()

    # the fix, done by a superuser; the role needs nothing more
    with pg_server.connect(limited_url.rsplit("/", 1)[1]) as conn:
        conn.execute("CREATE EXTENSION vector")
    assert "pgvector's tables are not in this database yet" in search_line(services)
    status = services.episodes.migrate_vectors()
    assert status is not None and status.ready
    assert_same(_recalled(services), before)
    with services.db.read() as session:
        assert services.episodes.backend.searches_database(session)
    assert search_line(services).endswith("dims): nothing loaded in this process")
