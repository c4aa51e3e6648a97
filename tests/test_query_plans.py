"""The turn's lookups by id read rows by their primary key, a span of time reads the
person's episodes by (person_id, created_at) and its chats not summarised yet from the
summariser's queue, on SQLite, whose planner has no statistics: it
takes an equality on an indexed column for ~10 rows, and once read a person's whole index for
60 candidates (28 ms at 100k episodes against 0.3 ms; a dated message 280–450 ms). Real
SQLite file, the real Brain.prepare; each SELECT it sends is planned with EXPLAIN QUERY PLAN."""

from __future__ import annotations

from datetime import datetime, timedelta

from conftest import OWNER
from memory_helpers import add_episode
from sqlalchemy import event

from caesar.brain import Brain
from caesar.memory.scope import Scope

NOW = datetime(2026, 12, 2, 14, 0)


def test_a_turn_reads_candidates_by_key_and_a_span_by_person_and_time(make_services, tmp_path):
    services = make_services(database_url=f"sqlite:///{tmp_path / 'caesar.db'}", timezone="UTC")
    for k in range(30):
        add_episode(services, f"We planned a trip to Lisbon, part {k}.", NOW - timedelta(days=k))
    sent: list[tuple[str, object]] = []

    def capture(_conn, _cursor, statement, parameters, _context, _many):  # noqa: ANN001
        if statement.lstrip().upper().startswith("SELECT") and "temp." not in statement:
            sent.append((statement, parameters))

    engine = services.db.engine
    event.listen(engine, "before_cursor_execute", capture)
    try:
        Brain(services).prepare(
            "What did we say about the Lisbon trip on 25 November 2026?",
            now=NOW,
            scope=Scope(OWNER),
        )
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    plans = []
    with engine.connect() as conn:
        for statement, parameters in sent:
            rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
            plans.append((statement, " | ".join(str(r[-1]) for r in rows)))
    by_id = [p for s, p in plans if " IN (" in s and ("episode_summaries" in s or "audit_log" in s)]
    assert by_id, "the turn read candidates by id"
    for plan in by_id:
        assert "PRIMARY KEY" in plan, plan
    spans = [p for s, p in plans if "created_at >=" in s and "episode_summaries" in s]
    assert spans, "the dated message read its span"
    assert all("idx_episode_summaries_person_created" in p for p in spans), spans
    # its conversations not summarised yet: from the summariser's queue (a partial index of a
    # few rows), not by the person's index (every conversation they ever had)
    queue = [p for s, p in plans if "FROM conversations" in s and "last_turn_at >=" in s]
    assert queue, "the dated message looked for the span's chats not summarised yet"
    assert all("idx_conversations_unsummarised" in p for p in queue), queue
