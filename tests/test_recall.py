"""The ADR-0034 story end to end on real parts: Monday's sleep conversation is imported with the
CLI, summarised by `caesar worker --once memory.summarise` through the fake LLM server, and on
Thursday "I tried the thermostat thing you suggested" brings it back into the system prompt."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from conftest import OWNER
from fastapi.testclient import TestClient
from memory_helpers import BrokenEmbedder, add_episode, days_ago, events, write_config
from typer.testing import CliRunner

from caesar import audit
from caesar.api import create_app
from caesar.brain import Brain
from caesar.cli.main import app as cli_app
from caesar.clock import utcnow
from caesar.memory.scope import Scope

ADR_SUMMARY = (
    "We discussed the operator's trouble sleeping; CAESAR suggested lowering the bedroom "
    "thermostat to 65°F and tracking sleep over a week."
)
MONDAY_CHAT = [
    {"role": "user", "content": "I've been struggling with sleep — keep waking up at 3am."},
    {"role": "assistant", "content": "That's rough. How warm is your bedroom at night?"},
    {"role": "user", "content": "Around 72°F I think."},
    {
        "role": "assistant",
        "content": "Try lowering the thermostat to 65°F and track your sleep for a week.",
    },
]


def _system_prompt(llm) -> str:
    return llm.requests[-1]["json"]["messages"][0]["content"]


def test_monday_thursday_story(make_settings, make_services, llm, tmp_path, monkeypatch):
    settings = make_settings(memory={"episodes_summarise": {"enabled": True}})
    services = make_services(settings=settings)
    monkeypatch.setenv("CAESAR_CONFIG", str(write_config(tmp_path / "caesar.toml", settings)))
    runner = CliRunner()

    # Monday: the conversation happened three days ago
    monday = utcnow() - timedelta(days=3)
    jsonl = tmp_path / "monday.jsonl"
    jsonl.write_text(
        json.dumps({"created_at": monday.isoformat() + "Z", "messages": MONDAY_CHAT}) + "\n"
    )
    result = runner.invoke(cli_app, ["import", str(jsonl), "--no-learn"])
    assert result.exit_code == 0, result.output
    assert "imported 1 conversations" in result.output
    [monday_row] = events(services, audit.CHAT_COMPLETED)

    llm.replies.append(ADR_SUMMARY)
    result = runner.invoke(cli_app, ["worker", "--once", "memory.summarise"])
    assert result.exit_code == 0, result.output
    assert "memory.summarise: 1 handled" in result.output
    result = runner.invoke(cli_app, ["worker", "--once", "memory.passages"])
    assert result.exit_code == 0, result.output
    assert "memory.passages: 1 handled" in result.output
    assert "keep waking up at 3am" in llm.requests[-1]["json"]["messages"][1]["content"]

    # Thursday
    with TestClient(create_app(settings, services, run_workers=False)) as client:
        llm.replies.append("Glad to hear it — did you sleep through?")
        response = client.post(
            "/v1/chat", json={"message": "I tried the thermostat thing you suggested"}
        )
        assert response.status_code == 200, response.text
        assert response.json()["recalled"] == [monday_row.id]
        system = _system_prompt(llm)
        assert "Possibly relevant past conversations:" in system
        assert f", 3 days ago: {ADR_SUMMARY}" in system
        # and what was said, verbatim, with who said it: Monday's suggestion itself
        assert "  caesar: Try lowering the thermostat to 65°F" in system

        recalled = client.get("/v1/audit", params={"event_type": "memory.episode.recalled"}).json()[
            "events"
        ]
        [payload] = [e["payload"] for e in recalled]
        assert payload["audit_log_id"] == monday_row.id
        assert payload["turn_audit_id"] == response.json()["audit_id"]
        assert payload["cosine"] >= 0.45
        assert payload["freshness"] == pytest.approx(0.5 ** (3 / 30), abs=1e-3)
        assert payload["recall_weight"] == 1.0  # first time surfaced
        # hybrid relevance: the better of the summary and the chat's best 3-turn window
        # ("Around 72°F I think." / "Try lowering the thermostat…"), lifted by the keyword
        # match ("thermostat")
        assert payload["passage"] > payload["cosine"]
        dense = max(payload["cosine"], payload["passage"])
        assert payload["keyword"] > 0
        assert payload["relevance"] == pytest.approx(
            dense + 0.7 * payload["keyword"] * (1 - dense), abs=1e-5
        )
        # decay as a prior: the score is the relevance (× recall_weight, 1 here); age only
        # orders comparable matches
        assert payload["score"] == pytest.approx(payload["relevance"], abs=1e-5)
        shown = [t for e in payload["excerpts"] for t in e["turns"]]
        assert {"role": "assistant", "text": MONDAY_CHAT[3]["content"]} in shown
        # the dashboard's view of the turn shows the same episode and excerpt
        page = client.get(f"/dashboard/audit/{response.json()['audit_id']}")
        assert page.status_code == 200
        assert "Past conversations in this turn's prompt" in page.text
        assert "Try lowering the thermostat to 65°F" in page.text

        preview = client.post(
            "/v1/memory/recall", json={"query": "thermostat", "similarity_threshold": None}
        ).json()["episodes"]
        assert [(e["audit_log_id"], e["recall_count"]) for e in preview] == [(monday_row.id, 1)]
        # the preview shows the excerpt the prompt would carry: the thermostat exchange
        preview_turns = [t["text"] for x in preview[0]["excerpts"] for t in x["turns"]]
        assert MONDAY_CHAT[3]["content"] in preview_turns
        # and so does `caesar recall`
        result = runner.invoke(cli_app, ["recall", "thermostat", "--no-threshold"])
        assert result.exit_code == 0, result.output
        assert f"chat #{monday_row.id}, from turn" in result.output
        assert "Try lowering the thermostat" in result.output

        # unrelated: nothing recalled, no block, nothing audited
        llm.replies.append("Paris.")
        response = client.post("/v1/chat", json={"message": "what's the capital of France?"})
        assert response.json()["recalled"] == []
        assert "Possibly relevant past conversations" not in _system_prompt(llm)
        assert (
            len(
                client.get("/v1/audit", params={"event_type": "memory.episode.recalled"}).json()[
                    "events"
                ]
            )
            == 1
        )


def test_second_recall_bumps_weight(client, services, llm):
    add_episode(services, ADR_SUMMARY, days_ago(3))
    for _ in range(2):
        client.post("/v1/chat", json={"message": "I tried the thermostat thing you suggested"})
    payloads = [e.payload for e in events(services, audit.EPISODE_RECALLED)]
    assert [p["recall_count"] for p in payloads] == [0, 1]  # the count each ranking saw
    assert payloads[1]["recall_weight"] == pytest.approx(1 + 0.25 * 0.693147, abs=1e-5)
    [found] = services.episodes.preview("thermostat", similarity_threshold=None, scope=Scope(OWNER))
    assert found.recall_count == 2


def test_a_failed_turn_changes_no_recall_counter(client, services, llm):
    """Six failed turns (a client retrying a 503) used to raise an episode's count to 5."""
    episode_id, _ = add_episode(services, ADR_SUMMARY, days_ago(3))
    llm.fail_next("status", count=6 * 3, status=503)  # at most 1 try + 2 retries a turn
    for _ in range(6):
        response = client.post(
            "/v1/chat", json={"message": "I tried the thermostat thing you suggested"}
        )
        assert response.status_code >= 500
    failed = events(services, audit.CHAT_FAILED)
    assert len(failed) == 6
    # each failed row still names what was in its prompt …
    assert all(f.payload["memory"]["episodes_recalled"] for f in failed)
    # … but nothing was counted as recalled
    assert events(services, audit.EPISODE_RECALLED) == []
    [found] = services.episodes.preview("thermostat", similarity_threshold=None, scope=Scope(OWNER))
    assert found.episode_id == episode_id and found.recall_count == 0
    llm.reset()  # faults the gateway did not retry
    answered = client.post(
        "/v1/chat", json={"message": "I tried the thermostat thing you suggested"}
    )
    assert answered.status_code == 200, answered.text
    [found] = services.episodes.preview("thermostat", similarity_threshold=None, scope=Scope(OWNER))
    assert found.recall_count == 1  # an answered turn does count


def test_recall_failure_is_audited_and_chat_goes_on(client, services, llm):
    add_episode(services, ADR_SUMMARY, days_ago(3))
    services.embedder.set(BrokenEmbedder())
    llm.replies.append("Sure.")
    response = client.post(
        "/v1/chat", json={"message": "I tried the thermostat thing you suggested"}
    )
    assert response.status_code == 200 and response.json()["reply"] == "Sure."
    assert "Possibly relevant past conversations" not in _system_prompt(llm)
    [failed] = events(services, audit.RECALL_FAILED)
    assert "onnxruntime session is gone" in failed.payload["error"]
    assert failed.payload["turn_audit_id"] == response.json()["audit_id"]


def test_recall_disabled_setting(make_services, llm):
    services = make_services(memory={"episodes_recall": {"enabled": False}})
    add_episode(services, ADR_SUMMARY, days_ago(3))
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        response = client.post(
            "/v1/chat", json={"message": "I tried the thermostat thing you suggested"}
        )
    assert response.json()["recalled"] == []
    assert "Possibly relevant" not in _system_prompt(llm)


def test_a_message_about_what_the_history_never_mentions_recalls_nothing(services):
    # The history talks of a vintage car, bread and a trip. "vintage coins" shares one word
    # with it, and the rest of what the message is about ("coins", "collection") is in no
    # past conversation: nothing reaches the prompt. Before, words found nowhere were left out
    # of the keyword coverage, so the one shared word counted as the whole message.
    when = utcnow() - timedelta(days=2)
    car, _ = add_episode(
        services,
        "We talked about restoring the operator's vintage Mustang and where to find parts.",
        when,
    )
    add_episode(services, "The operator asked for a banana bread recipe.", when)
    add_episode(services, "We planned the operator's trip to Lisbon in May.", when)

    off_topic = Brain(services).prepare(
        "How many vintage coins do I have in my collection?", scope=Scope(OWNER)
    )
    assert off_topic.recalled == []
    assert "Possibly relevant past conversations" not in off_topic.messages[0]["content"]
    # ...while a message about the car brings it back
    on_topic = Brain(services).prepare(
        "Where did you say to find parts for my Mustang?", scope=Scope(OWNER)
    )
    assert [e.episode_id for e in on_topic.recalled] == [car]
    # a person the history has never heard of: the shared words say nothing either
    stranger = Brain(services).prepare("Where did Ottoline say to find parts?", scope=Scope(OWNER))
    assert stranger.recalled == []
    # a date the conversations' words don't hold costs the match nothing
    dated = Brain(services).prepare(
        "What did we say in March about my vintage Mustang?", scope=Scope(OWNER)
    )
    assert [e.episode_id for e in dated.recalled] == [car]
    undated = Brain(services).prepare(
        "What did we say about my vintage Mustang?", scope=Scope(OWNER)
    )
    assert dated.recalled[0].known == undated.recalled[0].known


@pytest.mark.parametrize("date_weight", [0.5, 0.0])
def test_a_message_naming_a_day_recalls_that_days_conversation(make_services, db_url, date_weight):
    # Two conversations alike in meaning and words; the message names the older one's day.
    # With the date signal (the default) that one comes first and is marked `dated`; without
    # it the newer one does (comparable matches go newest first). On both engines.
    services = make_services(
        database_url=db_url, memory={"episodes_recall": {"date_weight": date_weight}}
    )
    now = utcnow()
    older_at, newer_at = now - timedelta(days=40), now - timedelta(days=10)
    older, _ = add_episode(
        services,
        "The operator cooked a mushroom risotto and asked how to keep it creamy.",
        older_at,
    )
    newer, _ = add_episode(
        services, "The operator cooked a mushroom soup and asked how to keep it creamy.", newer_at
    )
    day = f"{older_at.day} {older_at:%B} {older_at.year}"
    recalled = Brain(services).prepare(f"What did I cook on {day}?", scope=Scope(OWNER)).recalled
    if date_weight:
        assert [e.episode_id for e in recalled][:1] == [older]
        assert recalled[0].dated and recalled[0].relevance > recalled[0].cosine
        assert not any(e.dated for e in recalled if e.episode_id == newer)
    else:
        assert recalled and recalled[0].episode_id == newer and not recalled[0].dated
    # a person the history has never heard of is not recalled by the date alone
    assert (
        Brain(services).prepare(f"What did Ottoline cook on {day}?", scope=Scope(OWNER)).recalled
        == []
    )


def test_a_named_day_brings_a_conversation_no_other_pool_holds(make_services, db_url):
    # Sixty newer conversations fill the recent pool, and the old one shares neither meaning
    # nor words with the message: only the day it was held on brings it in.
    services = make_services(database_url=db_url)
    now = utcnow()
    old_at = now - timedelta(days=80)
    old, _ = add_episode(services, "We compared two savings accounts and their fees.", old_at)
    for i in range(60):  # no digits: a day's number would match their words
        tag = chr(97 + i % 26) + chr(97 + i // 26)
        add_episode(services, f"The operator shared a holiday photo tagged {tag}.", days_ago(i / 4))
    day = f"{old_at:%B} {old_at.day}, {old_at.year}"
    recalled = (
        Brain(services).prepare(f"What did we talk about on {day}?", scope=Scope(OWNER)).recalled
    )
    assert [e.episode_id for e in recalled][:1] == [old] and recalled[0].dated
    assert recalled[0].cosine < services.settings.memory.episodes_recall.similarity_threshold
