"""Worker memory.summarise (ADR-0034 §2) against the fake LLM wire server and the real embedder."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import OWNER
from memory_helpers import BrokenEmbedder, add_chat, count, days_ago, events
from sqlalchemy import select

from caesar import audit
from caesar.config import load_settings
from caesar.db.models import Conversation, EpisodeSummary
from caesar.errors import ConfigError
from caesar.memory.engine.vectors import from_row
from caesar.memory.episodes.summarise import SummariseWorker, clean_summary, retry_failed
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up

THERMOSTAT = (
    "We discussed the operator's trouble sleeping; caesar suggested lowering the bedroom "
    "thermostat to 65°F and tracking sleep over a week."
)


@pytest.fixture
def svc(make_services):
    return make_services(memory={"episodes_summarise": {"enabled": True, "batch_size": 4}})


def _worker(services) -> SummariseWorker:
    return services.workers["memory.summarise"]  # type: ignore[return-value]


def _summaries(services) -> dict[int, EpisodeSummary]:
    with services.db.read() as session:
        return {r.audit_log_id: r for r in session.scalars(select(EpisodeSummary))}


def _conversation_of(services, chat_id: int) -> Conversation:
    with services.db.read() as session:
        return session.scalars(
            select(Conversation).where(Conversation.tip_audit_id == chat_id)
        ).one()


def test_summary_written_embedded_and_audited(svc, llm):
    monday = days_ago(3)
    chat_id = add_chat(
        svc, "I keep waking up at 3am.", "Try lowering the thermostat to 65°F.", monday
    )
    llm.replies.append(f"  {THERMOSTAT}\n")
    assert run_until_caught_up(_worker(svc)) == 1
    row = _summaries(svc)[chat_id]
    assert row.summary == THERMOSTAT
    assert row.created_at == monday  # the conversation's date: time anchors describe it
    assert row.model == "all-MiniLM-L6-v2" and row.recall_count == 0
    vector = from_row(row.embedding_f32, None)
    assert vector.shape == (384,) and np.allclose(vector, row.embedding, atol=1e-7)
    expected = svc.embedder.get().embed_batch([THERMOSTAT])[0]
    assert float(vector @ expected) == pytest.approx(1.0, abs=1e-5)
    [event] = events(svc, audit.EPISODE_SUMMARISED)
    conversation = _conversation_of(svc, chat_id)
    assert event.payload == {
        "audit_log_id": chat_id,
        "conversation_id": conversation.id,
        "summary": THERMOSTAT,
        "model": "all-MiniLM-L6-v2",
    }
    assert row.conversation_id == conversation.id
    assert conversation.summarised_audit_id == chat_id
    sent = llm.requests[-1]["json"]
    assert sent["model"] == "test-model"
    assert "third person" in sent["messages"][0]["content"]
    assert "<user>\nI keep waking up at 3am.\n</user>" in sent["messages"][1]["content"]
    assert "Try lowering the thermostat" in sent["messages"][1]["content"]
    assert run_until_caught_up(_worker(svc)) == 0  # done: not summarised again


def test_empty_answer_is_a_skip_row(svc, llm):
    chat_id = add_chat(svc, "what time is it?", "It's 3pm.")
    llm.replies.append("")
    run_until_caught_up(_worker(svc))
    row = _summaries(svc)[chat_id]
    assert row.summary == "" and row.embedding == [] and row.embedding_f32 is None
    [skip] = events(svc, audit.EPISODE_SUMMARISE_SKIPPED)
    assert skip.payload["audit_log_id"] == chat_id
    assert events(svc, audit.EPISODE_SUMMARISED) == []
    assert (
        svc.episodes.preview("what time is it?", similarity_threshold=None, scope=Scope(OWNER))
        == []
    )


def test_llm_failure_is_not_retried_in_a_loop_and_retry_failed_recovers(svc, llm):
    first = add_chat(svc, "I keep waking up at 3am.", "Try 65°F.")
    second = add_chat(svc, "My dog is called Biscuit.", "Lovely name.")
    llm.fail_next("status", status=500)
    llm.replies.append("We discussed the operator's dog Biscuit.")
    run_until_caught_up(_worker(svc))
    [failed] = events(svc, audit.EPISODE_SUMMARISE_FAILED)
    assert failed.payload["audit_log_id"] == first and failed.payload["stage"] == "llm"
    assert "500" in failed.payload["error"] or "server" in failed.payload["error"].lower()
    assert set(_summaries(svc)) == {second}  # the failure is not a row; the batch went on
    assert _conversation_of(svc, first).failed_audit_id == first
    assert run_until_caught_up(_worker(svc)) == 0  # the worker will not retry it by itself

    llm.replies.append(THERMOSTAT)
    assert retry_failed(_worker(svc)) == (1, 0)
    assert _summaries(svc)[first].summary == THERMOSTAT
    assert retry_failed(_worker(svc)) == (0, 0)  # nothing left to retry


def test_embedder_failure_is_audited_then_retried(svc, llm, shared_embedder):
    chat_id = add_chat(svc, "I keep waking up at 3am.", "Try 65°F.")
    trivial_id = add_chat(svc, "hi", "hello")
    broken = BrokenEmbedder()
    svc.embedder.set(broken)
    llm.replies.extend([THERMOSTAT, ""])
    run_until_caught_up(_worker(svc))
    assert broken.calls == 1  # one batch, one embedding call
    failed = {
        e.payload["audit_log_id"]: e.payload for e in events(svc, audit.EPISODE_SUMMARISE_FAILED)
    }
    assert set(failed) == {chat_id, trivial_id}
    assert (
        failed[chat_id]["stage"] == "embed"
        and "onnxruntime session is gone" in failed[chat_id]["error"]
    )
    assert _summaries(svc) == {}

    svc.embedder.set(shared_embedder)
    llm.replies.extend([THERMOSTAT, ""])
    assert retry_failed(_worker(svc)) == (2, 0)
    rows = _summaries(svc)
    assert rows[chat_id].summary == THERMOSTAT and rows[trivial_id].summary == ""


def test_a_summarised_conversation_is_not_summarised_again(svc, llm):
    ids = [add_chat(svc, f"question {i} about sleep", f"answer {i}") for i in range(3)]
    llm.reply = lambda body, protocol: "We discussed sleep."
    assert run_until_caught_up(_worker(svc)) == 3
    before = (
        count(svc, EpisodeSummary),
        len(events(svc, audit.EPISODE_SUMMARISED)),
        len(llm.requests),
    )
    assert run_until_caught_up(_worker(svc)) == 0
    after = (
        count(svc, EpisodeSummary),
        len(events(svc, audit.EPISODE_SUMMARISED)),
        len(llm.requests),
    )
    assert after == before and before[:2] == (3, 3)
    assert set(_summaries(svc)) == set(ids)


def test_two_workers_interleaving_give_one_outcome_per_chat(make_services, svc, llm):
    other = make_services(settings=svc.settings)  # a second process on the same database file
    a, b = _worker(svc), _worker(other)
    ids = [add_chat(svc, f"tell me about topic {i}", f"topic {i} is interesting") for i in range(6)]
    state = {"interleaved": 0}

    def reply(body, protocol):
        # While A waits for its first LLM answer, B reads the same batch and finishes it first.
        if state["interleaved"] == 0:
            state["interleaved"] = 1
            b.step()
        return "We discussed a topic."

    llm.reply = reply
    a.step()
    assert state["interleaved"] == 1
    while a.step() + b.step():
        pass
    rows = _summaries(svc)
    assert sorted(rows) == ids
    outcome_events = [
        e.payload["audit_log_id"]
        for kind in (
            audit.EPISODE_SUMMARISED,
            audit.EPISODE_SUMMARISE_SKIPPED,
            audit.EPISODE_SUMMARISE_FAILED,
        )
        for e in events(svc, kind)
    ]
    assert sorted(outcome_events) == ids  # exactly one outcome each
    assert count(svc, EpisodeSummary) == 6


def test_summarising_without_embedder_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="semantic.enabled"):
        load_settings(
            home=tmp_path,
            memory={"episodes_summarise": {"enabled": True}},
            semantic={"enabled": False},
        )


def test_on_by_default_and_off_without_the_embedder(tmp_path):
    shipped = load_settings(home=tmp_path)
    assert shipped.memory.episodes_summarise.enabled and shipped.memory.facts_extract.enabled
    assert shipped.gateway.routes["memory_summarise"] == "offline:textrank"  # no LLM cost
    assert shipped.gateway.routes["memory_extract"] == "offline:patterns"
    no_embedder = load_settings(home=tmp_path, semantic={"enabled": False})
    assert not no_embedder.memory.episodes_summarise.enabled


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("", ""),
        ("  \n", ""),
        ("Trivial.", ""),
        ("none", ""),
        ("We talked.\n\n  More.", "We talked. More."),
    ],
)
def test_clean_summary(raw, clean):
    assert clean_summary(raw) == clean


def test_clean_summary_caps_length():
    assert len(clean_summary("word " * 500)) <= 600
