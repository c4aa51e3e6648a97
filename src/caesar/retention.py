"""Worker `retention.sweep` (ADR-0020): hard-delete audit rows older than `retention.ttl_days`.

Opt-in: with no `ttl_days` (the default) the worker is not enabled, and if run by name it deletes
nothing — caesar forgets only what the operator tells it to (docs/episodes.md, "Departure from
the ADR: no age wall, opt-in retention").

What was derived from a deleted chat goes with it through the foreign keys: its episode
summary, its windows' words and semantic chunks are deleted (ON DELETE CASCADE; SQLite's
contentless window index by hand, see memory/engine/window_keywords.py), a fact it taught keeps its value
but loses the link (SET NULL) — the operator's facts outlive the chats they came from — and a
conversation none of whose chats is left goes too. (To forget on purpose, whatever the age,
everything learned included: memory/forget.py.)
SQLite enforces this only with `PRAGMA foreign_keys=ON`, which db/engine.py sets on every
connection. Each batch is one write transaction that deletes and appends its own
`retention.swept` row with the counts, so a sweep is never half-recorded.

Age is `audit_log.created_at`, i.e. when the event happened: an imported conversation dated
two years ago is swept by the next run (the importer warns about that).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, select

from caesar import audit
from caesar.clock import utcnow
from caesar.db.models import AuditLog, Conversation, EpisodeSummary, Fact, Memory, SemanticChunk
from caesar.memory.engine import window_keywords
from caesar.memory.scope import Scope
from caesar.workers import Worker

if TYPE_CHECKING:
    from caesar.container import Container

BATCH_SIZE = 1000
log = logging.getLogger(__name__)


class RetentionWorker(Worker):
    name = "retention.sweep"

    def __init__(self, services: Container, batch_size: int = BATCH_SIZE) -> None:
        self.services = services
        self.db = services.db
        self.audit: audit.Audit = services.audit
        self.batch_size = batch_size

    @property
    def enabled(self) -> bool:
        """Started only when it would delete something: enabled, with a TTL set."""
        return bool(self.services.settings.retention.active)

    @property
    def interval_seconds(self) -> float:
        return float(self.services.settings.retention.interval_seconds)

    def cutoff(self, now: datetime | None = None) -> datetime | None:
        """Rows created before this expire; None: no TTL is set, nothing expires."""
        ttl_days = self.services.settings.retention.ttl_days
        if ttl_days is None:
            return None
        return (now or utcnow()) - timedelta(days=ttl_days)

    def step(self) -> int:
        """Delete one batch of expired audit rows; returns how many (0 when nothing is left).
        The `retention.swept` row it writes is fresh, so a sweep never sweeps its own record."""
        cutoff = self.cutoff()
        if cutoff is None:
            log.info("retention.sweep: no retention.ttl_days set, so nothing expires")
            return 0
        with self.db.write() as session:
            # The append lock before any row lock (PostgreSQL), in the order of a forget, a
            # turn and the memory workers (memory/forget.py): deleting chats first and
            # appending `retention.swept` after could deadlock with them.
            audit.serialise_appends(session)
            # Ids are never reused (AUTOINCREMENT on SQLite, sequences on PostgreSQL), so
            # deleting the newest rows cannot hide new ones from cursors or the vector index.
            query = select(AuditLog.id).where(AuditLog.created_at < cutoff)
            ids = list(
                session.scalars(
                    query.order_by(AuditLog.created_at, AuditLog.id).limit(self.batch_size)
                )
            )
            if not ids:
                return 0
            episode_ids = list(
                session.scalars(
                    select(EpisodeSummary.id).where(EpisodeSummary.audit_log_id.in_(ids))
                )
            )
            chunk_ids = list(
                session.scalars(select(SemanticChunk.id).where(SemanticChunk.audit_log_id.in_(ids)))
            )
            # the chats' memories go with them (ON DELETE CASCADE); their vectors' ids, for the
            # dated memories' index below
            memory_ids = list(
                session.scalars(select(Memory.id).where(Memory.source_audit_id.in_(ids)))
            )
            facts_unlinked = session.scalar(
                select(func.count()).select_from(Fact).where(Fact.source_audit_id.in_(ids))
            )
            by_type = dict(
                session.execute(
                    select(AuditLog.event_type, func.count())
                    .where(AuditLog.id.in_(ids))
                    .group_by(AuditLog.event_type)
                ).all()
            )
            # SQLite's window word index is contentless: its rows are removed by hand, from the
            # chats, before they go (memory/engine/window_keywords.py).
            conversation_ids = [
                int(i)
                for i in session.scalars(
                    select(AuditLog.subject_id)
                    .where(
                        AuditLog.id.in_(ids),
                        AuditLog.event_type.in_((audit.CHAT_COMPLETED, audit.CHAT_FAILED)),
                        AuditLog.subject_id.is_not(None),
                    )
                    .distinct()
                )
                if i is not None
            ]
            window_keywords.forget_windows(self.services.episodes.backend, session, episode_ids)
            session.execute(delete(AuditLog).where(AuditLog.id.in_(ids)))
            conversations_swept = _drop_emptied(session, conversation_ids)
            self.audit.append(
                Scope(self.services.owner_id(), session),
                audit.RETENTION_SWEPT,
                {
                    "audit_rows": len(ids),
                    "episodes": len(episode_ids),
                    "chunks": len(chunk_ids),
                    "facts_unlinked": int(facts_unlinked or 0),
                    "conversations": conversations_swept,
                    "by_event_type": {str(k): int(v) for k, v in sorted(by_type.items())},
                    "cutoff": cutoff.isoformat(),
                    "ttl_days": self.services.settings.retention.ttl_days,
                },
                # the server's own sweep, for everyone
            )
        # This process's indexes drop them now; other processes find them missing on search.
        self.services.episodes.forget(episode_ids)
        self.services.episodes.said.forget(memory_ids)
        self.services.semantic.forget(chunk_ids)
        return len(ids)


def _drop_emptied(session: Any, conversation_ids: list[int]) -> int:
    """Delete the conversations none of whose chats is left (their episode went with the chat
    it was written from); returns how many."""
    if not conversation_ids:
        return 0
    left = select(AuditLog.id).where(
        AuditLog.subject_id == Conversation.id,
        AuditLog.event_type.in_((audit.CHAT_COMPLETED, audit.CHAT_FAILED)),
    )
    result = session.execute(
        delete(Conversation).where(Conversation.id.in_(conversation_ids), ~left.exists())
    )
    return int(result.rowcount or 0)
