"""Forget (issue #13): a conversation the operator forgets is gone, as if it never happened.

One call, `forget(services, ForgetRequest(...))`, for every front end (the API, the CLI, the
dashboard, MCP). It takes conversations by id, or by a filter: last turn before a date, and/or
any turn containing a text. In one write transaction it deletes

- the conversations' chat rows (`chat.completed`, `chat.failed`);
- everything derived from them: the episode (and, on SQLite, its window words by hand — that
  index is contentless), semantic chunks, the facts they taught (a fact the operator set or
  edited by hand since is the operator's and stays), the standing statements said in them
  (memory/standing: a statement they replaced holds again), and every audit row about them
  (summarised / skipped / failed, recalled — which quote excerpts —, extracted / updated /
  conflict, indexed, extract failed);
- the conversation rows;

cuts the values they taught out of the rows about those facts that are not about them (the
operator's later delete or edit of a fact, another chat's update of it: "[forgotten]"), and
appends one `memory.forgotten` row with ids and counts, never content (a search text is
recorded as "a search", not as what was searched). Then this process's vector indexes drop the
rows; other processes find them missing on their next search.

On SQLite the freed pages are zeroed (`PRAGMA secure_delete`, set on every connection), the
full-text indexes are merged (`optimize`) so no segment keeps a deleted word, and the WAL is
checkpointed into the file and truncated, so no copy of an old page is left behind. On
PostgreSQL the rows are gone from every table at commit; their dead tuples stay on disk until
VACUUM reuses the space (`VACUUM FULL` rewrites the tables, and locks them meanwhile).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from caesar import audit
from caesar.db.models import (
    AuditLog,
    Conversation,
    EpisodeSummary,
    Fact,
    Memory,
    SemanticChunk,
)
from caesar.errors import InputError, NotFound
from caesar.memory import conversations
from caesar.memory.engine import upkeep, window_keywords
from caesar.memory.facts.store import normalise_key
from caesar.memory.scope import Scope
from caesar.memory.transcript import conversation_turns

if TYPE_CHECKING:
    from caesar.container import Container

log = logging.getLogger(__name__)

CHAT_EVENTS = (audit.CHAT_COMPLETED, audit.CHAT_FAILED)
# Rows about a chat whose `subject_id` is the chat's audit id: derived, so forgotten with it.
DERIVED_EVENTS = (
    audit.EPISODE_SUMMARISED,
    audit.EPISODE_SUMMARISE_SKIPPED,
    audit.EPISODE_SUMMARISE_FAILED,
    audit.EPISODE_RECALLED,
    audit.FACT_EXTRACTED,
    audit.FACT_UPDATED,
    audit.FACT_CONFLICT,
    audit.EXTRACT_FAILED,
    audit.MEMORY_LEARNED,
    audit.MEMORY_SAID,
    audit.MEMORY_SUPERSEDED,
    audit.MEMORY_USER_EDITED,
    audit.SEMANTIC_INDEXED,
    audit.SEMANTIC_INDEX_FAILED,
)
_SCAN_BATCH = 500
FORGOTTEN = "[forgotten]"  # what a value learned from a forgotten conversation becomes
MAX_MATCHING_CHARS = 1000


@dataclass(frozen=True)
class ForgetRequest:
    """Which conversations: `conversation_ids`, and/or all whose last turn is before `before`,
    and/or all with a turn containing `matching` (case-insensitive). Filters combine with AND;
    ids are added to what they select. At least one must be given."""

    conversation_ids: Sequence[int] = ()
    before: datetime | None = None
    matching: str | None = None
    # whose: a forget reaches this person's conversations alone (another's id is not found)
    person: int = field(kw_only=True)

    def check(self) -> None:
        if not self.conversation_ids and self.before is None and not self.matching:
            raise InputError("say what to forget: conversation ids, before a date, or matching")
        if self.matching is not None and not self.matching.strip():
            raise InputError("matching: give some text to search for")
        if self.matching is not None and len(self.matching) > MAX_MATCHING_CHARS:
            raise InputError(f"matching: at most {MAX_MATCHING_CHARS} characters")

    def as_audit(self) -> dict[str, Any]:
        """The request as the audit row records it: no content."""
        return {
            "by_id": len(self.conversation_ids),
            "before": self.before.isoformat() if self.before else None,
            "matching": "a search" if self.matching else None,
        }


@dataclass
class ForgetResult:
    conversation_ids: list[int] = field(default_factory=list)
    chat_rows: int = 0
    episodes: int = 0
    chunks: int = 0
    facts: int = 0
    memories: int = 0  # standing statements said in them (memory/standing)
    derived_audit_rows: int = 0
    # rows about a fact it taught that are not about the chats (the operator's delete of the
    # fact, another chat's update): the value cut out, the row kept
    scrubbed_audit_rows: int = 0
    audit_id: int | None = None  # the memory.forgotten row; None for a dry run or nothing
    dry_run: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"conversations": len(self.conversation_ids), **asdict(self)}


def _matches(payload: dict[str, Any], needle: str) -> bool:
    return any(needle in t["content"].casefold() for t in conversation_turns(payload)) or (
        needle in str(payload.get("partial_reply", "")).casefold()
    )


def select_conversations(session: Session, request: ForgetRequest) -> list[int]:
    """The ids of the conversations `request` names, ascending: its person's only."""
    request.check()
    mine = Conversation.person_id == request.person
    chosen: set[int] = set()
    if request.conversation_ids:
        wanted = sorted({int(i) for i in request.conversation_ids})
        found = set(
            _ids_in(
                session,
                lambda b: select(Conversation.id).where(Conversation.id.in_(b), mine),
                wanted,
            )
        )
        missing = [i for i in wanted if i not in found]
        if missing:
            raise NotFound(f"no conversation with id {', '.join(map(str, missing))}")
        chosen |= found
    if request.before is None and not request.matching:
        return sorted(chosen)
    query = select(Conversation.id).where(mine)
    if request.before is not None:
        query = query.where(Conversation.last_turn_at < request.before)
    candidates = set(session.scalars(query))
    if request.matching:
        needle = request.matching.casefold()
        hits: set[int] = set()
        # A scan, in batches: a search for what to forget is rare, and the JSON text of a
        # payload escapes non-ASCII, so SQL LIKE would miss "café".
        after = 0
        while True:
            rows = session.execute(
                select(AuditLog.id, AuditLog.subject_id, AuditLog.payload)
                .where(
                    AuditLog.event_type.in_(CHAT_EVENTS),
                    AuditLog.id > after,
                    AuditLog.person_id == request.person,
                )
                .order_by(AuditLog.id)
                .limit(_SCAN_BATCH)
            ).all()
            hits |= {int(c) for _, c, p in rows if c is not None and _matches(p, needle)}
            if len(rows) < _SCAN_BATCH:
                break
            after = int(rows[-1].id)
        candidates &= hits
    return sorted(chosen | candidates)


def _ids(session: Session, query: Any) -> list[int]:
    return [int(i) for i in session.scalars(query)]


_IN_BATCH = 1000  # PostgreSQL binds at most 65,535 parameters per statement


def _batches(ids: Sequence[int]) -> list[list[int]]:
    return [list(ids[i : i + _IN_BATCH]) for i in range(0, len(ids), _IN_BATCH)]


def _ids_in(session: Session, make: Any, ids: Sequence[int]) -> list[int]:
    """`make(batch)` is a select of ids over one batch of `ids`; all of them, in batches."""
    return [i for batch in _batches(ids) for i in _ids(session, make(batch))]


def _delete_in(session: Session, model: Any, ids: Sequence[int]) -> None:
    for batch in _batches(ids):
        session.execute(delete(model).where(model.id.in_(batch)))


def _scrub_values(scope: Scope, chats: Sequence[int]) -> int:
    """Values the forgotten chats taught also sit in rows about their fact that are not about
    the chats: the operator's later delete or edit of it (`value`, `old_value`), another
    chat's update of it (`old_value`). Those values are cut out of the rows; returns how many
    rows were changed."""
    session, person = scope.session, scope.person
    taught: dict[str, set[str]] = {}
    for batch in _batches(chats):
        for key, payload in session.execute(
            select(AuditLog.subject_key, AuditLog.payload).where(
                AuditLog.event_type.in_((audit.FACT_EXTRACTED, audit.FACT_UPDATED)),
                AuditLog.subject_id.in_(batch),
            )
        ):
            if key and isinstance(payload.get("value"), str):
                taught.setdefault(key, set()).add(payload["value"].casefold())
    changed = 0
    for key, values in taught.items():
        rows = session.execute(
            select(AuditLog.id, AuditLog.payload).where(
                AuditLog.subject_key == key,
                AuditLog.event_type.in_(
                    (audit.FACT_USER_DELETED, audit.FACT_USER_EDITED, audit.FACT_UPDATED)
                ),
                AuditLog.person_id == person,
            )
        ).all()
        for row_id, payload in rows:
            clean = {
                k: (FORGOTTEN if k in ("value", "old_value") and str(v).casefold() in values else v)
                for k, v in payload.items()
            }
            if clean != payload:
                session.execute(update(AuditLog).where(AuditLog.id == row_id).values(payload=clean))
                changed += 1
    return changed


def forget(services: Container, request: ForgetRequest, *, dry_run: bool = False) -> ForgetResult:
    """Forget the conversations `request` names (see the module docstring). `dry_run`: count
    what would go, change nothing."""
    removed_episodes: list[int] = []
    removed_chunks: list[int] = []
    removed_memories: list[int] = []
    with services.db.write() as session:
        # PostgreSQL: the append lock first, as every writer of memory takes it first (a turn
        # before it finds its conversation, the workers before they check their chats are
        # there): what they committed is read below, and nothing they learn from these chats
        # can commit between the reads and the deletes. SQLite's write lock already does.
        audit.serialise_appends(session)
        result = ForgetResult(select_conversations(session, request), dry_run=dry_run)
        conversations = result.conversation_ids
        chats = _ids_in(
            session,
            lambda b: select(AuditLog.id).where(
                AuditLog.event_type.in_(CHAT_EVENTS), AuditLog.subject_id.in_(b)
            ),
            conversations,
        )
        episodes = sorted(
            set(
                _ids_in(
                    session,
                    lambda b: select(EpisodeSummary.id).where(
                        EpisodeSummary.conversation_id.in_(b)
                    ),
                    conversations,
                )
                + _ids_in(
                    session,
                    lambda b: select(EpisodeSummary.id).where(EpisodeSummary.audit_log_id.in_(b)),
                    chats,
                )
            )
        )
        chunks = _ids_in(
            session,
            lambda b: select(SemanticChunk.id).where(SemanticChunk.audit_log_id.in_(b)),
            chats,
        )
        facts = _ids_in(
            session, lambda b: select(Fact.id).where(Fact.source_audit_id.in_(b)), chats
        )
        memories = _ids_in(
            session, lambda b: select(Memory.id).where(Memory.source_audit_id.in_(b)), chats
        )
        derived = _ids_in(
            session,
            lambda b: select(AuditLog.id).where(
                AuditLog.event_type.in_(DERIVED_EVENTS), AuditLog.subject_id.in_(b)
            ),
            chats,
        )
        # an episode is one with a summary: a trivial chat's empty row goes, uncounted, as the
        # episodes list never showed it
        told = _ids_in(
            session,
            lambda b: select(EpisodeSummary.id).where(
                EpisodeSummary.id.in_(b), EpisodeSummary.summary != ""
            ),
            episodes,
        )
        result.chat_rows, result.episodes, result.chunks = len(chats), len(told), len(chunks)
        result.facts, result.derived_audit_rows = len(facts), len(derived)
        result.memories = len(memories)
        if dry_run or not conversations:
            return result
        # The window words first: on SQLite they are found again from the chats' text.
        for batch in _batches(episodes):
            window_keywords.forget_windows(services.episodes.backend, session, batch)
        result.scrubbed_audit_rows = _scrub_values(Scope(request.person, session), chats)
        _delete_in(session, EpisodeSummary, episodes)
        _delete_in(session, SemanticChunk, chunks)
        _delete_in(session, Fact, facts)
        _delete_in(session, Memory, memories)
        _delete_in(session, AuditLog, derived)
        _delete_in(session, Conversation, conversations)
        _delete_in(session, AuditLog, chats)
        row = services.audit.append(
            Scope(request.person, session),
            audit.MEMORY_FORGOTTEN,
            {**result.as_json(), "request": request.as_audit()},
        )
        result.audit_id = row.id
        removed_episodes, removed_chunks, removed_memories = episodes, chunks, memories
        upkeep.compact_words(Scope(request.person, session))
    services.episodes.forget(removed_episodes)
    services.episodes.said.forget(removed_memories)  # the dated memories' vectors
    services.semantic.forget(removed_chunks)
    upkeep.after_forget(services.db)
    log.info(
        "forgot %d conversation(s): %d chat rows, %d episodes, %d facts",
        len(result.conversation_ids),
        result.chat_rows,
        result.episodes,
        result.facts,
    )
    return result


def existing_conversations(scope: Scope, ids: Sequence[int]) -> list[int]:
    """Those of `ids` that are `person`'s and still there (not forgotten or swept since)."""
    session, person = scope.session, scope.person
    return sorted(
        _ids_in(
            session,
            lambda b: select(Conversation.id).where(
                Conversation.id.in_(b), Conversation.person_id == person
            ),
            ids,
        )
    )


def fact_sources(scope: Scope, key: str) -> list[int]:
    """The conversations `person`'s fact was learned from (its extracted / updated rows'
    chats)."""
    session, person = scope.session, scope.person
    chats = select(AuditLog.subject_id).where(
        AuditLog.event_type.in_((audit.FACT_EXTRACTED, audit.FACT_UPDATED)),
        AuditLog.subject_key == key,
        AuditLog.subject_id.is_not(None),
        AuditLog.person_id == person,
    )
    return _ids(
        session,
        select(AuditLog.subject_id)
        .where(
            AuditLog.event_type.in_(CHAT_EVENTS),
            AuditLog.id.in_(chats),
            AuditLog.subject_id.is_not(None),
        )
        .distinct()
        .order_by(AuditLog.subject_id),
    )


def delete_fact(
    services: Container, raw_key: str, *, scope: Scope, forget_sources: bool = False
) -> dict[str, Any]:
    """Delete a fact, naming the conversations it was learned from (`learned_from`): they
    still say it, and recall can bring it back. `forget_sources`: forget those still there
    too. The one way every front end deletes a fact (API, CLI, dashboard, MCP)."""
    person = scope.person
    key = normalise_key(raw_key)
    with services.db.read() as session:
        sources = fact_sources(Scope(person, session), key)
    audit_id = services.facts.delete(key, scope=scope)
    out: dict[str, Any] = {"deleted": key, "audit_id": audit_id, "learned_from": sources}
    if forget_sources and sources:
        with services.db.read() as session:  # one forgotten meanwhile is not there to forget
            still = existing_conversations(Scope(person, session), sources)
        if still:
            request = ForgetRequest(conversation_ids=still, person=person)
            out["forgotten"] = forget(services, request).as_json()
    return out


def listed(
    scope: Scope,
    *,
    before: datetime | None = None,
    matching: str | None = None,
    limit: int = 50,
) -> list[conversations.Listed]:
    """Conversations newest first; with `before` / `matching`, those a forget by that filter
    would take (so a front end can show them first)."""
    session, person = scope.session, scope.person
    ids = None
    if before is not None or matching:
        request = ForgetRequest(before=before, matching=matching, person=person)
        ids = select_conversations(session, request)
    return conversations.recent(scope, ids, limit)
