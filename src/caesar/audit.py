"""The append-only audit log: every event caesar produces is one row here.

Payloads pass through `redact` first: values under secret-looking keys (`api_key`,
`x-api-key`, `token`, `access_token`, `password`, `secret`, `authorization`) are replaced, and
any configured secret (API keys, the API token) is cut out of every string wherever it appears.
Counts that merely mention tokens (`prompt_tokens`, `max_tokens`) are data and stay. NUL
characters become U+FFFD: PostgreSQL's JSONB cannot store them, and the same payload must be
writable on both engines.

The reads every front end makes of the log are here too (`get`, `timeline`, `about`,
`subjects`, `types_of`, `recalled_in_turn`): the API, the dashboard, the CLI and the MCP
server reach the tables only through the stores (tests/test_layout.py).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple, cast

from sqlalchemy import Row, Table, Text, exists, func, insert, or_, select
from sqlalchemy import cast as sa_cast
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from caesar.clock import utcnow
from caesar.db.engine import transaction_lock
from caesar.db.models import AuditLog
from caesar.memory.episodes.listing import like_pattern
from caesar.memory.scope import Scope

CHAT_COMPLETED = "chat.completed"
CHAT_FAILED = "chat.failed"
# The model called a client's tools: a round of the turn, not yet its answer (issue #26).
CHAT_TOOL_CALLS = "chat.tool_calls"
# A client's background request (a title, tags): answered, never remembered (issue #26).
CHAT_BACKGROUND = "chat.background"
PROACTIVE_COMPLETED = "proactive.completed"
PROACTIVE_FAILED = "proactive.failed"
FACT_EXTRACTED = "memory.fact.extracted"
FACT_UPDATED = "memory.fact.updated"
FACT_USER_EDITED = "memory.fact.user_edited"
FACT_USER_DELETED = "memory.fact.user_deleted"
# an extraction that contradicts a value the operator set by hand: kept apart, not applied
FACT_CONFLICT = "memory.fact.conflict"
EXTRACT_FAILED = "memory.extract_failed"
# standing statements (issue #46): learned from a chat (subject_id: the chat), replaced by a
# newer one, edited or deleted by the person (subject_id: the memory's chat, when it has one)
MEMORY_LEARNED = "memory.learned"
MEMORY_SUPERSEDED = "memory.superseded"
MEMORY_USER_ADDED = "memory.user_added"
MEMORY_USER_EDITED = "memory.user_edited"
MEMORY_USER_DELETED = "memory.user_deleted"
# dated memories (issue #45) learned from a chat (subject_id: the chat): how many, never what
MEMORY_SAID = "memory.said"
EPISODE_SUMMARISED = "memory.episode.summarised"
EPISODE_SUMMARISE_SKIPPED = "memory.episode.summarise_skipped"
EPISODE_SUMMARISE_FAILED = "memory.episode.summarise_failed"
EPISODE_RECALLED = "memory.episode.recalled"
RECALL_FAILED = "memory.recall_failed"
SEMANTIC_INDEXED = "semantic.indexed"
SEMANTIC_INDEX_FAILED = "semantic.index_failed"
RETENTION_SWEPT = "retention.swept"
MCP_TOOL_CALLED = "mcp.tool_called"  # an MCP client called a tool: which, and what it touched
MEMORY_FORGOTTEN = "memory.forgotten"  # conversations the operator forgot: ids and counts
IMPORT_COMPLETED = (
    "import.completed"  # `caesar import` or the dashboard: a file, its counts, its rows
)
WORKER_CRASHED = "worker.crashed"
AUTH_LIMITED = "auth.limited"  # an address locked out after too many wrong API tokens
# People (caesar.people): who and what changed, never a token or its hash
PERSON_ADDED = "person.added"
PERSON_RENAMED = "person.renamed"
PERSON_ROTATED = "person.rotated"  # a new token; the old one no longer opens anything
PERSON_REMOVED = "person.removed"
PERSON_LINKED = "person.linked"  # the trusted front-end's user id for a person

# Conversations that memory workers learn from.
CONVERSATION_EVENTS = (CHAT_COMPLETED,)

REDACTED = "[redacted]"
# A whole key or its last `_`/`-` separated part; `prompt_tokens` is a count, not a secret.
_SECRET_KEY = re.compile(
    r"(?:^|[_-])(?:api[_-]?key|token|secret|password|passwd|authorization|bearer|cookie)$",
    re.IGNORECASE,
)
NUL_REPLACEMENT = "\ufffd"
# Values with nothing to redact (exactly these types: a subclass goes the long way).
_PLAIN = frozenset({int, float, bool, type(None)})


@functools.lru_cache(maxsize=4096)
def _secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def is_secret_key(key: object) -> bool:
    """Whether a payload key names a secret (remembered: payloads repeat their keys)."""
    return _secret_key(str(key))


class AuditEntry(NamedTuple):
    """One row for `Audit.append_many`: the arguments `Audit.append` takes."""

    event_type: str
    payload: dict[str, Any]
    subject_id: int | None = None
    subject_key: str | None = None
    created_at: datetime | None = None


# Ids come back in the order the rows were given, on every engine (SQLAlchemy guarantees it,
# running one INSERT per row where a backend cannot correlate a batch's RETURNING rows).
_AUDIT_TABLE = cast(Table, AuditLog.__table__)
_INSERT_RETURNING_ID = insert(_AUDIT_TABLE).returning(
    _AUDIT_TABLE.c.id, sort_by_parameter_order=True
)


class Audit:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first so a secret containing another is cut whole.
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def redact(self, value: Any) -> Any:
        """`value` with every configured secret cut out of its strings (keys included), the
        value of a key that names a secret replaced whole, and NULs replaced. A chat turn
        redacts up to 1 + top_k payloads, so the common cases are tested first."""
        if type(value) in _PLAIN:
            return value
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, dict):
            return {
                self._text(str(k)): (
                    REDACTED
                    if v and is_secret_key(k) and not isinstance(v, bool | int | float)
                    else self.redact(v)
                )
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.redact(v) for v in value]
        return value

    def _text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value.replace("\x00", NUL_REPLACEMENT) if "\x00" in value else value

    def append(
        self,
        scope: Scope,
        event_type: str,
        payload: dict[str, Any],
        *,
        subject_id: int | None = None,
        subject_key: str | None = None,
        created_at: datetime | None = None,
    ) -> AuditLog:
        """One row, recording who acted (`person`: whose chat, fact or forget it is; the
        owner for what the server does of itself)."""
        session, person = scope.session, scope.person
        _serialise_appends(session)
        row = AuditLog(
            event_type=event_type,
            created_at=created_at or utcnow(),
            payload=self.redact(payload),
            subject_id=subject_id,
            subject_key=subject_key,
            person_id=person,
        )
        session.add(row)
        session.flush()
        return row

    def append_many(self, scope: Scope, entries: Sequence[AuditEntry]) -> list[int]:
        """`append` for several rows of one person's at once: their ids, in the order given (ids grow in that
        order too). A chat turn appends up to 1 + top_k rows, and a core INSERT costs a
        fraction of the ORM flush `append` pays per row. The rows are inserted directly, not
        added to the session as objects (nothing here flushes it); on PostgreSQL the same
        advisory lock as `append` is taken first."""
        session, person = scope.session, scope.person
        if not entries:
            return []
        _serialise_appends(session)
        now = utcnow()
        rows = [
            {
                "event_type": entry.event_type,
                "created_at": entry.created_at or now,
                "payload": self.redact(entry.payload),
                "subject_id": entry.subject_id,
                "subject_key": entry.subject_key,
                "person_id": person,
            }
            for entry in entries
        ]
        return [int(i) for i in session.execute(_INSERT_RETURNING_ID, rows).scalars()]


# Any constant will do: it names the one lock that orders audit appends on PostgreSQL.
_APPEND_LOCK_KEY = 0x0CAE5A4


def serialise_appends(session: Session) -> None:
    """Take the append lock now (PostgreSQL), before any row lock. The one lock order of
    caesar's writers: a transaction that will lock or delete chat, conversation, episode or
    fact rows and also append takes this first — a chat turn (before it finds its
    conversation), a forget, retention's sweep, the summariser and every CursorWorker (before
    they check their chats are still there). A writer that locks rows and only then appends can
    deadlock with any of them; a forget relies on it to see everything they commit (memory/
    forget.py). No-op on SQLite, whose write transactions are one at a time already."""
    _serialise_appends(session)


def _serialise_appends(session: Session) -> None:
    """Workers follow the log with a cursor (`id > last`), which is only safe if ids become
    visible in order. SQLite has one writer, so they do. On PostgreSQL two transactions can
    take ids 7 and 8 and commit 8 first; a worker reading then would move its cursor past 7
    for good. So on PostgreSQL every transaction that appends takes one transaction-scoped
    advisory lock first: ids are drawn, and committed, one transaction at a time."""
    transaction = session.get_transaction()
    if transaction is None or session.info.get("_audit_lock") is transaction:
        return
    transaction_lock(session, _APPEND_LOCK_KEY)
    session.info["_audit_lock"] = transaction


def list_events(
    scope: Scope,
    *,
    event_type: str | None = None,
    after_id: int = 0,
    before_id: int | None = None,
    limit: int = 100,
    newest_first: bool = False,
) -> Sequence[AuditLog]:
    """`person`'s rows (those they acted in) after `after_id`."""
    session, person = scope.session, scope.person
    query = select(AuditLog).where(AuditLog.id > after_id, AuditLog.person_id == person)
    if event_type:
        query = query.where(AuditLog.event_type == event_type)
    if before_id is not None:
        query = query.where(AuditLog.id < before_id)
    query = query.order_by(AuditLog.id.desc() if newest_first else AuditLog.id).limit(limit)
    return session.scalars(query).all()


def event_types(scope: Scope) -> list[str]:
    session, person = scope.session, scope.person
    return list(
        session.scalars(
            select(AuditLog.event_type)
            .where(AuditLog.person_id == person)
            .distinct()
            .order_by(AuditLog.event_type)
        )
    )


def count_by_subject_key(scope: Scope, event_type: str) -> dict[str, int]:
    """Indexed aggregate (event_type, subject_key) of `person`'s rows: e.g. their edits per
    fact key."""
    session, person = scope.session, scope.person
    rows = session.execute(
        select(AuditLog.subject_key, func.count())
        .where(
            AuditLog.event_type == event_type,
            AuditLog.subject_key.is_not(None),
            AuditLog.person_id == person,
        )
        .group_by(AuditLog.subject_key)
    )
    return {str(key): int(count) for key, count in rows}


def get(scope: Scope, audit_id: int | None) -> AuditLog | None:
    """`person`'s row `audit_id`; None when they have none such (another person's row is not
    found, as none is), or `audit_id` is None."""
    session, person = scope.session, scope.person
    if not audit_id:
        return None
    row = session.get(AuditLog, audit_id)
    return row if row is not None and row.person_id == person else None


def subjects(scope: Scope, ids: Iterable[int]) -> dict[int, int | None]:
    """row id → its `subject_id` (a chat row's conversation), for those of `ids` still there
    and `person`'s."""
    session, person = scope.session, scope.person
    wanted = list(set(ids))
    if not wanted:
        return {}
    rows = session.execute(
        select(AuditLog.id, AuditLog.subject_id).where(
            AuditLog.id.in_(wanted), AuditLog.person_id == person
        )
    )
    return {int(i): (int(s) if s is not None else None) for i, s in rows}


def types_of(scope: Scope, ids: Iterable[int]) -> dict[int, str]:
    """row id → its event type, for those of `ids` still there (not swept by retention) and
    `person`'s."""
    session, person = scope.session, scope.person
    wanted = list(set(ids))
    if not wanted:
        return {}
    rows = session.execute(
        select(AuditLog.id, AuditLog.event_type).where(
            AuditLog.id.in_(wanted), AuditLog.person_id == person
        )
    )
    return {int(i): str(t) for i, t in rows}


def about(
    scope: Scope, subject_id: int, event_types: Sequence[str]
) -> Sequence[Row[int, str, datetime, str | None]]:
    """(id, event_type, created_at, subject_key) of `person`'s rows of `event_types` about row
    `subject_id` (their `subject_id`), oldest first: what came of a chat."""
    session, person = scope.session, scope.person
    return session.execute(
        select(AuditLog.id, AuditLog.event_type, AuditLog.created_at, AuditLog.subject_key)
        .where(
            AuditLog.event_type.in_(event_types),
            AuditLog.subject_id == subject_id,
            AuditLog.person_id == person,
        )
        .order_by(AuditLog.id)
    ).all()


# A turn's memory.episode.recalled rows are written in its transaction, right after it.
_RECALLED_SPAN = 200


def recalled_in_turn(scope: Scope, turn_id: int) -> list[dict[str, Any]]:
    """The payloads of `person`'s memory.episode.recalled rows that name turn `turn_id`, read
    from just after it, in order."""
    session, person = scope.session, scope.person
    found = session.execute(
        select(AuditLog.payload)
        .where(
            AuditLog.event_type == EPISODE_RECALLED,
            AuditLog.id > turn_id,
            AuditLog.id <= turn_id + _RECALLED_SPAN,
            AuditLog.person_id == person,
        )
        .order_by(AuditLog.id)
    ).scalars()
    return [p for p in found if isinstance(p, dict) and p.get("turn_audit_id") == turn_id]


class TimelinePage(NamedTuple):
    rows: list[AuditLog]
    has_newer: bool
    has_older: bool


def _spellings(text: str) -> set[str]:
    """How `text` can appear in a payload's JSON text: as typed; JSON-escaped with non-ASCII
    as `\\uXXXX` (SQLite stores what `json.dumps` writes); JSON-escaped with non-ASCII kept
    (PostgreSQL's JSONB prints quotes and backslashes escaped, and the rest as it is)."""
    return {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}


def timeline(
    scope: Scope,
    *,
    event_type: str | None = None,
    search: str | None = None,
    before_id: int | None = None,
    after_id: int | None = None,
    limit: int = 100,
) -> TimelinePage:
    """One page of the log, newest first, keyset-paginated by id both ways (`before_id`: the
    page older than it; `after_id`: the page newer than it), and whether there are rows newer
    and older than the page. `search` matches, case-insensitively, a row's subject key or its
    payload's JSON text (no index: it scans, newest first, until the page is full). `person`'s
    rows only: the ones they acted in."""
    session, person = scope.session, scope.person
    matching: list[ColumnElement[bool]] = [AuditLog.person_id == person]
    if event_type:
        matching.append(AuditLog.event_type == event_type)
    if search and search.strip():
        needle = search.strip()
        payload = sa_cast(AuditLog.payload, Text)
        matching.append(
            or_(
                AuditLog.subject_key.ilike(like_pattern(needle), escape="\\"),
                *(payload.ilike(like_pattern(s), escape="\\") for s in _spellings(needle)),
            )
        )

    def beyond(condition: ColumnElement[bool]) -> bool:
        return bool(session.scalar(select(exists().where(*matching, condition))))

    query = select(AuditLog).where(*matching)
    if after_id is None:
        if before_id is not None:
            query = query.where(AuditLog.id < before_id)
        rows = list(session.scalars(query.order_by(AuditLog.id.desc()).limit(limit + 1)))
        has_older, rows = len(rows) > limit, rows[:limit]
        has_newer = before_id is not None and beyond(AuditLog.id >= before_id)
    else:
        query = query.where(AuditLog.id > after_id).order_by(AuditLog.id).limit(limit + 1)
        rows = list(session.scalars(query))
        has_newer, rows = len(rows) > limit, rows[:limit][::-1]
        has_older = beyond(AuditLog.id <= after_id)
    return TimelinePage(rows, has_newer, has_older)
