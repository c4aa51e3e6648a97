"""The episode rows recall reads, by id or by date, and the chats its excerpts are cut from:
every statement recall sends that is not a search (those are the backend's,
memory/engine/backend.py). Each reads the scope's person's rows only.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, or_, select, update

from caesar.db.models import AuditLog, EpisodeSummary
from caesar.memory.engine.sql import PERSON_CHECK, driver_rows, marks, person_checked
from caesar.memory.scope import Scope

# What ranking reads of an episode (rank_candidates' rows; the dense path's too).
EPISODE_COLUMNS = (
    EpisodeSummary.id,
    EpisodeSummary.audit_log_id,
    EpisodeSummary.summary,
    EpisodeSummary.created_at,
    EpisodeSummary.recall_count,
)

PASSAGES = 5  # candidate_rows' column of the window vectors (rows are read by position: fast)

# Built once: every chat turn runs it.
_BY_ID = select(*EPISODE_COLUMNS).where(EpisodeSummary.id.in_(bindparam("ids", expanding=True)))

# Rows read per dated candidate kept: trivial or other-model ones are skipped.
DATE_POOL_SPARE = 4


def candidate_rows(scope: Scope, ids: list[int]) -> list[tuple[Any, ...]]:
    """(id, audit_log_id, summary, created_at, recall_count, passage_vectors) of the candidates
    that still exist with a non-empty summary and are the scope's person's. No summary vector:
    the index has them.

    Sent to the driver as written (exec_driver_sql): for ~80 rows, compiling the expanding IN
    list and SQLAlchemy's row and DateTime processing took half of this step (0.41 → 0.27 ms
    at 100k episodes); SQLite's created_at text is parsed here instead."""
    if not ids:
        return []
    session = scope.session
    sql = (
        "SELECT id, audit_log_id, summary, created_at, recall_count, passage_vectors "
        f"FROM episode_summaries WHERE id IN ({marks(session, len(ids))}) AND summary != '' "
        f"AND {PERSON_CHECK} = {marks(session, 1)}"
    )
    rows = driver_rows(session, sql, [*(int(i) for i in ids), int(scope.person)])
    return [
        (r[0], r[1], r[2], as_datetime(r[3]), r[4], r[5]) if isinstance(r[3], str) else tuple(r)
        for r in rows
    ]


def as_datetime(stored: str) -> datetime:
    """A DateTime column as SQLAlchemy stores it on SQLite ("2026-05-18 12:00:00.000000")."""
    return datetime.fromisoformat(stored)


def ranked_rows(scope: Scope, ids: list[int]) -> list[Any]:
    """EPISODE_COLUMNS of these episodes, those that still exist (the dense path's
    candidates, found by the person's own search)."""
    return list(scope.session.execute(_BY_ID, {"ids": ids}).all())


def dated_rows(
    scope: Scope,
    spans: Sequence[tuple[datetime, datetime]],
    min_created: datetime | None,
    limit: int,
) -> list[tuple[int, str, bool]]:
    """(id, model, has a summary) of the person's newest `limit` × DATE_POOL_SPARE episodes
    created within `spans` (and after `min_created`), newest first.

    Only the date in the WHERE: with the model there too, SQLite searched the (model, id)
    index and sorted every episode of the model (307 ms at 100k); by created_at it reads the
    span's newest rows (model and emptiness are checked on them, a few to spare)."""
    table = EpisodeSummary.__table__.c
    within = and_(
        table.person_id == scope.person,
        or_(*(and_(table.created_at >= a, table.created_at < b) for a, b in spans)),
    )
    if min_created is not None:
        within = and_(within, table.created_at >= min_created)
    rows = scope.session.execute(
        select(table.id, table.model, table.summary != "")
        .where(within)
        .order_by(table.created_at.desc())
        .limit(limit * DATE_POOL_SPARE)
    )
    return [(int(i), model, bool(said)) for i, model, said in rows]


def chat_payloads(scope: Scope, audit_ids: list[int]) -> list[tuple[int, Any]]:
    """(audit row id, payload) of these chats of the person's: what excerpts are cut from."""
    rows = scope.session.execute(
        select(AuditLog.id, AuditLog.payload).where(
            AuditLog.id.in_(audit_ids),
            person_checked(AuditLog.person_id, Scope(scope.person)),
        )
    ).all()
    return [(int(i), payload) for i, payload in rows]


def turn_vector_rows(scope: Scope, episode_ids: list[int]) -> list[tuple[int, Any]]:
    """(episode id, packed turn vectors) of these episodes of the person's."""
    session = scope.session
    sql = (
        "SELECT id, turn_vectors FROM episode_summaries WHERE id IN "
        f"({marks(session, len(episode_ids))}) AND {PERSON_CHECK} = {marks(session, 1)}"
    )
    rows = driver_rows(session, sql, [*(int(i) for i in episode_ids), int(scope.person)])
    return [(int(i), blob) for i, blob in rows]


def count_recalls(scope: Scope, ids: list[int], now: datetime) -> None:
    """Bump these episodes' recall counters (sorted ids), in the scope's write transaction.
    The core table, not the ORM entity: an ORM UPDATE pays for session synchronisation this
    session has nothing to synchronise."""
    if not ids:
        return
    session = scope.session
    table = EpisodeSummary.__table__
    if session.get_bind().dialect.name != "sqlite":
        # Row locks in id order, as every writer of several episodes takes them (the
        # memory.passages worker, reembed): an UPDATE … IN locks in scan order, and with
        # the passages worker holding one of these rows that deadlocked — and PostgreSQL
        # aborted the chat turn. SQLite has one writer at a time: nothing to order.
        session.execute(
            select(table.c.id).where(table.c.id.in_(ids)).order_by(table.c.id).with_for_update()
        )
    session.execute(
        update(table)  # type: ignore[arg-type]  # a Table, typed as its FromClause base
        .where(table.c.id.in_(ids))
        .values(recall_count=table.c.recall_count + 1, last_recalled_at=now)
    )


_SAID_TIMES = (4, 6, 7)  # said_rows' datetime columns
# What the memory stage reads of a dated memory (memory/recall/said.py), by position; its
# vector is in the in-process index (memory/engine/said_vectors.py).
SAID_COLUMNS = "m.id, e.id, m.text, m.speaker, m.said_at, m.turn, m.refers_start, m.refers_end"


def said_rows(scope: Scope, episode_ids: Sequence[int]) -> list[tuple[Any, ...]]:
    """(memory id, episode id, text, speaker, said_at, turn, refers_start, refers_end) of the
    dated memories (kind `said`) of these episodes' conversations, the scope's person's only.
    Found through the conversations' index (idx_memories_conversation)."""
    if not episode_ids:
        return []
    session = scope.session
    sql = (
        f"SELECT {SAID_COLUMNS} FROM episode_summaries e JOIN memories m "
        "ON m.conversation_id = e.conversation_id "
        f"WHERE e.id IN ({marks(session, len(episode_ids))}) "
        f"AND +e.person_id = {marks(session, 1)} "
        f"AND +m.person_id = {marks(session, 1)} AND m.kind = 'said'"
    )
    person = int(scope.person)
    return _said(driver_rows(session, sql, [*(int(i) for i in episode_ids), person, person]))


def said_rows_by_id(scope: Scope, ids: Sequence[int]) -> list[tuple[Any, ...]]:
    """`said_rows`' columns of these dated memories of the person's (episode id None: their
    conversation has none yet), those that still exist."""
    if not ids:
        return []
    session = scope.session
    sql = (
        f"SELECT {SAID_COLUMNS} FROM memories m LEFT JOIN episode_summaries e "
        "ON e.conversation_id = m.conversation_id "
        f"WHERE m.id IN ({marks(session, len(ids))}) "
        f"AND +m.person_id = {marks(session, 1)} AND m.kind = 'said'"
    )
    return _said(driver_rows(session, sql, [*(int(i) for i in ids), int(scope.person)]))


def _said(rows: Sequence[Any]) -> list[tuple[Any, ...]]:
    """Rows with SQLite's datetime text parsed."""
    return [
        tuple(
            as_datetime(v) if k in _SAID_TIMES and isinstance(v, str) else v
            for k, v in enumerate(r)
        )
        for r in rows
    ]
