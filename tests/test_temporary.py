"""A chat sent as temporary on /v1/chat is answered with memory but never learned from (issue
#13): no summary, no facts, no windows, no semantic chunks. On the OpenAI endpoint the header
`X-Caesar-Temporary: 1` marks a background request (issue #26, tests/test_clients.py):
answered without memory, and not even stored as a turn."""

from __future__ import annotations

import json

import pytest
from conftest import OWNER
from fastapi.testclient import TestClient
from memory_helpers import events
from sqlalchemy import func, select

from caesar import audit
from caesar.api import create_app
from caesar.db.models import EpisodeSummary, Fact, SemanticChunk
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up


@pytest.fixture
def learning(make_services):
    return make_services(
        gateway={
            "routes": {
                "memory_extract": "offline:patterns",
                "memory_summarise": "offline:textrank",
            }
        },
        memory={
            "episodes_summarise": {"enabled": True},
            "facts_extract": {"enabled": True},
        },
        semantic={"index_enabled": True},
    )


def _learn(services) -> None:
    for name in ("memory.extract", "memory.summarise", "memory.passages", "semantic.index"):
        run_until_caught_up(services.workers[name])


def _count(services, model) -> int:
    with services.db.read() as session:
        return int(session.scalar(select(func.count()).select_from(model)))


def test_a_temporary_chat_is_answered_with_memory_and_never_learned_from(learning, llm):
    services = learning
    services.facts.set_by_operator("city", "Lisbon", scope=Scope(OWNER))
    said = "My dog's name is Biscuit and I keep waking up at 3am because of him."
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        llm.replies.append("Noted.")
        response = client.post("/v1/chat", json={"message": said, "temporary": True})
        assert response.status_code == 200, response.text
        # answered with memory: the operator's facts were in its prompt
        assert "city: Lisbon" in llm.requests[-1]["json"]["messages"][0]["content"]
        llm.replies.append("Noted too.")
        client.post(
            "/v1/chat/completions",
            json={"model": "caesar", "messages": [{"role": "user", "content": said}]},
            headers={"X-Caesar-Temporary": "1"},
        )
        # a background request: no memory in its prompt
        assert "Lisbon" not in json.dumps(llm.requests[-1]["json"]["messages"])
    rows = events(services, audit.CHAT_COMPLETED)
    assert [r.payload.get("temporary") for r in rows] == [True]
    [background] = events(services, audit.CHAT_BACKGROUND)
    assert background.payload["task"] == "temporary" and said not in json.dumps(background.payload)
    _learn(services)
    with services.db.read() as session:
        facts = {f.key for f in session.scalars(select(Fact))}
        summaries = [e.summary for e in session.scalars(select(EpisodeSummary))]
    assert facts == {"city"}  # nothing extracted from either chat
    assert summaries == []  # never summarised, never recalled: no episode at all
    skipped = events(services, audit.EPISODE_SUMMARISE_SKIPPED)
    assert [s.payload["reason"] for s in skipped] == ["temporary"]
    assert _count(services, SemanticChunk) == 0
    assert (
        services.episodes.preview("dog Biscuit", similarity_threshold=None, scope=Scope(OWNER))
        == []
    )


def test_the_same_chat_not_temporary_is_learned_from(learning, llm):
    services = learning
    said = "My dog's name is Biscuit and I keep waking up at 3am because of him."
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        llm.replies.append("Noted.")
        client.post("/v1/chat", json={"message": said})
    _learn(services)
    with services.db.read() as session:
        facts = {f.key for f in session.scalars(select(Fact))}
    assert facts  # the offline patterns found the dog
    assert _count(services, SemanticChunk) > 0
    assert (
        services.episodes.preview("dog Biscuit", similarity_threshold=None, scope=Scope(OWNER))
        != []
    )
