"""Which conversation a chat turn belongs to (issue #13): one conversation, one episode.

A client either names its conversation (`conversation_id` on `/v1/chat`, the
`X-Caesar-Conversation` header or a `conversation_id` body field on the OpenAI endpoint), or
resends the history with every turn, as the OpenAI protocol, `llm -c` and `caesar chat` do.
Then the history it sends is the conversation so far, which a completed turn's row recorded:
its `subject_key` is `turns_key(history + message + reply)`. A turn whose history hashes to
a conversation's latest turn continues it.

A history matching an older turn (an edited or regenerated message) forks: a new
conversation, with the shared beginning in its own transcript, so no branch is lost from
memory. Two conversations that opened identically each continue one of them: their
transcripts are the same up to there, so either does.

The hash is of user/assistant turns only, whitespace folded: caesar's system prompt and a
client's own system messages are not the conversation, and clients differ in how they trim a
reply they resend. Changing `turns_key` strands live conversations (they fork once); rows
already written keep their keys.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, NamedTuple, cast

from sqlalchemy import Table, and_, bindparam, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from caesar import audit
from caesar.clock import utcnow
from caesar.db.models import AuditLog, Conversation, EpisodeSummary
from caesar.gateway.base import Message
from caesar.memory.engine.sql import person_checked
from caesar.memory.scope import Scope
from caesar.memory.transcript import conversation_turns, is_temporary

KEY_PREFIX = "t:"
MAX_KEY_CHARS = 200  # conversations.key


def turns_key(turns: Sequence[Message]) -> str:
    """The hash a completed turn's row is found by: of its conversation up to its reply."""
    spoken = [
        [t["role"], " ".join(str(t.get("content", "")).split())]
        for t in turns
        if t.get("role") in ("user", "assistant")
    ]
    digest = hashlib.sha256(json.dumps(spoken, ensure_ascii=False).encode()).hexdigest()
    return KEY_PREFIX + digest[:32]


class Ref(NamedTuple):
    """A conversation as a turn needs it: its id (the chat row's subject_id) and key."""

    id: int
    key: str


# Core statements, built once: every chat turn runs them (an ORM entity load, insert and
# bulk update cost ~3 ms a turn more on a 2-core host, measured).
_TABLE = cast(Table, Conversation.__table__)
_AUDIT = cast(Table, AuditLog.__table__)
# Every statement names the person: a key, or a history, is only ever one person's.
_BY_KEY = select(_TABLE.c.id, _TABLE.c.key).where(
    _TABLE.c.key == bindparam("key"), _TABLE.c.person_id == bindparam("person")
)
_BY_TIP = (
    select(_TABLE.c.id, _TABLE.c.key)
    .join(_AUDIT, _AUDIT.c.id == _TABLE.c.tip_audit_id)
    .where(
        _AUDIT.c.event_type == audit.CHAT_COMPLETED,
        _AUDIT.c.subject_key == bindparam("tip"),
        _TABLE.c.person_id == bindparam("person"),
    )
    .order_by(_TABLE.c.id.desc())
    .limit(1)
)
_INSERT = insert(_TABLE).returning(_TABLE.c.id)
_INSERT_MANY = insert(_TABLE).returning(_TABLE.c.id, sort_by_parameter_order=True)
_TURN = (
    update(_TABLE)
    .where(_TABLE.c.id == bindparam("conversation"))
    .values(
        tip_audit_id=bindparam("tip"),
        last_turn_at=bindparam("at"),
        touched_at=bindparam("touched"),
        turns=_TABLE.c.turns + 1,
    )
)


def _new(scope: Scope, key: str, now: datetime) -> Ref:
    session, person = scope.session, scope.person
    values = {
        "key": key,
        "started_at": now,
        "last_turn_at": now,
        "touched_at": utcnow(),
        "person_id": person,
    }
    new_id = session.execute(_INSERT, {**values, "turns": 0, "summarised_audit_id": 0}).scalar_one()
    return Ref(int(new_id), key)


def key_for(scope: Scope, history: Sequence[Message]) -> str:
    """The key a turn sending `history` (and no name) will be recorded under, decided before
    it runs: the conversation `history` continues, or a new key. A streamed reply sends its
    headers before the turn is written, so it names the conversation this way (and the turn is
    then named by it, which resolves to the same conversation)."""
    found = _continued(scope, history)
    return found.key if found else uuid.uuid4().hex


def _spoken(history: Sequence[Message]) -> bool:
    """Whether `history` holds a turn of the conversation (not only system messages)."""
    return any(t.get("role") in ("user", "assistant") for t in history)


def _continued(scope: Scope, history: Sequence[Message]) -> Ref | None:
    """`person`'s conversation whose latest answered turn `history` is, if any."""
    session, person = scope.session, scope.person
    if not _spoken(history):
        return None
    row = session.execute(_BY_TIP, {"tip": turns_key(history), "person": person}).first()
    return Ref(int(row.id), str(row.key)) if row else None


def resolve(
    scope: Scope, history: Sequence[Message], now: datetime, named: str | None = None
) -> Ref:
    """`person`'s conversation a turn belongs to, created if new, in the caller's write
    transaction. `named`: the client's own conversation id, which wins over the history."""
    session, person = scope.session, scope.person
    if named is not None:
        found = session.execute(_BY_KEY, {"key": named, "person": person}).first()
        if found is not None:
            return Ref(int(found.id), str(found.key))
        try:
            # Two first turns of one named conversation at once (PostgreSQL: nothing orders
            # them): the second insert fails on the unique key, and finds the first's row.
            with session.begin_nested():
                return _new(scope, named, now)
        except IntegrityError:
            row = session.execute(_BY_KEY, {"key": named, "person": person}).one()
            return Ref(int(row.id), str(row.key))
    return _continued(scope, history) or _new(scope, uuid.uuid4().hex, now)


def record_turn(
    session: Session,
    conversation: Ref,
    turn_id: int,
    now: datetime,
    touched_at: datetime | None = None,
) -> None:
    """An answered turn is the conversation's new tip (a failed one changes nothing)."""
    session.execute(
        _TURN,
        {
            "conversation": conversation.id,
            "tip": turn_id,
            "at": now,
            "touched": touched_at or utcnow(),
        },
    )


def add_finished(
    scope: Scope,
    audit_log: audit.Audit,
    payload: dict[str, Any],
    created_at: datetime,
    *,
    key: str | None = None,
    subject_key: str | None = None,
    last_turn_at: datetime | None = None,
) -> int:
    """A whole past conversation in one `chat.completed` row (`caesar import`): a conversation
    of its own, over already, so the summariser need not wait for it to go quiet. Returns the
    row's id. `subject_key`: the row's (the importer's key), else its `turns_key`;
    `last_turn_at`: when its last turn was said, if later than `created_at`."""
    subject_key = subject_key or turns_key(conversation_turns(payload))
    finished = Finished(payload, created_at, subject_key, last_turn_at, key)
    return add_finished_many(scope, audit_log, [finished])[0]


class Finished(NamedTuple):
    """One past conversation for `add_finished_many`: the arguments `add_finished` takes."""

    payload: dict[str, Any]
    created_at: datetime
    subject_key: str
    last_turn_at: datetime | None = None
    key: str | None = None  # the conversation's; None: one made up


def add_finished_many(
    scope: Scope, audit_log: audit.Audit, conversations: Sequence[Finished]
) -> list[int]:
    """`add_finished` for many past conversations at once, in the order given: their rows'
    ids. Three statements for all of them (their conversations, their rows, their tips), not
    three each: on PostgreSQL each is a round trip (`caesar import`, docs/import.md)."""
    if not conversations:
        return []
    session, person = scope.session, scope.person
    audit.serialise_appends(session)
    now = utcnow()
    found = session.execute(
        _INSERT_MANY,
        [
            {
                "key": c.key or uuid.uuid4().hex,
                "started_at": c.created_at,
                "last_turn_at": c.created_at,
                "touched_at": now,
                "person_id": person,
                "turns": 0,
                "summarised_audit_id": 0,
            }
            for c in conversations
        ],
    ).scalars()
    ids = [int(i) for i in found]
    rows = audit_log.append_many(
        scope,
        [
            audit.AuditEntry(
                audit.CHAT_COMPLETED,
                c.payload,
                subject_id=conversation,
                subject_key=c.subject_key,
                created_at=c.created_at,
            )
            for c, conversation in zip(conversations, ids, strict=True)
        ],
    )
    tips = []
    for c, conversation, row in zip(conversations, ids, rows, strict=True):
        last = max(c.created_at, c.last_turn_at or c.created_at)
        tips.append({"conversation": conversation, "tip": row, "at": last, "touched": last})
    session.execute(_TURN, tips)
    return rows


@dataclass(frozen=True)
class Listed:
    """A conversation as listed: its episode's summary (None before the summariser got to
    it) and how it opened, so one not yet summarised can be told apart too."""

    id: int
    key: str
    started_at: datetime
    last_turn_at: datetime
    turns: int
    summary: str | None
    opening: str

    def as_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "started_at": self.started_at.isoformat(),
            "last_turn_at": self.last_turn_at.isoformat(),
        }


OPENING_CHARS = 120


def recent(scope: Scope, ids: Sequence[int] | None = None, limit: int = 50) -> list[Listed]:
    """`person`'s conversations newest first (only `ids`, if given)."""
    session, person = scope.session, scope.person
    query = (
        select(Conversation, EpisodeSummary.summary, AuditLog.payload)
        .outerjoin(EpisodeSummary, EpisodeSummary.conversation_id == Conversation.id)
        .outerjoin(AuditLog, AuditLog.id == Conversation.tip_audit_id)
        .where(Conversation.person_id == person)
    )
    if ids is not None:
        query = query.where(Conversation.id.in_(list(ids)))
    rows = session.execute(
        query.order_by(Conversation.last_turn_at.desc(), Conversation.id.desc()).limit(limit)
    ).all()
    out = []
    for c, summary, payload in rows:
        said = [t["content"] for t in conversation_turns(payload or {}) if t["role"] == "user"]
        opening = " ".join(said[0].split())[:OPENING_CHARS] if said else ""
        out.append(Listed(c.id, c.key, c.started_at, c.last_turn_at, c.turns, summary, opening))
    return out


class Current(NamedTuple):
    """What tells a turn's own conversation: the client's name for it, or the key its latest
    answered turn was recorded under (`turns_key` of the history it sent)."""

    key: str | None = None
    tip: str | None = None

    @classmethod
    def of(cls, named: str | None, history: Sequence[Message]) -> Current:
        return cls(named, turns_key(history) if _spoken(history) else None)


# A turn with no conversation of its own to leave out (the recall preview)
NO_CURRENT = Current()


@dataclass(frozen=True)
class Unsummarised:
    """A conversation the summariser has not reached yet: its latest turn's row (which holds
    the whole conversation), when that turn was, and its turns."""

    tip_audit_id: int
    last_turn_at: datetime
    turns: list[Message]


# rows read per conversation wanted: the turn's own, temporary ones and those summarised once
# are skipped after the read
UNSUMMARISED_SPARE = 4


def unsummarised_within(
    scope: Scope,
    spans: Sequence[tuple[datetime, datetime]],
    *,
    current: Current = NO_CURRENT,
    limit: int,
) -> list[Unsummarised]:
    """`person`'s conversations never summarised yet (the summariser waits for them to go
    quiet) whose latest turn is within `spans` (start inclusive, end exclusive), newest first,
    at most `limit`; not `current`, the turn's own conversation, nor a temporary one. A
    conversation summarised before and continued since is not among them: its episode is
    recalled as it stands."""
    session, person = scope.session, scope.person
    if not spans:
        return []
    c = _TABLE.c
    rows = session.execute(
        select(
            c.key,
            c.tip_audit_id,
            c.last_turn_at,
            c.summarised_audit_id,
            _AUDIT.c.subject_key,
            _AUDIT.c.payload,
        )
        .join(_AUDIT, _AUDIT.c.id == c.tip_audit_id)
        .where(
            # the summariser's queue, by its partial index: a few rows, however many
            # conversations the person has (by the person's index SQLite read them all)
            c.tip_audit_id > c.summarised_audit_id,
            person_checked(c.person_id, Scope(person)),
            or_(*(and_(c.last_turn_at >= a, c.last_turn_at < b) for a, b in spans)),
        )
        .order_by(c.last_turn_at.desc(), c.id.desc())
        .limit(limit * UNSUMMARISED_SPARE)
    ).all()
    out = []
    for key, tip, last_turn_at, summarised, subject_key, payload in rows:
        if summarised:  # summarised once, continued since: its episode stands for it
            continue
        if (current.key is not None and key == current.key) or (
            current.tip is not None and subject_key == current.tip
        ):
            continue
        if is_temporary(payload or {}):  # never remembered: the summariser skips it too
            continue
        out.append(Unsummarised(int(tip), last_turn_at, conversation_turns(payload or {})))
    return out[:limit]


def key_of(scope: Scope, conversation_id: int) -> str | None:
    """A conversation's key (its client's name for it), None if `person` has no such one."""
    session, person = scope.session, scope.person
    key = session.scalar(
        select(Conversation.key).where(
            Conversation.id == conversation_id, Conversation.person_id == person
        )
    )
    return None if key is None else str(key)


def id_of(scope: Scope, key: str) -> int | None:
    """The id of `person`'s conversation named `key`, None if there is none."""
    session, person = scope.session, scope.person
    found = session.scalar(
        select(Conversation.id).where(Conversation.key == key, Conversation.person_id == person)
    )
    return None if found is None else int(found)


def turn_rows(scope: Scope, conversation_id: int) -> Sequence[AuditLog]:
    """A conversation's answered turns (its `chat.completed` rows), oldest first; none if it
    is not `person`'s."""
    session, person = scope.session, scope.person
    return session.scalars(
        select(AuditLog)
        .where(
            AuditLog.event_type == audit.CHAT_COMPLETED,
            AuditLog.subject_id == conversation_id,
            AuditLog.person_id == person,
        )
        .order_by(AuditLog.id)
    ).all()


def transcript_of(scope: Scope, named: str) -> list[Message] | None:
    """`person`'s named conversation's turns so far (its tip's row), for a client that sends
    the id and not the history; None for a conversation caesar has not seen of theirs."""
    return _transcript(scope, Conversation.key == named)


def transcript_by_id(scope: Scope, conversation_id: int) -> list[Message]:
    return _transcript(scope, Conversation.id == conversation_id) or []


def _transcript(scope: Scope, which: Any) -> list[Message] | None:
    session, person = scope.session, scope.person
    payload = session.scalar(
        select(AuditLog.payload)
        .join(Conversation, Conversation.tip_audit_id == AuditLog.id)
        .where(which, Conversation.person_id == person)
    )
    return None if payload is None else conversation_turns(payload)
