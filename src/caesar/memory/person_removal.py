"""Removing a person with their memory (issue #23): `caesar people remove NAME`.

What a person leaves goes with them, as a forget takes a conversation (memory/forget.py):
first every conversation of theirs is forgotten through `forget` itself (chat rows, episodes
with their window words, semantic chunks, the facts they taught, the rows about them, the
values they taught cut out of the rows that remain); then, in one write transaction, whatever
else is theirs (the facts they set by hand, their audit rows, any episode or chunk left), and
the person and their token (`people.remove`, whose `person.removed` row is the owner's).
Their vectors leave this process's indexes; on SQLite the full-text indexes are merged and the
WAL checkpointed, as a forget does, so nothing of theirs is left readable in the file.

The owner's rows about them (`person.added`, `renamed`, `rotated`, `removed`: their id and
name) stay: the owner's record of managing people.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select, update

from caesar import audit, people
from caesar.db.models import (
    AuditLog,
    Conversation,
    EpisodeSummary,
    Fact,
    Memory,
    SemanticChunk,
)
from caesar.errors import InputError
from caesar.memory.engine import upkeep, window_keywords
from caesar.memory.forget import ForgetRequest, forget

if TYPE_CHECKING:
    from caesar.container import Container

log = logging.getLogger(__name__)
_EVERYTHING_BEFORE = datetime(9999, 1, 1)


@dataclass(frozen=True)
class Removed:
    name: str
    conversations: int  # forgotten through `forget`
    episodes: int  # every episode of theirs, those forgotten with a conversation included
    facts: int
    audit_rows: int  # their own rows left after the forget

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def remove_person(services: Container, name: str) -> Removed:
    """Forget everything of `name`'s, then remove them and their token. The owner cannot be
    removed (an InputError, before anything is forgotten)."""
    with services.db.read() as session:
        person = people.named(session, name)
        who, shown, is_owner = person.id, person.name, person.is_owner
    if is_owner:
        raise InputError(
            f"{shown!r} is the owner and cannot be removed; the owner manages the others"
        )
    forgot = forget(services, ForgetRequest(before=_EVERYTHING_BEFORE, person=who))
    with services.db.write() as session:
        audit.serialise_appends(session)

        def theirs(model: Any) -> list[int]:
            return [int(i) for i in session.scalars(select(model.id).where(model.person_id == who))]

        episodes, chunks = theirs(EpisodeSummary), theirs(SemanticChunk)
        facts, rows = theirs(Fact), theirs(AuditLog)
        # the window words first: on SQLite they are found again from the chats' text
        window_keywords.forget_windows(services.episodes.backend, session, episodes)
        # memories first: one may name another (superseded_by), and all name their chat
        session.execute(
            update(Memory)
            .where(Memory.person_id == who)
            .values(superseded_by=None, contradicts=None)
        )
        for model in (EpisodeSummary, SemanticChunk, Fact, Memory, Conversation, AuditLog):
            session.execute(delete(model).where(model.person_id == who))
        # On SQLite their full-text tables are dropped with them (memory/engine/sqlite.py);
        # on PostgreSQL their partial indexes after the commit.
        people.remove(session, services.audit, shown)
    services.episodes.forget(episodes)
    services.semantic.forget(chunks)
    upkeep.person_removed(services.db, who)
    removed = Removed(
        shown, len(forgot.conversation_ids), forgot.episodes + len(episodes), len(facts), len(rows)
    )
    log.info("removed %s with their memory: %s", shown, removed.as_json())
    return removed
