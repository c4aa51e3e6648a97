"""The contract every search backend (memory/engine/backend.py) passes, on fixed data, on each
engine it serves: a vector search answers as an exact brute force over the same rows does —
with thresholds, age filters and a rank (test_vectors.CASES), rows added after the first
search, deletes, and a change of embedding model.

Backends: SQLite and PostgreSQL with the in-process index; PostgreSQL's own vector search
(pgvector) without an index (an exact scan: the SQL's filters and over-fetch, checked exactly)
and PostgreSQL's backend as it runs, once the vectors are migrated and the HNSW index built.

Tolerance: exact backends give the same ids in the same order, except rows whose scores tie to
float32 rounding (test_vectors.TIE, 1e-6), which may come in either order, and every cosine
within 1e-5 of the reference's. pgvector's HNSW index is approximate: over all cases and
queries it returns at least HNSW_RECALL of the exact top k's ids, every one it returns passes
the filters with its exact cosine, in the ranking's order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from conftest import OWNER
from sqlalchemy import text
from test_vectors import (
    DIM,
    MODEL,
    NOW_S,
    TIE,
    Corpus,
    check,
    queries_for,
    searches,
)

from caesar.clock import utcnow
from caesar.db import Database, migrate
from caesar.db.models import EpisodeSummary, Person
from caesar.memory.engine.backend import FullTextSearch, VectorSearch, search_backend
from caesar.memory.engine.in_process import InProcessVectors
from caesar.memory.engine.pgvector import PgvectorSearch, PgvectorVectors
from caesar.memory.engine.pgvector_migration import (
    build_person_indexes,
    drop_person_indexes,
    index_name,
)
from caesar.memory.engine.vectors import CurrentModelIndex, epoch_seconds
from caesar.memory.importance import SECONDS_PER_DAY
from caesar.memory.scope import Scope

OTHER = "other-model"
# measured at 5,000 rows: 0.978 (hnsw.ef_search 40), 0.982 (100, the backend's), 0.987 (200)
HNSW_RECALL = 0.95
BACKENDS = ["sqlite", "postgresql", "pgvector", "pgvector-hnsw"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    """(migrated database, backend name) for each backend."""
    url = (
        f"sqlite:///{tmp_path / 'caesar.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    db = Database(url)
    migrate.upgrade(db)
    yield db, request.param
    db.dispose()


class Bound:
    """A backend and a read session in VectorIndex.search's shape, for test_vectors.check."""

    def __init__(self, backend: VectorSearch, session: Any, person: int = OWNER) -> None:
        self.backend, self.session, self.person = backend, session, person

    def search(self, query: np.ndarray, **kwargs: Any) -> Any:
        return self.backend.search(Scope(self.person, self.session), query, **kwargs)


def _words(db: Database) -> FullTextSearch:
    """The full-text half of the database engine's backend (the door picks it by engine)."""
    indexes = CurrentModelIndex(
        EpisodeSummary, lambda: "m", extra_filter=EpisodeSummary.summary != ""
    )
    return search_backend(db.engine.dialect.name, indexes, "in_process")


def _backend(db: Database, name: str, model: list[str]) -> VectorSearch:
    """Backend `name`, searching the vectors of model `model[0]` (changed in place)."""
    if name == "pgvector":
        return PgvectorVectors(lambda: model[0])
    indexes = CurrentModelIndex(
        EpisodeSummary, lambda: model[0], extra_filter=EpisodeSummary.summary != ""
    )
    vectors = "pgvector" if name == "pgvector-hnsw" else "in_process"
    return search_backend(db.engine.dialect.name, indexes, vectors, dimension=lambda: DIM)


def _check(
    store: tuple[Database, str],
    backend: VectorSearch,
    corpus: Corpus,
    model: str = MODEL,
    person: int = OWNER,
) -> int:
    """`person`'s searches against brute force over `corpus` (their rows)."""
    db, name = store
    if name != "pgvector-hnsw":
        with db.read() as session:
            backend.refresh(Scope(person, session))
            return check(Bound(backend, session, person), corpus, queries_for(corpus), model)
    assert isinstance(backend, PgvectorSearch)
    assert backend.migrate(db).ready  # type: ignore[union-attr]  # builds the model's index
    with db.read() as session:
        assert backend.searches_database(session)
    scans = _index_scans(db, model)
    with db.read() as session:
        # at these sizes the planner would rather read and sort the model's rows: the index
        # is what is tested here
        for plan in ("seqscan", "bitmapscan", "sort"):
            session.execute(text(f"SET LOCAL enable_{plan} = off"))
        backend.refresh(Scope(person, session))
        compared = check_recall(Bound(backend, session, person), corpus, queries_for(corpus), model)
        session.execute(text("SELECT pg_stat_force_next_flush()"))
    assert _index_scans(db, model) > scans  # the searches went through the HNSW index
    return compared


def _index_scans(db: Database, model: str, person: int | None = None) -> int:
    """Scans of the model's HNSW index and its people's (`person`: only theirs)."""
    name = index_name(model, DIM)
    if person is None:
        sql = "SELECT sum(idx_scan) FROM pg_stat_user_indexes WHERE indexrelname LIKE :name"
        name += "%"
    else:
        sql = "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = :name"
        name += f"_p{person}"
    with db.read() as session:
        return int(session.execute(text(sql), {"name": name}).scalar() or 0)


def check_recall(search: Bound, corpus: Corpus, queries: np.ndarray, model: str) -> int:
    """An approximate search against brute force (see the module doc): the share of the
    exact ids it finds, and every hit exact. Returns how many hits compared."""
    found = wanted = 0
    for case, hits, want, scores in searches(search, corpus, queries, model):
        got = [int(i) for i in hits.ids]
        assert all(i in scores for i in got), case  # each passes the filters
        keys = [scores[i][0] for i in got]
        assert all(a >= b - TIE for a, b in zip(keys, keys[1:], strict=False)), case
        np.testing.assert_allclose(hits.cosine, [scores[i][1] for i in got], atol=1e-5)
        found += len(set(got) & set(want))
        wanted += len(want)
    assert found >= HNSW_RECALL * wanted, (found, wanted)
    return wanted


def test_same_top_k_as_exact_search_through_growth_deletes_and_a_model_change(store):
    db, name = store
    corpus = Corpus(db, seed=4)
    corpus.add(900)
    corpus.add(300, model=OTHER)
    model = [MODEL]
    backend = _backend(db, name, model)
    assert _check(store, backend, corpus) > 100

    corpus.add(200)  # written after the first search
    assert _check(store, backend, corpus) > 100

    # Delete the best rows of every query, as retention or a forget would: never returned
    # again, and the rows behind them move up.
    gone: set[int] = set()
    for query in queries_for(corpus):
        gone.update(corpus.brute_force(query, limit=4, threshold=0.2)[0])
    corpus.delete(sorted(gone))
    backend.forget(sorted(gone))
    assert _check(store, backend, corpus) > 100

    # The embedder changes: only the new model's vectors are searched, deletes included.
    model[0] = OTHER
    assert backend.model_id == OTHER
    assert _check(store, backend, corpus, model=OTHER) > 100
    best = corpus.brute_force(queries_for(corpus)[0], limit=3, model=OTHER)[0]
    corpus.delete(best)
    backend.forget(best)
    assert _check(store, backend, corpus, model=OTHER) > 100


def test_a_person_searches_their_own_rows_alone_and_still_gets_k(store):
    """Two people with the same vectors: Anna's rows are a copy of the owner's, under other
    ids. Each one's every search answers as brute force over their own rows alone: never a row
    of the other's, and as many as asked (the other's equal rows, filtered out after a top k,
    would leave fewer). The full-text half counts, scores and returns their rows alone."""
    db, name = store
    anna = _add_anna(db)
    mine = Corpus(db, seed=4)
    mine.add(600)
    theirs = Corpus(db, seed=4, person=anna)
    theirs.next_id = 10_001
    theirs.add(600)
    assert all(np.array_equal(v, theirs.vectors[10_000 + i]) for i, v in mine.vectors.items())
    backend = _backend(db, name, [MODEL])
    assert _check(store, backend, theirs, person=anna) > 100
    assert _check(store, backend, mine, person=OWNER) > 100
    with db.read() as session:
        query = queries_for(mine)[0]
        newest = backend.newest(Scope(anna, session), query, limit=10)
        assert [int(i) for i in newest.ids] == list(range(10_600, 10_590, -1))
        assert sorted(backend.cosines(Scope(anna, session), [1, 2, 10_001], query)) == [10_001]
        assert sorted(backend.stored_cosines(Scope(anna, session), [1, 10_001], query)) == [10_001]
    if name in ("pgvector", "pgvector-hnsw"):
        return  # the full text is the engine's, checked on the other two
    with db.read() as session:
        words = _words(db)
        # "episode 5" is the owner's summary word for word; Anna's best match is hers
        found = words.keyword_scores(Scope(anna, session), ["episode", "5"], limit=50)
        assert len(found) == 50 and all(i > 10_000 for i in found)
        assert words.term_counts(Scope(anna, session), ["episode", "5"]) == (600, [600, 0])
        assert words.term_counts(Scope(OWNER, session), ["episode", "5"]) == (600, [600, 1])
        assert words.count_holding_all(Scope(anna, session), ["episode"]) == 600
        assert words.indexed_id_range(Scope(anna, session)) == (10_001, 10_600)
        assert words.probe_contains(Scope(anna, session), ["episode"], 1) == [False]
        assert words.probe_contains(Scope(anna, session), ["episode"], 10_001) == [True]


def test_newest_and_cosines_answer_as_the_rows_do(store):
    db, name = store
    corpus = Corpus(db, seed=5)
    corpus.add(400)
    corpus.add(50, model=OTHER)
    backend = _backend(db, name, [MODEL])
    query = queries_for(corpus)[0]
    corpus.delete([400, 399])
    backend.forget([400, 399])
    min_created = NOW_S - 30 * SECONDS_PER_DAY
    with db.read() as session:
        backend.refresh(Scope(OWNER, session))
        newest = backend.newest(Scope(OWNER, session), query, limit=10, min_created=min_created)
        live = [i for i in sorted(corpus.vectors, reverse=True) if corpus.model[i] == MODEL]
        young = [i for i in live if epoch_seconds(corpus.created[i]) >= min_created]
        assert [int(i) for i in newest.ids] == young[:10]
        np.testing.assert_allclose(
            newest.cosine, [corpus.vectors[i] @ query for i in young[:10]], atol=1e-5
        )
        # another model's rows and deleted ones are not seen; the rest exactly
        asked = [1, 2, 3, 399, 420]
        seen = backend.cosines(Scope(OWNER, session), asked, query)
        assert sorted(seen) == [1, 2, 3]
        for i, cosine in seen.items():
            assert cosine == pytest.approx(float(corpus.vectors[i] @ query), abs=1e-5)
    # written after the refresh: read from their rows (a tenth have only the JSON record)
    added = corpus.add(20)
    with db.read() as session:
        stored = backend.stored_cosines(Scope(OWNER, session), added, query)
    assert sorted(stored) == added
    for i, cosine in stored.items():
        assert cosine == pytest.approx(float(corpus.vectors[i] @ query), abs=1e-5)


def test_a_query_of_the_wrong_dimension_is_a_clear_error(store):
    db, name = store
    backend = _backend(db, name, [MODEL])
    with db.read() as session:
        backend.refresh(Scope(OWNER, session))
        assert (
            backend.search(Scope(OWNER, session), np.ones(DIM, dtype=np.float32), limit=3).ids.size
            == 0
        )
    Corpus(db).add(10)
    with db.read() as session, pytest.raises(ValueError, match="dims"):
        backend.refresh(Scope(OWNER, session))
        backend.search(Scope(OWNER, session), np.ones(DIM + 1, dtype=np.float32), limit=3)


# -- through Services: the setting chooses, and recall answers the same -----------------------
CHATS = [
    [("user", "I am planning the garden beds for spring tomatoes."), ("assistant", "Water them.")],
    [("user", "Can you help me write a cover letter?"), ("assistant", "Open with the role.")],
    [("user", "My dog Biscuit hates the vet."), ("assistant", "Try treats before the visit.")],
    [("user", "Which kayak should I buy for the lake?"), ("assistant", "A stable touring one.")],
]
QUERIES = ["what tomatoes did I plant?", "the vet and my dog", "a kayak for the lake", "taxes"]


def test_recall_through_pgvector_answers_as_the_in_process_index_does(make_services, pg_url):
    from caesar.importer import import_conversations
    from caesar.memory.engine.pgvector import PgvectorSearch
    from caesar.memory.engine.postgres import PostgresSearch
    from caesar.workers import run_until_caught_up

    def build(vector_search: str) -> Any:
        return make_services(
            database_url=pg_url,
            gateway={"routes": {"memory_summarise": "offline:textrank"}},
            memory={
                "episodes_summarise": {"enabled": True},
                "episodes_recall": {"vector_search": vector_search},
            },
        )

    in_process, in_database = build("in_process"), build("pgvector")
    assert isinstance(in_process.episodes.backend, PostgresSearch)
    assert isinstance(in_database.episodes.backend, PgvectorSearch)
    import_conversations(
        in_process,
        [
            {
                "created_at": f"2026-05-{10 + i}T12:00:00",
                "messages": [{"role": r, "content": c} for r, c in chat],
            }
            for i, chat in enumerate(CHATS)
        ],
        scope=Scope(OWNER),
    )
    run_until_caught_up(in_process.workers["memory.summarise"])
    status = in_database.episodes.migrate_vectors()  # builds the model's HNSW index
    assert status is not None and status.ready and status.dims == 384
    assert in_database.episodes.warm() == len(CHATS)
    with in_database.db.read() as session:
        assert in_database.episodes.backend.searches_database(session)
    for query in QUERIES:
        for fusion in ("hybrid", "dense"):
            want = in_process.episodes.preview(
                query, fusion=fusion, similarity_threshold=0.0, scope=Scope(OWNER)
            )
            got = in_database.episodes.preview(
                query, fusion=fusion, similarity_threshold=0.0, scope=Scope(OWNER)
            )
            assert [e.episode_id for e in got] == [e.episode_id for e in want], (query, fusion)
            for a, b in zip(got, want, strict=True):
                assert a.relevance == pytest.approx(b.relevance, abs=1e-5)


def test_pgvector_is_refused_on_sqlite(make_settings):
    with pytest.raises(ValueError, match="needs PostgreSQL"):
        make_settings(memory={"episodes_recall": {"vector_search": "pgvector"}})


def test_a_persons_keyword_scores_are_theirs_alone_whatever_the_household_holds(store):
    """Each person's full text is their own (SQLite: their own FTS5 tables, migration 0017;
    PostgreSQL: their own counts): another person's rows, sharing every word, change neither
    a person's scores nor their counts."""
    db, name = store
    if name in ("pgvector", "pgvector-hnsw"):
        return  # the full text is the engine's, checked on the other two
    anna = _add_anna(db)
    theirs = Corpus(db, seed=4, person=anna)
    theirs.next_id = 10_001
    theirs.add(300)
    _say(db, range(10_001, 10_031), "a kayak trip")  # 30 of Anna's 300

    def anna_sees() -> tuple[dict[int, float], tuple[int, list[int]]]:
        with db.read() as session:
            words = _words(db)
            return (
                words.keyword_scores(Scope(anna, session), ["kayak", "trip"], limit=400),
                words.term_counts(Scope(anna, session), ["kayak", "trip"]),
            )

    alone = anna_sees()
    assert len(alone[0]) == 30 and alone[1] == (300, [30, 30])
    Corpus(db, seed=6).add(900)
    _say(db, range(1, 801), "kayak")  # the owner's: a common word in the household's rows
    assert anna_sees() == alone


def _add_anna(db: Database, name: str = "Anna") -> int:
    """A second person, Anna (not people.add: its audit row would take an id the corpus uses)."""
    with db.write() as session:
        session.add(person := Person(name=name, is_owner=False, created_at=utcnow()))
        session.flush()
        return int(person.id)


def _say(db: Database, ids: range, summary: str) -> None:
    """Set these episodes' summaries (the full-text triggers index them again)."""
    with db.write() as session:
        session.execute(
            sa.text("UPDATE episode_summaries SET summary = :s WHERE id BETWEEN :lo AND :hi"),
            {"s": summary, "lo": ids[0], "hi": ids[-1]},
        )


def _indexes(db: Database, person: int | str = "[0-9]+") -> set[str]:
    """A household's people's own indexes (`person`'s alone if given)."""
    sql = "SELECT indexname FROM pg_indexes WHERE indexname ~ :pattern"
    with db.read() as session:
        pattern = f"^idx_episode_.*_p{person}$"
        return set(session.execute(text(sql), {"pattern": pattern}).scalars())


def _gin_scans(db: Database, person: int) -> int:
    sql = "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = :name"
    with db.read() as session:
        name = f"idx_episode_fts_document_p{person}"
        return int(session.execute(text(sql), {"name": name}).scalar() or 0)


def test_in_a_household_each_persons_searches_read_their_own_indexes(pg_url):
    """PostgreSQL: a household's people have partial indexes of their own rows (GIN and, per
    model, HNSW; person_tables.py), and a person's vector and keyword searches read theirs, not
    the shared ones that hold everyone's rows. A person written once the model's index exists
    gets theirs at once; a removed person's go with them."""
    db = Database(pg_url)
    migrate.upgrade(db)
    anna = _add_anna(db)  # built after the person's commit, not by writing them
    assert _indexes(db) == set()
    Corpus(db, seed=4).add(300)
    theirs = Corpus(db, seed=5, person=anna)
    theirs.next_id = 10_001
    theirs.add(300)
    _say(db, range(10_001, 10_031), "a kayak trip")
    backend = _backend(db, "pgvector-hnsw", [MODEL])
    assert isinstance(backend, PgvectorSearch)
    assert backend.migrate(db).ready  # the model's index, then the people's missing ones
    hnsw = index_name(MODEL, DIM)
    people = {OWNER, anna}
    assert _indexes(db) == {
        *(f"idx_episode_fts_document_p{p}" for p in people),
        *(f"{hnsw}_p{p}" for p in people),
    }
    with db.write() as session:
        session.execute(text("ANALYZE episode_fts"))  # as autovacuum would: 300 rows each
    before = _index_scans(db, MODEL, anna), _index_scans(db, MODEL, OWNER), _gin_scans(db, anna)
    with db.read() as session:
        for plan in ("seqscan", "sort"):  # at this size the planner would read every row
            session.execute(text(f"SET LOCAL enable_{plan} = off"))
        backend.refresh(Scope(anna, session))
        hits = backend.search(Scope(anna, session), queries_for(theirs)[0], limit=5)
        assert len(hits.ids) == 5 and all(int(i) > 10_000 for i in hits.ids)
        session.execute(text("SET LOCAL enable_indexscan = off"))  # GIN's scans are bitmaps
        words = _words(db)
        # at 300 rows the planner reads all of hers by the person's B-tree; among 10k, a
        # word's few by her GIN index (docs/performance.md): here the B-tree is left out
        session.execute(text("DROP INDEX idx_episode_fts_person"))
        assert len(words.keyword_scores(Scope(anna, session), ["kayak"], limit=50)) == 30
        session.execute(text("SELECT pg_stat_force_next_flush()"))
    assert _index_scans(db, MODEL, anna) > before[0]  # her own HNSW index
    assert _index_scans(db, MODEL, OWNER) == before[1]
    assert _gin_scans(db, anna) > before[2]  # her own GIN index
    ben, cleo = _add_anna(db, "Ben"), _add_anna(db, "Cleo")
    for p in (ben, cleo):  # as `caesar people add` and a front-end's first sight do
        assert build_person_indexes(db, person=p) == 2
        assert _indexes(db, p) == {f"idx_episode_fts_document_p{p}", f"{hnsw}_p{p}"}
    drop_person_indexes(db, ben)  # as `caesar people remove` does
    assert _indexes(db, ben) == set()
    with db.write() as session:  # a person gone while their indexes were built
        session.delete(session.get(Person, cleo))
    assert build_person_indexes(db) == 2  # Ben's two again: he is still a person here
    assert _indexes(db, cleo) == set()
    db.dispose()


def test_start_up_loads_the_most_recently_active_within_its_budget(tmp_path):
    """SQLite's in-process index: `warm` loads the most recently active person first and stops
    at its budget (the first person whatever their size); the others load on their first
    search, and find what they would have."""
    db = Database(f"sqlite:///{tmp_path / 'caesar.db'}")
    migrate.upgrade(db)
    anna = _add_anna(db)
    mine = Corpus(db, seed=7)
    mine.add(300)
    theirs = Corpus(db, seed=8, person=anna)
    theirs.next_id = 10_001
    theirs.add(200)  # Anna's episodes are the newest
    backend = _backend(db, "sqlite", [MODEL])
    assert isinstance(backend, InProcessVectors)
    assert backend.warm(db, budget=400) == 200  # Anna's; the owner's 300 would pass 400
    assert backend.warm(db, budget=100) == 200  # the first person's, over the budget
    assert backend.warm(db, budget=500) == 500
    fresh = _backend(db, "sqlite", [MODEL])
    assert isinstance(fresh, InProcessVectors)
    fresh.warm(db, budget=1)
    assert _check((db, "sqlite"), fresh, mine, person=OWNER) > 100  # loaded on first search
    db.dispose()
