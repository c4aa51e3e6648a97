"""The audit log on both engines: append, read after a cursor, filters, redaction, and
payloads that must survive PostgreSQL's JSONB as well as SQLite's JSON."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from conftest import OWNER, PROVIDER_KEY, TEST_TOKEN

from caesar import audit
from caesar.clock import utcnow
from caesar.db import Database
from caesar.memory.scope import Scope

FIXED_COLUMNS = {"id", "event_type", "created_at", "payload"}


@pytest.fixture
def log() -> audit.Audit:
    return audit.Audit([TEST_TOKEN, PROVIDER_KEY])


def _append(db: Database, log: audit.Audit, event_type: str, payload: dict, **kw) -> int:
    with db.write() as session:
        return log.append(Scope(OWNER, session), event_type, payload, **kw).id


def test_append_and_read_back(migrated_db, log):
    payload = {
        "messages": [{"role": "user", "content": "héllo ✓ 日本"}],
        "reply": "fine",
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        "latency_ms": 12.5,
        "nested": {"list": [1, 2.5, None, True, "x"]},
    }
    row_id = _append(migrated_db, log, audit.CHAT_COMPLETED, payload)
    with migrated_db.read() as session:
        [row] = audit.list_events(Scope(OWNER, session))
    assert row.id == row_id and row.event_type == audit.CHAT_COMPLETED
    assert row.payload == payload
    assert isinstance(row.created_at, datetime) and row.created_at.tzinfo is None
    assert abs(row.created_at - utcnow()) < timedelta(minutes=1)


def test_nul_characters_are_stored_on_both_engines(migrated_db, log):
    # PostgreSQL's JSONB refuses \u0000 outright; the same payload must work everywhere.
    _append(migrated_db, log, audit.CHAT_COMPLETED, {"reply": "a\x00b", "k\x00": ["\x00"]})
    with migrated_db.read() as session:
        [row] = audit.list_events(Scope(OWNER, session))
    assert row.payload == {"reply": "a\ufffdb", "k\ufffd": ["\ufffd"]}


def test_configured_secrets_are_cut_everywhere(migrated_db, log):
    _append(
        migrated_db,
        log,
        audit.CHAT_FAILED,
        {
            "error": f"bad key {PROVIDER_KEY}",
            "messages": [{"role": "user", "content": f"my token is {TEST_TOKEN}"}],
            "api_key": "anything",
        },
    )
    with migrated_db.read() as session:
        [row] = audit.list_events(Scope(OWNER, session))
    text = str(row.payload)
    assert PROVIDER_KEY not in text and TEST_TOKEN not in text
    assert row.payload["error"] == "bad key [redacted]"
    assert row.payload["api_key"] == "[redacted]"


def test_list_events_cursor_filters_and_order(migrated_db, log):
    ids = []
    for i in range(6):
        kind = audit.CHAT_COMPLETED if i % 2 == 0 else audit.CHAT_FAILED
        ids.append(_append(migrated_db, log, kind, {"i": i}))
    with migrated_db.read() as session:
        everything = audit.list_events(Scope(OWNER, session))
        assert [r.id for r in everything] == ids  # oldest first: newest last
        completed = audit.list_events(Scope(OWNER, session), event_type=audit.CHAT_COMPLETED)
        assert [r.payload["i"] for r in completed] == [0, 2, 4]
        assert [r.id for r in audit.list_events(Scope(OWNER, session), after_id=ids[3])] == ids[4:]
        assert [r.id for r in audit.list_events(Scope(OWNER, session), limit=2)] == ids[:2]
        assert [r.id for r in audit.list_events(Scope(OWNER, session), before_id=ids[2])] == ids[:2]
        newest = audit.list_events(Scope(OWNER, session), newest_first=True, limit=2)
        assert [r.id for r in newest] == [ids[5], ids[4]]
        assert audit.event_types(Scope(OWNER, session)) == sorted(
            {audit.CHAT_COMPLETED, audit.CHAT_FAILED}
        )


def test_count_by_subject_key(migrated_db, log):
    for key in ("dog_name", "dog_name", "city"):
        _append(migrated_db, log, audit.FACT_USER_EDITED, {"key": key}, subject_key=key)
    _append(migrated_db, log, audit.FACT_USER_DELETED, {"key": "city"}, subject_key="city")
    with migrated_db.read() as session:
        counts = audit.count_by_subject_key(Scope(OWNER, session), audit.FACT_USER_EDITED)
    assert counts == {"dog_name": 2, "city": 1}


def test_a_failed_write_leaves_nothing(migrated_db, log):
    with pytest.raises(RuntimeError), migrated_db.write() as session:
        log.append(Scope(OWNER, session), audit.CHAT_COMPLETED, {"reply": "x"})
        raise RuntimeError("the turn broke after appending")
    with migrated_db.read() as session:
        assert audit.list_events(Scope(OWNER, session)) == []


def test_audit_log_keeps_the_four_fixed_columns(migrated_db):
    # Other tools read these four names; anything further must be optional.
    columns = {c["name"]: c for c in sa.inspect(migrated_db.engine).get_columns("audit_log")}
    assert FIXED_COLUMNS <= set(columns)
    for name in FIXED_COLUMNS - {"id"}:
        assert columns[name]["nullable"] is False, name
    # ...but one: every row records who acted (issue #23), so a row without a person is refused
    assert columns["person_id"]["nullable"] is False
    for name in set(columns) - FIXED_COLUMNS - {"person_id"}:
        assert columns[name]["nullable"] or columns[name]["default"] is not None, name


def test_audit_log_indexes(migrated_db):
    indexes = {
        tuple(i["column_names"]) for i in sa.inspect(migrated_db.engine).get_indexes("audit_log")
    }
    assert ("event_type", "id") in indexes
    assert ("created_at",) in indexes


def test_short_placeholders_are_not_treated_as_secrets():
    # "ollama" is Ollama's placeholder key, not worth cutting from every payload...
    log = audit.Audit(["abc"])
    assert log.redact({"text": "abc def"}) == {"text": "abc def"}


def _append_one(log, session) -> list[str]:
    log.append(Scope(OWNER, session), "test.second", {})
    return ["test.second"]


def _append_batch(log, session) -> list[str]:
    from caesar.audit import AuditEntry

    log.append_many(
        Scope(OWNER, session), [AuditEntry("test.second", {}), AuditEntry("test.third", {})]
    )
    return ["test.second", "test.third"]


@pytest.mark.parametrize("second_write", [_append_one, _append_batch])
def test_postgres_appends_commit_in_id_order(pg_url, second_write):
    """Cursor workers read `id > last`; on PostgreSQL a later id must never become visible
    before an earlier one, or the earlier row would be skipped for good. `append` and
    `append_many` both wait for an earlier appender's transaction."""
    import threading

    from caesar.audit import Audit
    from caesar.db import Database, migrate

    db = Database(pg_url)
    migrate.upgrade(db)
    log = Audit()
    first_appended = threading.Event()
    release_first = threading.Event()
    order: list[str] = []
    written: list[str] = []

    def slow_first() -> None:
        with db.write() as session:
            log.append(Scope(OWNER, session), "test.first", {})
            first_appended.set()
            release_first.wait(10)
            order.append("first committed")

    def second() -> None:
        with db.write() as session:
            written.extend(second_write(log, session))
        order.append("second committed")

    a = threading.Thread(target=slow_first)
    a.start()
    assert first_appended.wait(10)
    b = threading.Thread(target=second)
    b.start()
    b.join(0.5)
    assert b.is_alive(), "the second write must wait for the first transaction"
    release_first.set()
    a.join(10)
    b.join(10)
    assert order == ["first committed", "second committed"]
    with db.read() as session:
        rows = audit.list_events(Scope(OWNER, session))
    assert [r.event_type for r in rows] == ["test.first", *written]
    db.dispose()
