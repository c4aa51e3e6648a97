"""The store reads the API, the dashboard, the CLI and the MCP server make instead of touching
the tables themselves (issue #23, the seam): each on both engines, on real rows written the
way caesar writes them."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import OWNER, TEST_TOKEN

from caesar import audit
from caesar.clock import utcnow
from caesar.config import FactsImportanceSettings
from caesar.db import Database
from caesar.memory import conversations
from caesar.memory.facts.store import FactsStore, by_keys
from caesar.memory.forget import existing_conversations
from caesar.memory.scope import Scope

LOG = audit.Audit([TEST_TOKEN])


def _chat(db: Database, user: str, reply: str = "ok", *, key: str | None = None) -> int:
    """A one-turn conversation, as `caesar import` writes it: its chat row's id."""
    with db.write() as session:
        return conversations.add_finished(
            Scope(OWNER, session),
            LOG,
            {"messages": [{"role": "user", "content": user}], "reply": reply},
            utcnow(),
            key=key,
        )


def _append(db: Database, event_type: str, payload: dict[str, Any], **kw: Any) -> int:
    with db.write() as session:
        return int(LOG.append(Scope(OWNER, session), event_type, payload, **kw).id)


def _conversation_of(db: Database, chat_id: int) -> int:
    with db.read() as session:
        found = audit.subjects(Scope(OWNER, session), [chat_id])[chat_id]
    assert found is not None
    return found


# -- audit ------------------------------------------------------------------------------------
def test_get_one_row_or_none(migrated_db):
    row_id = _append(migrated_db, audit.CHAT_FAILED, {"error": "x"}, subject_key="k")
    with migrated_db.read() as session:
        row = audit.get(Scope(OWNER, session), row_id)
        assert row is not None and row.event_type == audit.CHAT_FAILED and row.subject_key == "k"
        assert audit.get(Scope(OWNER, session), row_id + 1) is None
        assert audit.get(Scope(OWNER, session), None) is None


def test_subjects_and_types_of_rows_still_there(migrated_db):
    chat = _chat(migrated_db, "hello")
    loose = _append(migrated_db, audit.MCP_TOOL_CALLED, {"tool": "recall"})
    conversation = _conversation_of(migrated_db, chat)
    with migrated_db.read() as session:
        assert audit.subjects(Scope(OWNER, session), [chat, loose, loose + 50]) == {
            chat: conversation,
            loose: None,
        }
        assert audit.types_of(Scope(OWNER, session), iter([chat, loose, chat, loose + 50])) == {
            chat: audit.CHAT_COMPLETED,
            loose: audit.MCP_TOOL_CALLED,
        }
        assert (
            audit.subjects(Scope(OWNER, session), []) == {}
            and audit.types_of(Scope(OWNER, session), []) == {}
        )


def test_about_lists_what_came_of_a_chat_oldest_first(migrated_db):
    chat = _chat(migrated_db, "my dog is Biscuit")
    other = _chat(migrated_db, "something else")
    first = _append(
        migrated_db, audit.FACT_EXTRACTED, {"key": "dog"}, subject_id=chat, subject_key="dog"
    )
    second = _append(migrated_db, audit.EPISODE_SUMMARISED, {}, subject_id=chat)
    _append(migrated_db, audit.FACT_EXTRACTED, {}, subject_id=other, subject_key="x")
    _append(migrated_db, audit.MCP_TOOL_CALLED, {}, subject_id=chat)  # not of the types asked
    with migrated_db.read() as session:
        found = audit.about(
            Scope(OWNER, session), chat, (audit.FACT_EXTRACTED, audit.EPISODE_SUMMARISED)
        )
    assert [(r.id, r.event_type, r.subject_key) for r in found] == [
        (first, audit.FACT_EXTRACTED, "dog"),
        (second, audit.EPISODE_SUMMARISED, None),
    ]
    assert all(r.created_at.tzinfo is None for r in found)


def test_recalled_in_turn_reads_the_rows_naming_that_turn(migrated_db):
    before = _append(migrated_db, audit.EPISODE_RECALLED, {"turn_audit_id": 10_000})
    turn = _append(migrated_db, audit.CHAT_COMPLETED, {"reply": "ok"})
    _append(migrated_db, audit.EPISODE_RECALLED, {"turn_audit_id": turn, "episode_id": 1})
    _append(migrated_db, audit.EPISODE_RECALLED, {"turn_audit_id": turn + 99, "episode_id": 2})
    _append(migrated_db, audit.FACT_EXTRACTED, {"turn_audit_id": turn})  # another kind of row
    _append(migrated_db, audit.EPISODE_RECALLED, {"turn_audit_id": turn, "episode_id": 3})
    with migrated_db.read() as session:
        found = audit.recalled_in_turn(Scope(OWNER, session), turn)
        assert audit.recalled_in_turn(Scope(OWNER, session), before) == []
    assert [p["episode_id"] for p in found] == [1, 3]


def _ids(page: audit.TimelinePage) -> list[int]:
    return [r.id for r in page.rows]


def test_timeline_pages_both_ways(migrated_db):
    ids = [_append(migrated_db, audit.CHAT_FAILED, {"n": n}) for n in range(5)]
    other = _append(migrated_db, audit.MCP_TOOL_CALLED, {})
    with migrated_db.read() as session:
        newest = audit.timeline(Scope(OWNER, session), limit=2)
        assert _ids(newest) == [other, ids[4]] and newest[1:] == (False, True)
        older = audit.timeline(Scope(OWNER, session), before_id=ids[4], limit=2)
        assert _ids(older) == [ids[3], ids[2]] and older[1:] == (True, True)
        oldest = audit.timeline(Scope(OWNER, session), before_id=ids[2], limit=2)
        assert _ids(oldest) == [ids[1], ids[0]] and oldest[1:] == (True, False)
        back = audit.timeline(Scope(OWNER, session), after_id=ids[1], limit=2)
        assert _ids(back) == [ids[3], ids[2]] and back[1:] == (True, True)
        failed = audit.timeline(Scope(OWNER, session), event_type=audit.CHAT_FAILED, limit=10)
        assert _ids(failed) == ids[::-1] and failed[1:] == (False, False)


SEARCHED = [
    ("lisbon", "I moved to Lisbon"),  # case-insensitive
    ("café", "a café on the corner"),  # non-ASCII: SQLite stores it \u-escaped
    ('"quoted"', 'she said "quoted" twice'),  # quotes: stored escaped on both engines
    ('"Grüße"', 'he wrote "Grüße" at the end'),  # both at once
    ("50%_", "a 50%_ discount"),  # LIKE's wildcards, taken literally
    ("back\\slash", "a back\\slash here"),
]


@pytest.mark.parametrize(("needle", "said"), SEARCHED, ids=[n for n, _ in SEARCHED])
def test_timeline_search_finds_what_was_said_as_it_was_typed(migrated_db, needle, said):
    wanted = _append(migrated_db, audit.CHAT_FAILED, {"messages": [{"content": said}]})
    _append(migrated_db, audit.CHAT_FAILED, {"messages": [{"content": "nothing of the kind"}]})
    with migrated_db.read() as session:
        assert _ids(audit.timeline(Scope(OWNER, session), search=needle)) == [wanted]
        assert _ids(audit.timeline(Scope(OWNER, session), search=f"  {needle} ")) == [wanted]


def test_timeline_search_reads_the_subject_key_and_refuses_wildcards(migrated_db):
    keyed = _append(migrated_db, audit.FACT_USER_EDITED, {"value": "x"}, subject_key="home_city")
    _append(migrated_db, audit.FACT_USER_EDITED, {"value": "y"}, subject_key="homeXcity")
    with migrated_db.read() as session:
        assert _ids(audit.timeline(Scope(OWNER, session), search="home_city")) == [keyed]
        assert _ids(audit.timeline(Scope(OWNER, session), search="%")) == []
        assert _ids(audit.timeline(Scope(OWNER, session), search="nowhere")) == []


# -- conversations ----------------------------------------------------------------------------
def test_key_of_and_id_of_name_a_conversation_both_ways(migrated_db):
    chat = _chat(migrated_db, "hello", key="client-key-1")
    conversation = _conversation_of(migrated_db, chat)
    with migrated_db.read() as session:
        assert conversations.key_of(Scope(OWNER, session), conversation) == "client-key-1"
        assert conversations.id_of(Scope(OWNER, session), "client-key-1") == conversation
        assert conversations.key_of(Scope(OWNER, session), conversation + 1) is None
        assert conversations.id_of(Scope(OWNER, session), "no-such-key") is None


def test_turn_rows_are_the_answered_turns_oldest_first(migrated_db):
    now = utcnow()
    with migrated_db.write() as session:
        ref = conversations.resolve(Scope(OWNER, session), [], now, named="two-turns")
        turns = []
        for n in range(2):
            row = LOG.append(
                Scope(OWNER, session), audit.CHAT_COMPLETED, {"n": n}, subject_id=ref.id
            )
            conversations.record_turn(session, ref, row.id, now)
            turns.append(row.id)
        LOG.append(
            Scope(OWNER, session), audit.CHAT_FAILED, {"n": 2}, subject_id=ref.id
        )  # not answered
    elsewhere = _chat(migrated_db, "another conversation")
    with migrated_db.read() as session:
        rows = conversations.turn_rows(Scope(OWNER, session), ref.id)
        assert [r.id for r in rows] == turns and [r.payload["n"] for r in rows] == [0, 1]
        assert [r.id for r in conversations.turn_rows(Scope(OWNER, session), ref.id + 10)] == []
    assert elsewhere not in turns


# -- facts, forget ----------------------------------------------------------------------------
def test_by_keys_reads_the_facts_as_they_are_now(migrated_db):
    store = FactsStore(migrated_db, FactsImportanceSettings(), LOG)
    store.set_by_operator("dog_name", "Rex", scope=Scope(OWNER))
    store.set_by_operator("dog_name", "Biscuit", scope=Scope(OWNER))
    store.set_by_operator("home_city", "Lisbon", scope=Scope(OWNER))
    with migrated_db.read() as session:
        found = by_keys(Scope(OWNER, session), ["dog_name", "gone_key", "home_city"])
        assert {k: f.value for k, f in found.items()} == {
            "dog_name": "Biscuit",
            "home_city": "Lisbon",
        }
        assert by_keys(Scope(OWNER, session), []) == {}


def test_existing_conversations_are_those_not_forgotten(migrated_db):
    kept = [_conversation_of(migrated_db, _chat(migrated_db, f"chat {n}")) for n in range(3)]
    with migrated_db.read() as session:
        assert existing_conversations(Scope(OWNER, session), [kept[2], 999_999, kept[0]]) == [
            kept[0],
            kept[2],
        ]
        assert existing_conversations(Scope(OWNER, session), []) == []
