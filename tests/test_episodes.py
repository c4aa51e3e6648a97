"""ADR-0034 §3–4: the decay formulas with numbers worked from the ADR, and recall's filters and
ranking on real embeddings."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np
import pytest
from conftest import OWNER
from memory_helpers import add_episode, cosine, days_ago, events
from sqlalchemy import select

from caesar import audit
from caesar.clock import utcnow
from caesar.db.models import EpisodeSummary
from caesar.memory.importance import (
    episode_score,
    fact_importance,
    freshness,
    freshness_v,
    recall_weight,
    recall_weight_v,
)
from caesar.memory.recall.hits import RecallParams
from caesar.memory.recall.pipeline import rank_episodes
from caesar.memory.scope import Scope

# -- pure formulas -----------------------------------------------------------------------------


def test_freshness_is_a_true_half_life():
    # DESIGN.md: 0.5 ** (age / halflife) — the ADR's exp(-t/h) would give 0.368 at 30 days.
    assert freshness(0, 30) == 1.0
    assert freshness(30, 30) == pytest.approx(0.5)
    assert freshness(60, 30) == pytest.approx(0.25)
    assert freshness(3, 30) == pytest.approx(0.933033, abs=1e-6)  # Monday → Thursday
    assert freshness(30, 30) != pytest.approx(math.exp(-1))
    assert freshness(-2, 30) == 1.0  # a clock a little ahead never boosts above 1


def test_recall_weight_compounds_slowly():
    assert recall_weight(0, 0.25) == 1.0
    assert (
        recall_weight(1, 0.25)
        == pytest.approx(1 + 0.25 * math.log(2))
        == pytest.approx(1.173287, abs=1e-6)
    )
    assert recall_weight(10, 0.25) == pytest.approx(1.599474, abs=1e-6)
    assert recall_weight(10, 0.0) == 1.0


def test_episode_score_is_the_product():
    # cosine 0.62, three days old, recalled twice before: 0.62 × 0.933033 × 1.274653
    score = episode_score(
        cosine=0.62, age_days=3, recall_count=2, halflife_days=30, recall_weight_scale=0.25
    )
    assert score == pytest.approx(0.737362, abs=1e-6)


def test_fact_importance_uses_its_own_half_life_and_edit_weight():
    # 60-day half-life: a 60-day-old fact at confidence 0.8, edited twice: 0.5 × 0.8 × (1 + 0.5·2)
    value = fact_importance(
        age_days=60, confidence=0.8, edit_count=2, halflife_days=60, edit_weight_scale=0.5
    )
    assert value == pytest.approx(0.8)


def test_vectorised_twins_match_the_scalar_formulas():
    ages = np.array([0.0, 3.0, 30.0, 89.5])
    counts = np.array([0.0, 1.0, 2.0, 50.0])
    assert freshness_v(ages, 30.0) == pytest.approx([freshness(a, 30.0) for a in ages])
    assert recall_weight_v(counts, 0.25) == pytest.approx([recall_weight(c, 0.25) for c in counts])


def test_rank_episodes_orders_by_combined_score_and_cuts_top_k():
    now = datetime(2026, 5, 21, 12, 0)
    params = RecallParams(
        top_k=2,
        similarity_threshold=0.45,
        max_age_days=90,
        halflife_days=30,
        recall_weight_scale=0.25,
    )
    rows = [
        (1, 101, "old strong", now - timedelta(days=80), 0),
        (2, 102, "fresh moderate", now - timedelta(days=1), 0),
        (3, 103, "fresh weaker but often recalled", now - timedelta(days=1), 10),
    ]
    ranked = rank_episodes(rows, {1: 0.90, 2: 0.60, 3: 0.50}, now, params)
    # 0.50·0.9772·1.5995 = 0.781 > 0.60·0.9772 = 0.586 > 0.90·0.1575 = 0.142
    assert [e.episode_id for e in ranked] == [3, 2]
    assert ranked[0].score == pytest.approx(0.5 * freshness(1, 30) * recall_weight(10, 0.25))
    assert ranked[1].freshness == pytest.approx(0.977160, abs=1e-6)


# -- recall on real embeddings ----------------------------------------------------------------
SLEEP = "We discussed the operator's trouble sleeping; caesar suggested lowering the bedroom thermostat to 65°F and tracking sleep over a week."
QUERY = "I tried the thermostat thing you suggested"


def _params(services, **overrides):
    return RecallParams.from_settings(services.settings.memory.episodes_recall, **overrides)


def _search(services, query, **overrides):
    return services.episodes.search(
        services.episodes.embed_query(query),
        utcnow(),
        _params(services, **overrides),
        scope=Scope(OWNER),
    )


def test_old_strong_match_loses_to_fresh_moderate_one(services):
    strong = "The operator tried the thermostat thing caesar suggested."
    moderate = SLEEP
    assert cosine(services, QUERY, strong) > cosine(services, QUERY, moderate) >= 0.45
    old_id, _ = add_episode(services, strong, days_ago(80))
    fresh_id, _ = add_episode(services, moderate, days_ago(1))
    found = _search(services, QUERY)
    assert [e.episode_id for e in found] == [fresh_id, old_id]
    assert found[1].cosine > found[0].cosine and found[0].score > found[1].score
    # without decay (a huge half-life) the raw match wins again: decay is what reorders them
    assert [e.episode_id for e in _search(services, QUERY, halflife_days=1e9)] == [old_id, fresh_id]


def test_threshold_is_on_raw_cosine_and_null_disables_it(services):
    add_episode(services, SLEEP, days_ago(0.1))
    off_topic_id, _ = add_episode(
        services, "The operator's spouse Alice mentioned a holiday in Portugal.", days_ago(0.1)
    )
    assert (
        cosine(services, QUERY, "The operator's spouse Alice mentioned a holiday in Portugal.")
        < 0.45
    )
    assert off_topic_id not in [e.episode_id for e in _search(services, QUERY)]
    assert off_topic_id in [
        e.episode_id for e in _search(services, QUERY, similarity_threshold=None)
    ]


def test_max_age_filters_before_ranking(services):
    old_id, _ = add_episode(services, SLEEP, days_ago(100))
    assert _search(services, QUERY, max_age_days=90) == []
    # no age window by default (issue 22): age is a prior only
    assert services.settings.memory.episodes_recall.max_age_days is None
    assert [e.episode_id for e in _search(services, QUERY)] == [old_id]
    assert [e.episode_id for e in _search(services, QUERY, max_age_days=None)] == [old_id]
    assert _search(services, QUERY, max_age_days=None)[0].freshness == pytest.approx(
        0.5 ** (100 / 30), rel=1e-3
    )


def test_top_k_and_recall_count_break_ties(services):
    ids = [add_episode(services, SLEEP, days_ago(2), recall_count=n)[0] for n in (0, 4, 1, 0, 9)]
    found = _search(services, QUERY, top_k=3)
    assert len(found) == 3
    assert [e.episode_id for e in found] == [ids[4], ids[1], ids[2]]
    assert len(_search(services, QUERY, top_k=5)) == 5


def test_empty_summaries_and_other_models_are_never_recalled(services):
    add_episode(services, SLEEP, days_ago(1))
    with services.db.write() as session:
        for row in session.scalars(select(EpisodeSummary)):
            row.model = "some-other-embedder"
    assert _search(services, QUERY, similarity_threshold=None) == []


# -- preview API ------------------------------------------------------------------------------
def test_preview_returns_components_and_does_not_bump(client, services):
    episode_id, audit_id = add_episode(services, SLEEP, days_ago(3))
    for _ in range(2):
        response = client.post("/v1/memory/recall", json={"query": QUERY})
        assert response.status_code == 200, response.text
    [found] = response.json()["episodes"]
    assert found["audit_log_id"] == audit_id and found["recall_count"] == 0
    for key in (
        "cosine",
        "passage",  # None here: the episode was written without windows
        "keyword",
        "relevance",
        "age_days",
        "freshness",
        "recall_weight",
        "score",
        "created_at",
        "summary",
    ):
        assert key in found
    assert found["passage"] is None  # written without windows: the summary alone counts
    assert found["relevance"] >= found["cosine"]
    # the default ranking (decay as a prior): the relevance, and age orders comparable
    # matches; freshness and recall_weight are still reported (the ADR's factors)
    assert found["score"] == pytest.approx(found["relevance"], abs=1e-5)
    assert found["freshness"] == pytest.approx(0.5 ** (3 / 30), rel=1e-2)
    # the excerpts that would reach the prompt: none here, the chat has no windows stored
    assert found["excerpts"] == []
    assert events(services, audit.EPISODE_RECALLED) == []
    with services.db.read() as session:
        assert session.get(EpisodeSummary, episode_id).recall_count == 0


def test_preview_null_disables_filters_and_now_moves_the_clock(make_services):
    from fastapi.testclient import TestClient

    from caesar.api import create_app

    # an install that kept the ADR's 90-day window: an omitted field means the configured one
    services = make_services(memory={"episodes_recall": {"max_age_days": 90}})
    add_episode(services, SLEEP, days_ago(100))
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        assert client.post("/v1/memory/recall", json={"query": QUERY}).json()["episodes"] == []
        body = {"query": "capital of France", "max_age_days": None, "similarity_threshold": None}
        assert len(client.post("/v1/memory/recall", json=body).json()["episodes"]) == 1
        back_then = (utcnow() - timedelta(days=99)).isoformat()
        moved = client.post("/v1/memory/recall", json={"query": QUERY, "now": back_then})
    [episode] = moved.json()["episodes"]
    assert episode["age_days"] == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize(
    "body",
    [{}, {"query": ""}, {"query": "x", "top_k": 0}, {"query": "x", "surprise": 1}, {"query": 5}],
)
def test_preview_rejects_bad_input(client, body):
    response = client.post("/v1/memory/recall", json=body)
    assert response.status_code == 422
    assert response.json()["error"]["type"] == "invalid_request"
