"""A conversation is the unit of episodic memory (issue #13): however a client sends its turns,
one conversation is one episode, summarised once it has gone quiet and again if it resumes."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import openai
import pytest
import sqlalchemy as sa
from conftest import OWNER, TEST_TOKEN
from fastapi.testclient import TestClient
from live_server import live_server
from memory_helpers import events
from sqlalchemy import select, update

from caesar import audit
from caesar.api import create_app
from caesar.clock import utcnow
from caesar.db import Database, migrate
from caesar.db.models import AuditLog, Conversation, EpisodeSummary
from caesar.memory.episodes.summarise import SUMMARISE_SYSTEM
from caesar.memory.scope import Scope
from caesar.memory.transcript import parse_transcript
from caesar.workers import run_until_caught_up

TOPICS = [
    "kayak",
    "thermostat",
    "sourdough",
    "passport",
    "violin",
    "marathon",
    "tomatoes",
    "mortgage",
    "telescope",
    "origami",
]


class Replies:
    """The fake LLM: a chat turn is answered "noted <topic>"; a summary names every topic in the
    transcript it was sent, so the test can see which turns it covered."""

    def __init__(self) -> None:
        self.summaries = 0

    def __call__(self, body: dict[str, Any], protocol: str) -> str:
        messages = body["messages"]
        if messages[0]["content"].startswith(SUMMARISE_SYSTEM[:40]):
            self.summaries += 1
            said = " ".join(t["content"] for t in parse_transcript(messages[-1]["content"]))
            found = [t for t in TOPICS if t in said]
            return "The operator talked about " + ", ".join(found) + "."
        last = messages[-1]["content"]
        return "noted " + next((t for t in TOPICS if t in last), "that")


@pytest.fixture
def learning(make_services):
    return make_services(memory={"episodes_summarise": {"enabled": True, "passages": False}})


def _summarise(services: Any) -> int:
    return run_until_caught_up(services.workers["memory.summarise"])


def _episodes(services: Any) -> list[EpisodeSummary]:
    with services.db.read() as session:
        return list(session.scalars(select(EpisodeSummary).order_by(EpisodeSummary.id)))


def _conversations(services: Any) -> list[Conversation]:
    with services.db.read() as session:
        return list(session.scalars(select(Conversation).order_by(Conversation.id)))


def test_ten_turns_sent_the_openai_way_make_one_episode_covering_all_ten(learning, llm):
    replies = Replies()
    llm.reply = replies
    with live_server(learning) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=TEST_TOKEN, max_retries=0)
        messages: list[dict[str, str]] = [{"role": "system", "content": "Be brief."}]
        for topic in TOPICS:
            messages.append({"role": "user", "content": f"Let me tell you about my {topic}."})
            answer = client.chat.completions.create(model="caesar", messages=messages)  # type: ignore[arg-type]
            messages.append({"role": "assistant", "content": answer.choices[0].message.content})
    assert _summarise(learning) == 1
    [conversation] = _conversations(learning)
    [episode] = _episodes(learning)
    assert conversation.turns == 10 and episode.conversation_id == conversation.id
    assert episode.audit_log_id == conversation.tip_audit_id == conversation.summarised_audit_id
    assert all(topic in episode.summary for topic in TOPICS), episode.summary
    assert replies.summaries == 1  # one summary for the conversation, not one per turn
    chats = events(learning, audit.CHAT_COMPLETED)
    assert len(chats) == 10 and {c.subject_id for c in chats} == {conversation.id}


def test_a_conversation_is_summarised_once_quiet_and_catch_up_takes_it_now(make_services, llm):
    services = make_services(
        memory={"episodes_summarise": {"enabled": True, "passages": False, "quiet_seconds": 300}}
    )
    llm.reply = Replies()
    worker = services.workers["memory.summarise"]
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        client.post("/v1/chat", json={"message": "My kayak is red."})
    assert worker.step() == 0 and _episodes(services) == []  # still talking, maybe
    assert worker.backlog() == 1
    with services.db.write() as session:  # ten quiet minutes later
        session.execute(update(Conversation).values(touched_at=utcnow() - timedelta(minutes=10)))
    assert worker.step() == 1 and len(_episodes(services)) == 1

    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        client.post("/v1/chat", json={"message": "My violin is old."})
    assert worker.step() == 0
    assert worker.catch_up_step() == 1  # caesar worker --once: quiet or not


def test_a_resumed_conversation_replaces_its_episode_and_keeps_its_recalls(learning, llm):
    llm.reply = Replies()
    with TestClient(create_app(learning.settings, learning, run_workers=False)) as client:
        first = client.post("/v1/chat", json={"message": "Let me tell you about my kayak."})
        history = [
            {"role": "user", "content": "Let me tell you about my kayak."},
            {"role": "assistant", "content": first.json()["reply"]},
        ]
        _summarise(learning)
        [before] = _episodes(learning)
        assert [
            h.episode_id
            for h in learning.episodes.preview(
                "kayak", similarity_threshold=None, scope=Scope(OWNER)
            )
        ] == [before.id]
        with learning.db.write() as session:
            session.execute(update(EpisodeSummary).values(recall_count=3))
        second = client.post(
            "/v1/chat", json={"message": "And about my telescope.", "history": history}
        )
    assert second.json()["conversation_id"] == first.json()["conversation_id"]
    assert _summarise(learning) == 1
    [after] = _episodes(learning)
    assert after.id != before.id and after.recall_count == 3
    assert "kayak" in after.summary and "telescope" in after.summary
    hits = learning.episodes.preview(
        "kayak telescope", similarity_threshold=None, scope=Scope(OWNER)
    )
    assert [h.episode_id for h in hits] == [after.id]  # the old row left the in-process index
    [summarised, replaced] = events(learning, audit.EPISODE_SUMMARISED)[::-1]
    assert summarised.payload["replaces_episode_id"] == before.id
    assert "replaces_episode_id" not in replaced.payload


def test_a_named_conversation_needs_no_history(services, llm):
    llm.reply = Replies()
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        one = client.post(
            "/v1/chat", json={"message": "My kayak is red.", "conversation_id": "kitchen-42"}
        )
        two = client.post(
            "/v1/chat", json={"message": "What colour is it?", "conversation_id": "kitchen-42"}
        )
        bad = client.post("/v1/chat", json={"message": "x", "conversation_id": "has space"})
    assert one.json()["conversation_id"] == two.json()["conversation_id"] == "kitchen-42"
    sent = llm.requests[-1]["json"]["messages"]
    assert [m["content"] for m in sent[1:]] == [
        "My kayak is red.",
        "noted kayak",
        "What colour is it?",
    ]
    [conversation] = _conversations(services)
    assert conversation.key == "kitchen-42" and conversation.turns == 2
    assert bad.status_code == 422


def test_the_openai_endpoint_takes_the_conversation_from_a_header_or_the_body(services, llm):
    llm.reply = Replies()
    ask = {"model": "caesar", "messages": [{"role": "user", "content": "About my violin."}]}
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        by_header = client.post(
            "/v1/chat/completions", json=ask, headers={"X-Caesar-Conversation": "desk"}
        )
        by_body = client.post("/v1/chat/completions", json={**ask, "conversation_id": "desk"})
        unnamed = client.post("/v1/chat/completions", json=ask)
    assert by_header.headers["x-caesar-conversation"] == "desk"
    assert by_body.headers["x-caesar-conversation"] == "desk"
    assert re.fullmatch(r"[0-9a-f]{32}", unnamed.headers["x-caesar-conversation"])
    keys = [c.key for c in _conversations(services)]
    assert keys[0] == "desk" and len(keys) == 2
    desk = _conversations(services)[0]
    assert desk.turns == 2


def test_a_streamed_reply_names_its_conversation_too(services, llm):
    # The headers go before the turn is written; a client streaming without naming the
    # conversation is still told which one it is — and the next, resent turn is in it.
    llm.reply = Replies()
    first = [{"role": "user", "content": "About my violin."}]
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        opened = client.post(
            "/v1/chat/completions", json={"model": "caesar", "messages": first, "stream": True}
        )
        assert opened.status_code == 200 and "[DONE]" in opened.text
        key = opened.headers["x-caesar-conversation"]
        assert re.fullmatch(r"[0-9a-f]{32}", key)
        resent = [*first, {"role": "assistant", "content": "noted violin"}]
        resent.append({"role": "user", "content": "And its bow?"})
        again = client.post(
            "/v1/chat/completions", json={"model": "caesar", "messages": resent, "stream": True}
        )
        assert again.headers["x-caesar-conversation"] == key
    [conversation] = _conversations(services)
    assert conversation.key == key and conversation.turns == 2


def test_a_regenerated_turn_forks_and_a_failed_turn_is_no_tip(services, llm):
    llm.reply = Replies()
    opening = [
        {"role": "user", "content": "About my kayak."},
        {"role": "assistant", "content": "noted kayak"},
    ]
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        client.post("/v1/chat", json={"message": "About my kayak."})
        client.post("/v1/chat", json={"message": "And my violin.", "history": opening})
        # the same history again, another question: a regenerated or edited turn
        fork = client.post("/v1/chat", json={"message": "And my origami.", "history": opening})
        llm.fail_next("status", status=500)
        failed = client.post("/v1/chat", json={"message": "And my sourdough.", "history": opening})
    assert failed.status_code >= 500
    first, forked = _conversations(services)[:2]
    assert first.turns == 2 and forked.turns == 1
    assert fork.json()["conversation_id"] == forked.key
    with services.db.read() as session:
        failed_row = session.scalars(
            select(AuditLog).where(AuditLog.event_type == audit.CHAT_FAILED)
        ).one()
    # a failed turn joins a conversation (so forgetting it takes the row) but moves no tip
    assert failed_row.subject_id is not None and failed_row.subject_key is None
    assert {c.tip_audit_id for c in _conversations(services)}.isdisjoint({failed_row.id})


def test_the_migration_groups_existing_turns_into_conversations(db_url, shared_embedder):
    """A database of the previous revision with a client's resent conversation (three turns,
    one episode each, as the old summariser wrote them), an unrelated chat and an import."""
    db = Database(db_url)
    try:
        migrate.upgrade(db, "0005")
        now = utcnow()

        def chat(messages: list[str], reply: str, key: str | None = None) -> int:
            roles = (["user", "assistant"] * len(messages))[: len(messages)]
            payload = {
                "messages": [
                    {"role": r, "content": m} for r, m in zip(roles, messages, strict=True)
                ],
                "reply": reply,
            }
            with db.engine.begin() as c:
                return int(
                    c.execute(
                        sa.text(
                            "INSERT INTO audit_log (event_type, created_at, payload, subject_key)"
                            " VALUES ('chat.completed', :at, :payload, :key) RETURNING id"
                        ).bindparams(sa.bindparam("payload", type_=sa.JSON)),
                        {"at": now, "payload": payload, "key": key},
                    ).scalar_one()
                )

        def episode(audit_id: int, recalls: int) -> None:
            with db.engine.begin() as c:
                c.execute(
                    sa.text(
                        "INSERT INTO episode_summaries (audit_log_id, summary, embedding, model,"
                        " created_at, recall_count) VALUES (:a, :s, '[]', 'm', :at, :n)"
                    ),
                    {"a": audit_id, "s": f"summary of {audit_id}", "at": now, "n": recalls},
                )

        t1 = chat(["kayak?"], "red")
        t2 = chat(["kayak?", "red", "violin?"], "old")
        other = chat(["passport?"], "expired")
        t3 = chat(["kayak?", "red", "violin?", "old", "origami?"], "cranes")
        imported = chat(["tomatoes?"], "ripe", key="import:sha256:abc")
        for audit_id, recalls in ((t1, 2), (t2, 1), (other, 0), (t3, 0), (imported, 0)):
            episode(audit_id, recalls)

        migrate.upgrade(db)
        with db.read() as session:
            conversations = {c.tip_audit_id: c for c in session.scalars(select(Conversation))}
            episodes = {e.audit_log_id: e for e in session.scalars(select(EpisodeSummary))}
            subjects = dict(session.execute(select(AuditLog.id, AuditLog.subject_id)).all())
            keys = dict(session.execute(select(AuditLog.id, AuditLog.subject_key)).all())
        assert set(conversations) == {t3, other, imported}
        assert conversations[t3].turns == 3 and conversations[t3].summarised_audit_id == t3
        assert subjects[t1] == subjects[t2] == subjects[t3] == conversations[t3].id
        assert set(episodes) == {t3, other, imported}  # the per-turn ones merged into the newest
        assert episodes[t3].recall_count == 3
        assert episodes[t3].conversation_id == conversations[t3].id
        assert keys[imported] == "import:sha256:abc"  # the importer's dedupe key stays
        assert not migrate.unmanaged_tables() & {"conversations"}
    finally:
        db.dispose()


def test_episodes_over_the_api_page_both_ways_and_search(learning, llm):
    llm.reply = Replies()
    with TestClient(create_app(learning.settings, learning, run_workers=False)) as client:
        for topic in ("kayak", "violin", "origami"):
            client.post("/v1/chat", json={"message": f"About my {topic}."})
        _summarise(learning)
        first = client.get("/v1/episodes", params={"limit": 2}).json()
        second = client.get("/v1/episodes", params={"limit": 2, "before": first["older"]}).json()
        back = client.get("/v1/episodes", params={"limit": 2, "after": second["newer"]}).json()
        found = client.get("/v1/episodes", params={"search": "VIOLIN"}).json()
        bad = client.get("/v1/episodes", params={"before": "yesterday"})
    assert [e["summary"].split()[-1] for e in first["episodes"]] == ["origami.", "violin."]
    assert first["newer"] is None and second["older"] is None
    assert [e["summary"].split()[-1] for e in second["episodes"]] == ["kayak."]
    assert back["episodes"] == first["episodes"]
    assert [e["summary"] for e in found["episodes"]] == ["The operator talked about violin."]
    assert found["episodes"][0]["conversation_id"] is not None
    assert bad.status_code == 400
