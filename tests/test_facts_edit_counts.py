"""Operator edit counts on the per-turn path: the aggregate query against a plain reading of
ADR-0034 §4, and the reuse of its result, which must end the moment any process, or a
retention sweep, adds or removes an edit or deletion row."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from conftest import OWNER

from caesar import audit
from caesar.audit import Audit
from caesar.clock import utcnow
from caesar.config import FactsImportanceSettings
from caesar.db.models import AuditLog, Fact
from caesar.memory.facts.store import FactsStore, edit_counts
from caesar.memory.scope import Scope
from caesar.retention import RetentionWorker


def _append(db, event_type: str, key: str, *, days_ago: float = 0.0) -> int:
    when = utcnow() - timedelta(days=days_ago)
    with db.write() as session:
        row = Audit().append(
            Scope(OWNER, session), event_type, {"key": key}, subject_key=key, created_at=when
        )
        return row.id


def _reference_counts(db) -> dict[str, int]:
    """The ADR read literally: per key, the edits after its last deletion."""
    with db.read() as session:
        rows = session.query(AuditLog.id, AuditLog.event_type, AuditLog.subject_key).all()
    last_delete: dict[str, int] = {}
    for row_id, event_type, key in rows:
        if event_type == audit.FACT_USER_DELETED:
            last_delete[key] = max(last_delete.get(key, 0), row_id)
    counts: dict[str, int] = {}
    for row_id, event_type, key in rows:
        if event_type == audit.FACT_USER_EDITED and row_id > last_delete.get(key, 0):
            counts[key] = counts.get(key, 0) + 1
    return counts


def test_edit_counts_match_the_adr_read_literally(migrated_db):
    rng = random.Random(7)
    keys = ["dog_name", "city", "job", "car"]
    for _ in range(60):
        event = rng.choice([audit.FACT_USER_EDITED] * 3 + [audit.FACT_USER_DELETED])
        _append(migrated_db, event, rng.choice(keys))
    _append(migrated_db, audit.FACT_EXTRACTED, "dog_name")  # not an operator edit
    expected = _reference_counts(migrated_db)
    assert expected, "the sequence must leave some edits standing"
    with migrated_db.read() as session:
        assert edit_counts(Scope(OWNER, session)) == expected
        for key in keys:
            assert edit_counts(Scope(OWNER, session), key) == (
                {key: expected[key]} if key in expected else {}
            )


def _fact(db, key: str, days_ago: float = 10.0) -> None:
    when = utcnow() - timedelta(days=days_ago)
    with db.write() as session:
        session.add(
            Fact(
                key=key,
                value="v",
                confidence=0.8,
                created_at=when,
                updated_at=when,
                person_id=OWNER,
            )
        )


def _counts(store: FactsStore) -> dict[str, int]:
    return {f.key: f.edit_count for f in store.list_all(scope=Scope(OWNER))}


def test_reused_counts_follow_edits_and_deletions_made_through_the_store(migrated_db):
    store = FactsStore(migrated_db, FactsImportanceSettings(), Audit())
    _fact(migrated_db, "city")
    assert _counts(store) == {"city": 0}
    assert _counts(store) == {"city": 0}  # served again from the kept counts
    store.set_by_operator("city", "Lyon", scope=Scope(OWNER))
    store.set_by_operator("city", "Lyon", scope=Scope(OWNER))  # the same value is still an edit
    assert _counts(store) == {"city": 2}
    store.delete("city", scope=Scope(OWNER))
    store.set_by_operator("city", "Paris", scope=Scope(OWNER))
    assert _counts(store) == {"city": 1}


def test_another_process_editing_is_seen_at_once(make_services):
    """Two Services on one database file stand for two processes (`caesar serve` and the CLI):
    nothing in memory tells the first that the second wrote."""
    first = make_services()
    second = make_services(settings=first.settings)
    assert first.db is not second.db
    first.facts.set_by_operator("dog_name", "Biscuit", scope=Scope(OWNER))
    assert _counts(first.facts) == {"dog_name": 1}

    second.facts.set_by_operator("dog_name", "Rex", scope=Scope(OWNER))
    assert _counts(first.facts) == {"dog_name": 2}
    assert first.facts.list_all(scope=Scope(OWNER))[0].value == "Rex"

    second.facts.delete("dog_name", scope=Scope(OWNER))
    assert first.facts.list_all(scope=Scope(OWNER)) == []
    second.facts.set_by_operator("dog_name", "Rex", scope=Scope(OWNER))
    assert _counts(first.facts) == {"dog_name": 1}


def test_another_process_refreshing_a_fact_silently_is_seen_at_once(make_services):
    """The extractor's same-value refresh writes no audit row: the facts themselves are read
    on every call, so the fresher date and higher confidence show up all the same."""
    first = make_services()
    second = make_services(settings=first.settings)
    said = utcnow() - timedelta(days=40)
    with first.db.write() as session:
        chat = first.audit.append(
            Scope(OWNER, session), audit.CHAT_COMPLETED, {"reply": "ok"}, created_at=said
        )
        first.facts.upsert_extracted(
            Scope(OWNER, session),
            key="city",
            value="Lyon",
            confidence=0.6,
            source_audit_id=chat.id,
            said_at=said,
        )
    [before] = first.facts.list_all(scope=Scope(OWNER))

    later = utcnow() - timedelta(days=1)
    with second.db.write() as session:
        chat = second.audit.append(
            Scope(OWNER, session), audit.CHAT_COMPLETED, {"reply": "ok"}, created_at=later
        )
        outcome = second.facts.upsert_extracted(
            Scope(OWNER, session),
            key="city",
            value="lyon",
            confidence=0.9,
            source_audit_id=chat.id,
            said_at=later,
        )
    assert outcome is None  # no audit row for a refresh

    [after] = first.facts.list_all(scope=Scope(OWNER))
    assert (after.confidence, after.updated_at) == (0.9, later)
    assert after.importance > before.importance


def test_a_retention_sweep_of_edit_rows_is_seen_at_once(make_services):
    services = make_services(retention={"ttl_days": 90})
    store = services.facts
    _fact(services.db, "city")
    _fact(services.db, "job")
    _append(services.db, audit.FACT_USER_EDITED, "city", days_ago=200)  # expired
    _append(services.db, audit.FACT_USER_EDITED, "city", days_ago=1)
    assert _counts(store) == {"city": 2, "job": 0}

    assert RetentionWorker(services).step() == 1
    assert _counts(store) == {"city": 1, "job": 0}


def test_sweeping_a_deletion_row_brings_earlier_edits_back(make_services):
    """Only the row count changes here (the newest edit row stays the newest): the kept
    counts must still be dropped."""
    services = make_services(retention={"ttl_days": 90})
    store = services.facts
    _fact(services.db, "city")
    _fact(services.db, "job")
    _append(services.db, audit.FACT_USER_EDITED, "city", days_ago=1)
    _append(services.db, audit.FACT_USER_EDITED, "city", days_ago=1)
    _append(services.db, audit.FACT_USER_DELETED, "city", days_ago=200)  # expired
    _append(services.db, audit.FACT_USER_EDITED, "job", days_ago=1)  # the largest id, kept
    assert _counts(store) == {"city": 0, "job": 1}

    assert RetentionWorker(services).step() == 1
    assert _counts(store) == {"city": 2, "job": 1}


@pytest.mark.parametrize("limit", [None, 1])
def test_kept_counts_never_change_the_ranking(migrated_db, limit):
    store = FactsStore(migrated_db, FactsImportanceSettings(), Audit())
    fresh = FactsStore(migrated_db, FactsImportanceSettings(), Audit())
    for i, key in enumerate(["a_fact", "b_fact", "c_fact"]):
        _fact(migrated_db, key, days_ago=10 * i)
    now = utcnow()
    store.list_all(now, limit=limit, scope=Scope(OWNER))  # fills the kept counts
    _append(migrated_db, audit.FACT_USER_EDITED, "c_fact")
    _append(migrated_db, audit.FACT_USER_EDITED, "c_fact")
    assert store.list_all(now, limit=limit, scope=Scope(OWNER)) == fresh.list_all(
        now, limit=limit, scope=Scope(OWNER)
    )
    assert store.list_all(now, scope=Scope(OWNER))[0].key == "c_fact"
