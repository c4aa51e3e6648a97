"""retention.sweep: expired audit rows go, with what was derived from them, on both engines."""

from __future__ import annotations

from datetime import timedelta

import pytest
from conftest import OWNER
from memory_helpers import add_chat, add_episode, count, days_ago, events
from sqlalchemy import select, text, update
from sqlalchemy.exc import IntegrityError

from caesar import audit
from caesar.clock import utcnow
from caesar.db.models import AuditLog, EpisodeSummary, Fact, SemanticChunk
from caesar.memory.engine.vectors import to_f32_bytes
from caesar.memory.scope import Scope
from caesar.retention import RetentionWorker
from caesar.services import Services
from caesar.workers import run_until_caught_up

SLEEP = "We discussed the operator's trouble sleeping; caesar suggested lowering the bedroom thermostat to 65°F."
QUERY = "I tried the thermostat thing you suggested"
# Retention is opt-in (no TTL by default): every sweep here runs with the TTL an operator set.
TTL = {"ttl_days": 90}


def _add_chunk(services, audit_id, text_, created_at):
    vector = services.embedder.get().embed_batch([text_])[0]
    with services.db.write() as session:
        session.add(
            SemanticChunk(
                audit_log_id=audit_id,
                chunk_index=0,
                text=text_,
                embedding=[float(x) for x in vector],
                embedding_f32=to_f32_bytes(vector),
                model="all-MiniLM-L6-v2",
                created_at=created_at,
                person_id=OWNER,
            )
        )


def _add_fact(services, key, source_audit_id):
    now = utcnow()
    with services.db.write() as session:
        session.add(
            Fact(
                key=key,
                value="x",
                confidence=0.9,
                source_audit_id=source_audit_id,
                created_at=now,
                updated_at=now,
                person_id=OWNER,
            )
        )


ORPHANS = [
    f"SELECT count(*) FROM {table} t LEFT JOIN audit_log a ON a.id = t.{column} "
    f"WHERE t.{column} IS NOT NULL AND a.id IS NULL"
    for table, column in (
        ("episode_summaries", "audit_log_id"),
        ("semantic_chunks", "audit_log_id"),
        ("facts", "source_audit_id"),
    )
]


def _orphans(services) -> int:
    with services.db.read() as session:
        return sum(int(session.scalar(text(sql)) or 0) for sql in ORPHANS)


def test_foreign_keys_are_enforced(make_services, db_url):
    services = make_services(database_url=db_url)
    if services.db.is_sqlite:
        with services.db.read() as session:
            assert session.scalar(text("PRAGMA foreign_keys")) == 1
    now = utcnow()
    orphan = EpisodeSummary(
        audit_log_id=424242, summary="", embedding=[], model="m", created_at=now, person_id=OWNER
    )
    with pytest.raises(IntegrityError, match="(?i)foreign key"), services.db.write() as session:
        session.add(orphan)


def test_sweep_cascades_with_zero_orphans(make_services, db_url):
    services = make_services(database_url=db_url, retention=TTL)
    old_episode, old_chat = add_episode(services, SLEEP, days_ago(120))
    _add_chunk(services, old_chat, "Lower the thermostat to 65°F.", days_ago(120))
    _add_fact(services, "sleep_issue", old_chat)
    old_other = add_chat(services, "what time is it?", "3pm", days_ago(91))
    fresh_episode, fresh_chat = add_episode(services, SLEEP, days_ago(2))
    _add_chunk(services, fresh_chat, "Lower the thermostat to 65°F again.", days_ago(2))
    _add_fact(services, "dog_name", fresh_chat)

    # This process's index knows the old episode (max_age off so it would be returned).
    assert {
        e.episode_id
        for e in services.episodes.preview(QUERY, max_age_days=None, scope=Scope(OWNER))
    } == {
        old_episode,
        fresh_episode,
    }
    assert len(services.semantic.recall("thermostat", 5, scope=Scope(OWNER))) == 2
    other_process = Services.build(services.settings)  # a server that is not the sweeper
    other_process.embedder.set(services.embedder.get())
    try:
        assert (
            len(other_process.episodes.preview(QUERY, max_age_days=None, scope=Scope(OWNER))) == 2
        )

        worker = services.workers["retention.sweep"]
        assert worker.enabled
        assert run_until_caught_up(worker) == 2
        with services.db.read() as session:
            remaining = set(
                session.scalars(
                    select(AuditLog.id).where(AuditLog.event_type == audit.CHAT_COMPLETED)
                )
            )
            facts = dict(session.execute(select(Fact.key, Fact.source_audit_id)).all())
        assert old_chat not in remaining and old_other not in remaining and fresh_chat in remaining
        assert count(services, EpisodeSummary) == 1 and count(services, SemanticChunk) == 1
        assert facts == {"sleep_issue": None, "dog_name": fresh_chat}  # the fact stays, unlinked
        assert _orphans(services) == 0

        [swept] = events(services, audit.RETENTION_SWEPT)
        counts = {
            k: swept.payload[k] for k in ("audit_rows", "episodes", "chunks", "facts_unlinked")
        }
        assert counts == {"audit_rows": 2, "episodes": 1, "chunks": 1, "facts_unlinked": 1}
        assert (
            swept.payload["by_event_type"] == {"chat.completed": 2}
            and swept.payload["ttl_days"] == 90
        )

        # Neither this process nor another one ever returns the swept episode or chunk.
        assert [
            e.episode_id
            for e in services.episodes.preview(QUERY, max_age_days=None, scope=Scope(OWNER))
        ] == [fresh_episode]
        assert [
            e.episode_id
            for e in other_process.episodes.preview(QUERY, max_age_days=None, scope=Scope(OWNER))
        ] == [fresh_episode]
        assert [
            h.audit_log_id for h in services.semantic.recall("thermostat", 5, scope=Scope(OWNER))
        ] == [fresh_chat]
    finally:
        other_process.close()


def test_sweep_never_sweeps_fresh_rows_and_is_idempotent(make_services):
    services = make_services(retention=TTL)
    add_chat(services, "old", "old", days_ago(100))
    add_chat(services, "new", "new")
    worker = services.workers["retention.sweep"]
    assert run_until_caught_up(worker) == 1
    assert run_until_caught_up(worker) == 0  # its own retention.swept row is fresh
    assert len(events(services, audit.RETENTION_SWEPT)) == 1


def test_sweep_works_in_batches_each_audited(make_services):
    services = make_services(retention=TTL)
    for i in range(5):
        add_chat(services, f"old {i}", "x", days_ago(200 - i))
    add_chat(services, "new", "new")
    worker = RetentionWorker(services, batch_size=2)
    assert [worker.step() for _ in range(4)] == [2, 2, 1, 0]
    assert [e.payload["audit_rows"] for e in events(services, audit.RETENTION_SWEPT)] == [2, 2, 1]


def test_sqlite_ids_are_never_reused_after_a_full_sweep(make_services):
    """Without AUTOINCREMENT SQLite gives a new row max(rowid)+1: sweeping the newest rows
    would hand their ids out again, below every worker cursor and the vector index."""
    services = make_services(retention=TTL)
    for i in range(3):
        add_episode(services, f"old conversation {i}", days_ago(100 + i))
    with services.db.read() as session:
        newest_audit = session.scalar(select(AuditLog.id).order_by(AuditLog.id.desc()).limit(1))
        newest_episode = session.scalar(
            select(EpisodeSummary.id).order_by(EpisodeSummary.id.desc()).limit(1)
        )
    run_until_caught_up(services.workers["retention.sweep"])
    assert count(services, EpisodeSummary) == 0
    episode_id, chat_id = add_episode(services, "a new conversation", utcnow())
    assert chat_id > newest_audit and episode_id > newest_episode
    assert [
        e.episode_id for e in services.episodes.preview("a new conversation", scope=Scope(OWNER))
    ] == [episode_id]


def test_retention_respects_ttl_setting_and_disable(make_services):
    services = make_services(retention={"ttl_days": 7})
    add_chat(services, "ten days ago", "x", days_ago(10))
    add_chat(services, "new", "new")
    assert services.workers["retention.sweep"].enabled
    assert run_until_caught_up(services.workers["retention.sweep"]) == 1
    off = make_services(retention={"ttl_days": 7, "enabled": False})
    assert not off.workers["retention.sweep"].enabled


def test_cutoff_is_ttl_days_before_now(make_services):
    worker = make_services(retention=TTL).workers["retention.sweep"]
    now = utcnow()
    assert worker.cutoff(now) == now - timedelta(days=90)


def test_no_ttl_by_default_nothing_is_deleted_by_age(make_services):
    """Retention is opt-in: the sweep is not started, and run by name it deletes nothing."""
    services = make_services()
    assert services.settings.retention.ttl_days is None
    add_chat(services, "ten years ago", "x", days_ago(3650))
    add_episode(services, SLEEP, days_ago(400))
    worker = services.workers["retention.sweep"]
    assert not worker.enabled and worker not in services.enabled_workers()
    assert worker.cutoff() is None
    assert run_until_caught_up(worker) == 0
    assert count(services, EpisodeSummary) == 1
    assert len(events(services, audit.CHAT_COMPLETED)) == 2
    assert events(services, audit.RETENTION_SWEPT) == []


def test_swept_failed_chats_are_not_retried(make_services, llm):
    from caesar.memory.episodes.summarise import retry_failed

    services = make_services(memory={"episodes_summarise": {"enabled": True}}, retention=TTL)
    chat = add_chat(services, "old", "x", days_ago(100))
    add_chat(services, "new", "new")
    with services.db.write() as session:
        services.audit.append(
            Scope(OWNER, session),
            audit.EPISODE_SUMMARISE_FAILED,
            {"audit_log_id": chat},
            subject_id=chat,
        )
        session.execute(
            update(AuditLog)
            .where(AuditLog.event_type == audit.EPISODE_SUMMARISE_FAILED)
            .values(created_at=utcnow())
        )
    run_until_caught_up(services.workers["retention.sweep"])
    assert retry_failed(services.workers["memory.summarise"]) == (0, 0)
    assert llm.requests == []
