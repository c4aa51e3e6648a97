"""`Audit.append_many`, the one-statement append a chat turn uses for its rows, on both engines:
the same rows `append` writes, ids in the order given, and on PostgreSQL the same lock that
makes ids commit in order. Then a whole turn's writes: the turn's row first, its recalls after."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from conftest import OWNER, PROVIDER_KEY, TEST_TOKEN
from memory_helpers import add_episode, days_ago, events
from sqlalchemy import select

from caesar import audit
from caesar.audit import Audit, AuditEntry
from caesar.brain import Brain
from caesar.clock import utcnow
from caesar.db.models import AuditLog, EpisodeSummary
from caesar.memory.scope import Scope


def _columns(row: AuditLog) -> tuple:
    return (row.event_type, row.payload, row.subject_id, row.subject_key, row.created_at)


def test_append_many_writes_what_append_writes(migrated_db):
    log = Audit([TEST_TOKEN, PROVIDER_KEY])
    when = datetime(2026, 3, 1, 12, 30, 15, 123456)
    entries = [
        AuditEntry(audit.CHAT_COMPLETED, {"reply": f"key {PROVIDER_KEY}", "api_key": "x"}),
        AuditEntry(audit.EPISODE_RECALLED, {"summary": "a\x00b", "score": 0.5}, subject_id=7),
        AuditEntry(audit.FACT_USER_EDITED, {"key": "city"}, subject_key="city", created_at=when),
    ]
    with migrated_db.write() as session:
        singles = [
            log.append(
                Scope(OWNER, session),
                e.event_type,
                e.payload,
                subject_id=e.subject_id,
                subject_key=e.subject_key,
                created_at=e.created_at,
            ).id
            for e in entries
        ]
        batch = log.append_many(Scope(OWNER, session), entries)
        assert log.append_many(Scope(OWNER, session), []) == []
    assert batch == sorted(batch) and min(batch) > max(singles)
    with migrated_db.read() as session:
        rows = {r.id: r for r in session.scalars(select(AuditLog))}
    assert len(rows) == 6
    for single, batched in zip(singles, batch, strict=True):
        a, b = _columns(rows[single]), _columns(rows[batched])
        assert a[:4] == b[:4]
        assert abs(a[4] - b[4]) < timedelta(minutes=1)
    assert rows[batch[0]].payload == {"reply": "key [redacted]", "api_key": "[redacted]"}
    assert rows[batch[1]].payload["summary"] == "a\ufffdb"
    assert rows[batch[2]].created_at == when
    assert abs(rows[batch[0]].created_at - utcnow()) < timedelta(minutes=1)


def test_append_many_ids_follow_the_order_given(migrated_db):
    log = Audit()
    entries = [AuditEntry("test.row", {"n": n}) for n in range(25)]
    with migrated_db.write() as session:
        ids = log.append_many(Scope(OWNER, session), entries)
    with migrated_db.read() as session:
        stored = {r.id: r.payload["n"] for r in session.scalars(select(AuditLog))}
    assert [stored[i] for i in ids] == list(range(25))
    assert ids == sorted(ids) and len(set(ids)) == 25


def test_a_failed_transaction_leaves_none_of_the_batch(migrated_db):
    log = Audit()
    with pytest.raises(RuntimeError), migrated_db.write() as session:
        log.append_many(
            Scope(OWNER, session), [AuditEntry("test.row", {}), AuditEntry("test.row", {})]
        )
        raise RuntimeError("the rest of the turn failed")
    with migrated_db.read() as session:
        assert audit.list_events(Scope(OWNER, session)) == []


SLEEP = "We discussed the operator's trouble sleeping; caesar suggested lowering the thermostat."


def test_a_turn_writes_its_row_first_then_one_row_per_recall(make_services, llm):
    services = make_services(
        memory={"episodes_recall": {"similarity_threshold": 0.0, "fusion": "dense"}}
    )
    older, _ = add_episode(services, SLEEP, days_ago(20))
    newer, _ = add_episode(services, SLEEP + " Again.", days_ago(2))
    llm.replies.append("Glad it helped.")
    result = Brain(services).turn("I tried the thermostat thing you suggested", scope=Scope(OWNER))

    assert [e.episode_id for e in result.recalled] == [newer, older]  # fresher ranks first
    [chat] = events(services, audit.CHAT_COMPLETED)[-1:]
    assert chat.id == result.audit_id and chat.payload["reply"] == "Glad it helped."
    recalled = events(services, audit.EPISODE_RECALLED)
    assert [r.id > chat.id for r in recalled] == [True, True]
    assert [r.payload["episode_id"] for r in recalled] == [newer, older]
    assert {r.payload["turn_audit_id"] for r in recalled} == {chat.id}
    assert [r.subject_id for r in recalled] == [e.audit_log_id for e in result.recalled]
    assert recalled[0].payload["summary"] == SLEEP + " Again."
    with services.db.read() as session:
        for episode_id in (older, newer):
            row = session.get(EpisodeSummary, episode_id)
            assert row.recall_count == 1 and row.last_recalled_at == chat.created_at
