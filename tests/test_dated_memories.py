"""Dated memories written by the `memory.extract` worker (issue #45): a chat's things said, by
the person and caesar, each with its conversation, turn and date, exactly once; forgotten with
the chat; never another person's; never mistaken for a standing statement."""

from __future__ import annotations

import json
from datetime import datetime

import numpy as np
import pytest
from conftest import OWNER
from memory_helpers import add_chat, count, events, install_at
from sqlalchemy import select

from caesar import audit, people
from caesar.db.models import AuditLog, Memory, MemoryExtractCursor
from caesar.embeddings import normalise
from caesar.memory import conversations
from caesar.memory.dated.offline import CAESAR, PERSON
from caesar.memory.dated.store import SAID
from caesar.memory.facts.extract import new_turns
from caesar.memory.forget import ForgetRequest, forget
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up

MONDAY = datetime(2026, 11, 16, 18, 0)  # naive UTC


@pytest.fixture
def learning(make_services):
    return make_services(
        memory={"facts_extract": {"enabled": True}},
        gateway={"routes": {"memory_extract": "offline:patterns"}},
    )


def _learn(services) -> None:
    run_until_caught_up(services.workers["memory.extract"])


def _conversation_of(services, chat: int) -> int:
    with services.db.read() as session:
        subject = session.get(AuditLog, chat).subject_id
    assert subject is not None
    return subject


def test_a_chat_yields_the_dated_memories_of_both_speakers(learning):
    chat = add_chat(
        learning,
        "I went to a pottery class last Saturday with my sister.",
        "You could try a celadon glaze next time, it gives a soft green.",
        MONDAY,
    )
    _learn(learning)

    found = learning.dated.list(scope=Scope(OWNER))
    assert [(m.speaker, m.turn, m.text) for m in found] == [
        (PERSON, 0, "The person went to a pottery class last Saturday with their sister."),
        (CAESAR, 1, "The person could try a celadon glaze next time, it gives a soft green."),
    ]
    pottery = found[0]
    assert pottery.said_at == MONDAY and pottery.source_audit_id == chat
    assert pottery.conversation_id == _conversation_of(learning, chat)
    assert pottery.refers_start == datetime(2026, 11, 14)  # the Saturday before, UTC clock
    (said,) = events(learning, audit.MEMORY_SAID)
    assert said.subject_id == chat and said.payload["count"] == 2
    assert "pottery" not in json.dumps(said.payload)  # how many, never what


def test_each_is_embedded_by_the_services_embedder(learning):
    add_chat(learning, "I adopted a grey cat named Luna from the shelter.", "Lovely!", MONDAY)
    _learn(learning)
    with learning.db.read() as session:
        (row,) = session.scalars(select(Memory).where(Memory.kind == SAID))
        blob, model, text = row.vector, row.model, row.text
    embedder = learning.embedder.get()
    assert model == embedder.model_id and blob is not None
    stored = np.frombuffer(blob, np.float32)
    fresh = normalise(embedder.embed_batch([text]))[0]
    assert stored.shape == fresh.shape and float(stored @ fresh) > 0.999


def test_a_chat_with_nothing_worth_keeping_yields_none_and_is_done(learning):
    chat = add_chat(learning, "Hi! How are you?", "Fine, thanks!", MONDAY)
    _learn(learning)
    assert count(learning, Memory, Memory.kind == SAID) == 0
    assert events(learning, audit.MEMORY_SAID) == []
    with learning.db.read() as session:
        assert session.get(MemoryExtractCursor, 1).last_audit_id >= chat


def test_learned_exactly_once(learning):
    add_chat(learning, "I adopted a grey cat named Luna from the shelter.", "Lovely!", MONDAY)
    _learn(learning)
    _learn(learning)
    assert count(learning, Memory, Memory.kind == SAID) == 1


def test_they_are_not_standing_statements(learning):
    add_chat(learning, "I keep a gluten-free diet. I baked rye bread on Sunday.", "Nice.", MONDAY)
    _learn(learning)
    standing = [m.text for m in learning.standing.list(scope=Scope(OWNER))]
    assert standing == ["I keep a gluten-free diet."]
    said = [m.text for m in learning.dated.list(scope=Scope(OWNER))]
    assert said == [
        "The person keeps a gluten-free diet.",
        "The person baked rye bread on Sunday.",
    ]


def test_forgetting_the_conversation_forgets_its_dated_memories(learning):
    chat = add_chat(learning, "I repainted the kitchen walls a pale yellow.", "Bright!", MONDAY)
    kept = add_chat(learning, "I planted three apple trees in the garden.", "Great.", MONDAY)
    _learn(learning)
    result = forget(
        learning, ForgetRequest(conversation_ids=[_conversation_of(learning, chat)], person=OWNER)
    )
    assert result.memories == 1
    assert [m.source_audit_id for m in learning.dated.list(scope=Scope(OWNER))] == [kept]
    assert [r.subject_id for r in events(learning, audit.MEMORY_SAID)] == [kept]


def test_one_persons_dated_memories_are_theirs_alone(learning):
    with learning.db.write() as session:
        ben, _token = people.add(session, learning.audit, "Ben")
        ben_id = ben.id
    with learning.db.write() as session:
        conversations.add_finished(
            Scope(ben_id, session),
            learning.audit,
            {
                "messages": [{"role": "user", "content": "I sold my old motorbike last week."}],
                "reply": "Ok.",
            },
            MONDAY,
        )
    _learn(learning)
    assert learning.dated.list(scope=Scope(OWNER)) == []
    [bike] = learning.dated.list(scope=Scope(ben_id))
    assert bike.text == "The person sold their old motorbike last week."


def test_each_row_gives_only_the_turns_it_added():
    earlier = [
        {"role": "user", "content": "I moved to Porto in May."},
        {"role": "assistant", "content": "How is it going?"},
    ]
    live = {
        "messages": [*earlier, {"role": "user", "content": "I found a flat near the river."}],
        "reply": "Congratulations!",
    }
    first, turns = new_turns(live)
    assert first == 2 and [t["content"] for t in turns] == [
        "I found a flat near the river.",
        "Congratulations!",
    ]
    imported = {**live, "imported": True}
    assert new_turns(imported)[0] == 0 and len(new_turns(imported)[1]) == 4
    assert new_turns({**live, "temporary": True}) == (0, [])


# -- an upgraded install: the chats from before ---------------------------------------------------
def test_the_chats_from_before_the_upgrade_are_read_in_the_background(tmp_path, make_services):

    from caesar.db.models import MemoryDatedCursor

    url = install_at(
        tmp_path,
        "0019",
        {
            "messages": [{"role": "user", "content": "I ran my first half marathon in Porto."}],
            "reply": "Congratulations!",
            "imported": True,
        },
    )
    services = make_services(
        database_url=url,
        memory={"facts_extract": {"enabled": True}},
        gateway={"routes": {"memory_extract": "offline:patterns"}},
    )
    with services.db.read() as session:
        assert session.get(MemoryDatedCursor, 1).until_audit_id == 1
    assert services.workers["memory.dated"].backlog() == 1
    assert run_until_caught_up(services.workers["memory.extract"]) == 0  # extracted before
    assert run_until_caught_up(services.workers["memory.dated"]) == 1
    [run] = services.dated.list(scope=Scope(OWNER))
    assert run.text == "The person ran their first half marathon in Porto."
    assert run.said_at == datetime(2026, 11, 1, 10, 0) and run.source_audit_id == 1
    later = add_chat(services, "I bought a new pair of trail shoes.", "Nice.")
    assert run_until_caught_up(services.workers["memory.dated"]) == 0  # not its chat
    assert run_until_caught_up(services.workers["memory.extract"]) == 1
    assert [m.source_audit_id for m in services.dated.list(scope=Scope(OWNER))] == [1, later]
