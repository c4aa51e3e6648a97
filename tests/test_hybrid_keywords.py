"""The keyword stage's shortcuts (issue #5) on both engines: restricted and index-only scores equal
the full ranking's, remembered term counts follow every change of the index, a query made only
of common words scores a bounded set with the same scores (memory/recall/common_words.py), and the
hybrid search's threshold-bound dense pool and float32 row fetch change no recall."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest
from conftest import OWNER
from sqlalchemy import delete, insert, update
from test_hybrid import NOW, Params

from caesar.db.models import AuditLog, EpisodeSummary
from caesar.memory.engine.backend import search_backend
from caesar.memory.engine.in_process import FixedIndex
from caesar.memory.engine.vectors import VectorIndex, epoch_seconds
from caesar.memory.importance import recall_weight
from caesar.memory.recall import common_words, hybrid, keywords
from caesar.memory.scope import Scope
from tests.memory_helpers import engine_scope


def _add(db, episodes):
    """episodes: (id, conversation, summary, vector or None, model, created_at). Ids are given
    so the tests know the order; the JSON record only (no float32 copy) when vector is a list."""
    with db.write() as session:
        session.execute(
            insert(AuditLog),
            [
                {
                    "id": i,
                    "event_type": "chat.completed",
                    "created_at": when,
                    "payload": {"messages": [{"role": "user", "content": chat}], "reply": "ok"},
                    "person_id": OWNER,
                }
                for i, chat, _, _, _, when in episodes
            ],
        )
        session.execute(
            insert(EpisodeSummary),
            [
                {
                    "id": i,
                    "audit_log_id": i,
                    "summary": summary,
                    "embedding": [float(x) for x in (vector if vector is not None else [1.0])],
                    "embedding_f32": (
                        vector.astype("<f4").tobytes() if isinstance(vector, np.ndarray) else None
                    ),
                    "model": model,
                    "created_at": when,
                    "person_id": OWNER,
                }
                for i, _, summary, vector, model, when in episodes
            ],
        )


def test_restricted_and_index_only_scores_equal_the_full_ranking_on_both_engines(migrated_db):
    chats = ["kayak trip", "kayak kayak lake", "tax forms", "lake house kayak", "kayak", "tea"]
    _add(migrated_db, [(i, c, "x", None, "m", NOW) for i, c in enumerate(chats, start=1)])
    with migrated_db.read() as session:
        full = keywords.keyword_scores(
            engine_scope(session, OWNER), "kayak lake", model_id="m", limit=10
        )
        assert set(full) == {1, 2, 4, 5}
        for ids in ([2], [1, 5], [3, 4, 6], [5, 1, 2, 4]):
            restricted = keywords.keyword_scores(
                engine_scope(session, OWNER), "kayak lake", model_id="m", limit=10, ids=ids
            )
            assert restricted == pytest.approx({i: full[i] for i in ids if i in full})
        newest = keywords.keyword_scores(
            engine_scope(session, OWNER), "kayak lake", model_id=None, limit=10, min_id=4
        )  # the index alone, no episode rows read
        assert newest == pytest.approx({i: s for i, s in full.items() if i >= 4})
        both = keywords.keyword_scores(
            engine_scope(session, OWNER), "kayak lake", model_id="m", limit=10, every=True
        )
        assert both == pytest.approx({i: full[i] for i in (2, 4)})  # same scores, fewer rows
        assert (
            keywords.keyword_scores(
                engine_scope(session, OWNER), "kayak", model_id="other", limit=10
            )
            == {}
        )


def test_term_counts_follow_every_change_of_the_index_on_both_engines(migrated_db):
    """SQLite remembers the counts while the index is unchanged: a summary rewritten to as many
    words, or a new episode, is seen at once."""
    _add(migrated_db, [(1, "kayak", "alpha", None, "m", NOW)])

    def counts():
        with migrated_db.read() as session:
            return keywords.term_counts(engine_scope(session, OWNER), ["alpha", "bravo", "kayak"])

    assert counts() == counts() == (1, [1, 0, 1])
    with migrated_db.write() as session:
        session.execute(
            update(EpisodeSummary).where(EpisodeSummary.id == 1).values(summary="bravo")
        )
    assert counts() == (1, [0, 1, 1])
    _add(migrated_db, [(2, "kayak trip", "bravo", None, "m", NOW)])
    assert counts() == (2, [0, 2, 2])
    with migrated_db.write() as session:
        session.execute(delete(EpisodeSummary).where(EpisodeSummary.id == 1))
    assert counts() == (1, [0, 1, 1])
    # past one varint byte in FTS5's averages record (SQLite: the total is read from it)
    _add(migrated_db, [(i, "tea", "x", None, "m", NOW) for i in range(3, 303)])
    assert counts() == (301, [0, 1, 1])


def test_a_rare_word_outweighs_common_ones_on_both_engines(migrated_db):
    """ "When did Melanie go to the museum?" over conversations that all name Melanie and most
    say "go": the one holding "museum" ranks first, by far (bm25's idf on SQLite; each word's
    ts_rank weighed by its idf on PostgreSQL, where ts_rank alone ranked it 3rd of 6)."""
    chats = [
        "Melanie said we should go go go to the beach and go swimming, Melanie!",
        "Melanie: let's go hiking, go camping, go out. Melanie loves to go.",
        "Melanie went to the museum with her kids.",
        "Melanie and I go to pottery class; we go every week.",
        "Melanie painted a sunset.",
        "Melanie wants to go to the concert, go with her friends.",
    ]
    _add(migrated_db, [(i, c, "x", None, "m", NOW) for i, c in enumerate(chats, start=1)])
    with migrated_db.read() as session:
        found = keywords.keyword_scores(
            engine_scope(session, OWNER),
            "When did Melanie go to the museum?",
            model_id="m",
            limit=10,
        )
        ranked = sorted(found, key=lambda i: -found[i])
        assert ranked[0] == 3
        assert found[3] >= 2 * max(v for i, v in found.items() if i != 3)


def test_indexed_rows_reads_the_sqlite_varint_at_the_head_of_the_averages_record():
    assert keywords.indexed_rows(None) == keywords.indexed_rows(b"") == 0
    assert keywords.indexed_rows(bytes([5, 0x81, 0x00])) == 5  # then per-column token totals
    assert keywords.indexed_rows(bytes([0x82, 0x2C, 7])) == 300
    assert keywords.indexed_rows(bytes([0x81, 0x80, 0x80, 0x00])) == 1 << 21
    assert keywords.indexed_rows(bytes([0xFF] * 8 + [0x01])) == ((1 << 56) - 1) << 8 | 1


def test_recent_share_only_for_queries_of_common_words_over_budget():
    common = keywords.COMMON_MIN_DOCS
    assert common_words.recent_share([common, 3 * common], budget=2 * common) == 0.5
    assert common_words.recent_share([common, common], budget=2 * common) is None  # within budget
    # one word under the floor carries the query: matched everywhere, however many postings
    assert common_words.recent_share([common - 1, 100 * common], budget=common) is None
    assert common_words.recent_share([], budget=common) is None


def test_common_word_query_is_bounded_on_both_engines(migrated_db):
    """1100 episodes, each saying "sleep" or "thermostat" (both common: ≥ COMMON_MIN_DOCS);
    two old ones say both, the oldest says "sleep" thrice. Over budget, the pool is those
    holding both words wherever they are, topped up with the newest (the 20 newest are another
    model's, so the index's best 2 × pool all fail the row check and the joined query decides);
    a dense candidate outside the slice keeps its exact score."""
    n = 2 * keywords.COMMON_MIN_DOCS + 100
    chats = {1: "sleep sleep sleep", 2: "sleep thermostat log", 3: "sleep thermostat log"}
    rows = [
        (
            i,
            chats.get(i, "sleep log entry" if i % 2 else "thermostat log entry"),
            "notes",
            None,
            "other" if i > n - 20 else "m",
            NOW - timedelta(minutes=n - i),
        )
        for i in range(1, n + 1)
    ]
    _add(migrated_db, rows)
    stage = {"model_id": "m", "pool": 5, "min_created": None, "candidates": [1]}
    with migrated_db.read() as session:
        bounded = hybrid.keyword_stage(
            engine_scope(session, OWNER), "sleep thermostat?", budget=100, **stage
        ).relevance
        whole = hybrid.keyword_stage(
            engine_scope(session, OWNER), "sleep thermostat?", budget=10 * n, **stage
        ).relevance
    newest = [n - 20, n - 21, n - 22]  # of model m
    assert set(bounded) == {1, 2, 3, *newest}
    assert bounded[3] == pytest.approx(1.0) and bounded[2] == pytest.approx(1.0)
    assert all(0 < bounded[i] < bounded[1] < 1 for i in newest)
    assert set(whole) == {1, 2, 3, *newest[:2]}  # the exact best 5
    assert whole == pytest.approx({i: bounded[i] for i in whole})  # the same scores


def _index(db):
    """The engine's search backend over a loaded index of model "m"."""
    index = VectorIndex(EpisodeSummary, "m", EpisodeSummary.summary != "", background=False)
    with db.read() as session:
        index.refresh(session)
    return search_backend(db.engine.dialect.name, FixedIndex(index, person=OWNER))


def test_keyword_only_candidate_is_scored_from_the_json_record_on_both_engines(migrated_db):
    """A row written without the float32 copy: its cosine comes from the JSON embedding."""
    query = np.array([0.0, 1.0])
    _add(
        migrated_db,
        [
            (1, "we paddled the kayak upriver", "a trip", [0.96, 0.28], "m", NOW),
            (2, "tax forms", "taxes", [0.6, 0.8], "m", NOW),
        ],
    )
    index = _index(migrated_db)
    with migrated_db.read() as session:
        hits = hybrid.hybrid_search(
            Scope(OWNER, session, index), "the kayak?", query, NOW, Params()
        )
    assert {h.episode_id: round(h.cosine, 6) for h in hits} == {1: 0.28, 2: 0.8}
    kayak = next(h for h in hits if h.episode_id == 1)
    assert kayak.keyword == pytest.approx(1.0) and kayak.relevance >= 0.45


def test_threshold_bound_dense_pool_changes_no_recall_on_both_engines(migrated_db):
    """With fewer episodes than the pool, the dense pool drawn above the threshold gives what
    ranking everything and then applying the threshold gives."""
    rng = np.random.default_rng(7)
    words = "kayak lake tax garden piano dog vet recital sleep budget".split()
    pick = random.Random(7)
    vectors = rng.standard_normal((40, 8))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    _add(
        migrated_db,
        [
            (
                i + 1,
                " ".join(pick.sample(words, 3)),
                pick.choice(words),
                vectors[i],
                "m",
                NOW - timedelta(days=pick.uniform(0, 60)),
            )
            for i in range(40)
        ],
    )
    index = _index(migrated_db)
    params = Params(similarity_threshold=0.2, top_k=10)
    with migrated_db.read() as session:
        for k, query in enumerate(["kayak lake", "piano recital", "dog", "budget tax garden"]):
            vector = vectors[k] * 0.6 + rng.standard_normal(8) * 0.3
            vector /= np.linalg.norm(vector)
            got = hybrid.hybrid_search(Scope(OWNER, session, index), query, vector, NOW, params)
            ranked = hybrid.hybrid_search(
                Scope(OWNER, session, index),
                query,
                vector,
                NOW,
                replace(params, similarity_threshold=None, top_k=50),
            )
            passing = [h for h in ranked if h.relevance >= params.similarity_threshold]
            # (a row's cosine is float32 arithmetic either way, from the index or from its row)
            expected = passing[: params.top_k]
            assert [h.episode_id for h in got] == [h.episode_id for h in expected]
            assert [h.score for h in got] == pytest.approx([h.score for h in expected])
            assert got  # the case is not vacuous


def test_the_dense_pools_bound_follows_its_ranking():
    """Under the prior the pool is the cosine: no re-rank, nothing to over-fetch for. Under the
    ADR's formula the bound is that formula's own recall weight at the largest count. (The
    configured recall weight bounded the prior's pool too, so no pgvector search could stop
    before the threshold: 72.29 ms p50 at 1M episodes against 7.83 ms; bench_pgvector at dda303d.)"""
    prior = replace(Params(), ranking="prior", recall_weight_scale=0.5)
    assert hybrid.pool_rank(prior, NOW, 100.0) == (None, (1.0, 1.0))
    adr = replace(Params(), ranking="adr", recall_weight_scale=0.5)
    rank, bound = hybrid.pool_rank(adr, NOW, 100.0)
    assert bound == (0.0, recall_weight(100.0, 0.5))
    now_s = epoch_seconds(NOW)
    week = now_s - 7 * 86400  # a week old: freshness 0.5 ** (7 / 30) at a 30-day half-life
    keys = rank(np.array([0.5, 0.5]), np.array([now_s, week]), np.array([100.0, 0.0]))
    assert keys[0] == pytest.approx(0.5 * recall_weight(100.0, 0.5))
    assert keys[1] == pytest.approx(0.5 * 0.5 ** (7 / 30))
