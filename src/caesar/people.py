"""People: who caesar remembers for (issue #23, docs/household.md).

A person has a name and a token. The token is shown once, when it is made (`add`, `rotate`);
caesar keeps only its SHA-256, so a copy of the database opens nothing. The owner is the
person migration 0008 created: their token is the `api_token` setting, never stored here, and
they cannot be removed. Every change is one audit row (`person.added` / `renamed` / `rotated`
/ `removed`) with the person's id and name, never a token or its hash.

A trusted front-end (`[people] frontend_token`) names its user in a header instead:
`frontend_person` finds them by `frontend_id`, or makes them on first sight with
`auto_create`. `link` gives a front-end id to someone else, the owner too: taken from a person
`auto_create` made who has no memory yet (the owner taking over their own Open WebUI login when
a one-person install becomes a household), refused from anyone who has.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from caesar import audit
from caesar.clock import utcnow
from caesar.db.models import (
    AuditLog,
    Conversation,
    EpisodeSummary,
    Fact,
    Memory,
    Person,
    SemanticChunk,
)
from caesar.errors import InputError, NotFound
from caesar.memory.scope import Scope

OWNER_NAME = "owner"  # what migration 0008 names the owner
MAX_NAME = 100
TOKEN_BYTES = 32  # 43 URL-safe characters


def normalise_name(raw: str) -> str:
    """A name as kept: runs of whitespace folded to one space, none at the ends; 1–100
    characters, no control characters. Anything else is an InputError, never rewritten."""
    name = " ".join(str(raw).split())
    if not name:
        raise InputError("a person's name must not be empty")
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise InputError("a person's name must not contain control characters")
    if len(name) > MAX_NAME:
        raise InputError(f"a person's name must be at most {MAX_NAME} characters")
    return name


def hash_token(token: str) -> str:
    """What is kept of a token: its SHA-256, hex. A token is 256 random bits, so a plain hash
    is enough (no salt or slow hash: there is no guessable password behind it)."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


@dataclass(frozen=True)
class Listed:
    """A person as `caesar people list` shows them: never a token, nor its hash."""

    id: int
    name: str
    is_owner: bool
    created_at: datetime
    has_token: bool  # the owner's: whether api_token is set
    frontend_id: str | None = None  # the trusted front-end's user id for them

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "is_owner": self.is_owner,
            "created_at": self.created_at.isoformat(),
            "has_token": self.has_token,
            "frontend_id": self.frontend_id,
        }


def everyone(session: Session, api_token: str | None = None) -> list[Listed]:
    """Everyone, the owner first, then in the order they were added."""
    rows = session.scalars(select(Person).order_by(Person.is_owner.desc(), Person.id))
    return [
        Listed(
            p.id,
            p.name,
            p.is_owner,
            p.created_at,
            bool(api_token) if p.is_owner else p.token_hash is not None,
            p.frontend_id,
        )
        for p in rows
    ]


def owner(session: Session) -> Person:
    found = session.scalar(select(Person).where(Person.is_owner.is_(True)))
    if found is None:  # migration 0008 creates the owner; nothing removes them
        raise NotFound("no owner: run `caesar db upgrade`")
    return found


def named(session: Session, name: str) -> Person:
    """The person called `name` (as typed, whitespace folded); NotFound names who there is."""
    wanted = normalise_name(name)
    found = session.scalar(select(Person).where(Person.name == wanted))
    if found is None:
        known = ", ".join(session.scalars(select(Person.name).order_by(Person.id)))
        raise NotFound(f"no person named {wanted!r} (there are: {known})")
    return found


def by_token(session: Session, token: str, api_token: str | None) -> Person | None:
    """The person whose token `token` is: the owner for `api_token`, else the person whose
    stored hash it matches; None for any other. Hashes are compared in constant time; the
    lookup by hash is indexed, which tells a timing observer nothing of the token itself."""
    if not token:
        return None
    digest = hash_token(token)
    if api_token and hmac.compare_digest(digest, hash_token(api_token)):
        return owner(session)
    found = session.scalar(select(Person).where(Person.token_hash == digest))
    if found is None or found.token_hash is None:
        return None
    return found if hmac.compare_digest(found.token_hash, digest) else None


MAX_FRONTEND_ID = 255


def frontend_person(
    session: Session,
    audit_log: audit.Audit,
    frontend_id: str,
    names: list[str | None],
    *,
    auto_create: bool,
) -> tuple[Person | None, bool]:
    """The person a trusted front-end's user header names (`frontend_id`), in the caller's
    write transaction, and whether this call made them (their search indexes are then the
    caller's to build, after the commit). Someone it has not named before is None, or with
    `auto_create` a new person with no token of their own, named by the first of `names` that
    makes a valid name (the front-end's display name, then the email, then the id), with
    " (2)", " (3)", … added if it is taken. One `person.added` row, via "frontend"."""
    frontend_id = frontend_id.strip()
    if not frontend_id or len(frontend_id) > MAX_FRONTEND_ID:
        raise InputError(f"a front-end user id must be 1–{MAX_FRONTEND_ID} characters")
    found = session.scalar(select(Person).where(Person.frontend_id == frontend_id))
    if found is not None or not auto_create:
        return found, False
    audit.serialise_appends(session)
    found = session.scalar(select(Person).where(Person.frontend_id == frontend_id))
    if found is not None:  # made meanwhile, by a request that took the lock first
        return found, False
    base = _first_valid_name([*names, frontend_id])
    name, n = base, 1
    while session.scalar(select(Person.id).where(Person.name == name)) is not None:
        n += 1
        suffix = f" ({n})"
        name = base[: MAX_NAME - len(suffix)] + suffix
    person = Person(
        name=name, token_hash=None, is_owner=False, created_at=utcnow(), frontend_id=frontend_id
    )
    session.add(person)
    _flush(session, name)
    _record(
        session,
        audit_log,
        audit.PERSON_ADDED,
        person,
        {"name": name, "via": "frontend", "frontend_id": frontend_id},
    )
    return person, True


# Everything that is a person's memory: a row in any of these makes them someone who has some
_THEIRS = (AuditLog, Conversation, EpisodeSummary, Fact, Memory, SemanticChunk)


def has_memory(scope: Scope) -> bool:
    """Whether anything is remembered for the scope's person: a chat, an episode, a fact, a
    statement, an audit row of their own."""
    return any(
        scope.session.scalar(select(model.id).where(model.person_id == scope.person).limit(1))
        is not None
        for model in _THEIRS
    )


@dataclass(frozen=True)
class Linked:
    name: str
    frontend_id: str
    taken_from: str | None  # the person who had the id (with no memory), else None


def link(session: Session, audit_log: audit.Audit, name: str, frontend_id: str) -> Linked:
    """Make `name` the person the front-end's user header `frontend_id` names (`caesar people
    link`): how someone added by hand, or the owner, is met through the front-end without
    `auto_create`. An id someone else has is taken from them when nothing is remembered for
    them (the person `auto_create` made at the front-end's first request, before anyone
    chatted), and that is said in the audit row; from someone with memory it is refused."""
    audit.serialise_appends(session)
    person = named(session, name)
    wanted = frontend_id.strip()
    if not wanted or len(wanted) > MAX_FRONTEND_ID:
        raise InputError(f"a front-end user id must be 1–{MAX_FRONTEND_ID} characters")
    taken = session.scalar(select(Person).where(Person.frontend_id == wanted))
    taken_from = None
    if taken is not None and taken.id != person.id:
        if has_memory(Scope(taken.id, session)):
            raise InputError(
                f"the front-end user id {wanted!r} is {taken.name!r}'s, who has memory of "
                f"their own (chats, facts): caesar cannot fold one person's memory into "
                f"another's. To give the id to {person.name!r}, remove {taken.name!r} with "
                f"their memory first (`caesar people remove {taken.name!r}`), then link again"
            )
        taken_from = taken.name
        taken.frontend_id = None
        session.flush()  # the id is unique: free it before it is given
    person.frontend_id = wanted
    session.flush()
    payload: dict[str, Any] = {"name": person.name, "frontend_id": wanted}
    if taken is not None and taken_from is not None:
        payload |= {"taken_from": taken_from, "taken_from_id": taken.id}
    _record(session, audit_log, audit.PERSON_LINKED, person, payload)
    return Linked(person.name, wanted, taken_from)


def _first_valid_name(candidates: list[str | None]) -> str:
    for raw in candidates:
        if raw is None:
            continue
        try:
            return normalise_name(raw)
        except InputError:
            folded = " ".join(str(raw).split())
            if folded and not any(unicodedata.category(ch) == "Cc" for ch in folded):
                return folded[:MAX_NAME]  # too long: cut, rather than refuse a front-end user
    return "front-end user"


def session_stamp(scope: Scope) -> str | None:
    """What a dashboard session of the scope's person is bound to: None once they are removed,
    and a new value once their token is rotated, so either ends their sessions. The owner's is
    constant: their token is `api_token`, whose change changes the session key itself."""
    person = scope.session.get(Person, scope.person)
    if person is None:
        return None
    if person.is_owner:
        return "owner"
    return hashlib.sha256(f"session:{person.token_hash}".encode()).hexdigest()[:16]


def _refuse_taken(session: Session, name: str) -> None:
    if session.scalar(select(Person.id).where(Person.name == name)) is not None:
        raise InputError(f"there is already a person named {name!r}")


def _flush(session: Session, name: str) -> None:
    """Write now, so that a name taken meanwhile (another process) is this error, not a
    failed commit."""
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError:
        raise InputError(f"there is already a person named {name!r}") from None


def add(session: Session, audit_log: audit.Audit, raw_name: str) -> tuple[Person, str]:
    """A new person, in the caller's write transaction: (the person, their token). The token
    is returned here and nowhere else, ever."""
    name = normalise_name(raw_name)
    audit.serialise_appends(session)
    _refuse_taken(session, name)
    token = new_token()
    person = Person(name=name, token_hash=hash_token(token), is_owner=False, created_at=utcnow())
    session.add(person)
    _flush(session, name)
    _record(session, audit_log, audit.PERSON_ADDED, person, {"name": name})
    return person, token


def rename(session: Session, audit_log: audit.Audit, old: str, new: str) -> Person:
    audit.serialise_appends(session)
    person = named(session, old)
    name = normalise_name(new)
    if name == person.name:
        raise InputError(f"{person.name!r} is already called that")
    _refuse_taken(session, name)
    was, person.name = person.name, name
    _flush(session, name)
    _record(session, audit_log, audit.PERSON_RENAMED, person, {"from": was, "to": name})
    return person


def rotate(session: Session, audit_log: audit.Audit, name: str) -> tuple[Person, str]:
    """A new token for `name`; the old one stops working at commit. The owner's token is the
    `api_token` setting: changed there, not here."""
    audit.serialise_appends(session)
    person = named(session, name)
    if person.is_owner:
        raise InputError(
            f"{person.name!r} is the owner, whose token is the api_token setting "
            "(CAESAR_API_TOKEN): change it there and restart caesar"
        )
    token = new_token()
    person.token_hash = hash_token(token)
    session.flush()
    _record(session, audit_log, audit.PERSON_ROTATED, person, {"name": person.name})
    return person, token


def remove(session: Session, audit_log: audit.Audit, name: str) -> Listed:
    """Remove `name` and their token. Someone who still has memory (a chat, a fact) is
    refused: `caesar.memory.person_removal.remove_person` forgets it first (docs/household.md).
    The owner cannot be removed."""
    audit.serialise_appends(session)
    person = named(session, name)
    if person.is_owner:
        raise InputError(
            f"{person.name!r} is the owner and cannot be removed; the owner manages the others"
        )
    gone = Listed(person.id, person.name, False, person.created_at, person.token_hash is not None)
    _record(session, audit_log, audit.PERSON_REMOVED, person, {"name": person.name})
    session.delete(person)
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError:
        raise InputError(
            f"{person.name!r} has memory of their own (chats, facts): removing a person "
            "with their memory is not built yet"
        ) from None
    return gone


def _record(
    session: Session,
    audit_log: audit.Audit,
    event_type: str,
    subject: Person,
    payload: dict[str, Any],
) -> None:
    # The owner manages people: the owner acted, whoever the row is about.
    audit_log.append(
        Scope(owner(session).id, session),
        event_type,
        {"person_id": subject.id, **payload},
        subject_id=subject.id,
        subject_key=subject.name,
    )
