"""The person's standing statements: learned from their chats, read for every turn, seen and
corrected by them (issue #46, docs/standing.md).

Two writers: the `memory.extract` worker (`learn`, in its transaction) and the person (`add`,
`edit`, `delete`: the API, CLI, dashboard and MCP). A newer statement replaces an older one of
the same single-valued slot, or one it reverses with a word of change ("I eat fish again now"
after "I'm vegetarian"): the older's `superseded_by` is set, the history keeps both. Two that
say opposite things with no word of change are both kept current, the newer naming the older in
`contradicts`: the prompt shows both, dated, so the model can ask which holds.
"""

from __future__ import annotations

import builtins
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import bindparam, delete, func, or_, select, update

from caesar import audit
from caesar.clock import utcnow
from caesar.config import FactsImportanceSettings
from caesar.db.engine import Database
from caesar.db.models import Memory
from caesar.embeddings import EmbedderHandle, normalise
from caesar.errors import InputError, NotFound
from caesar.memory.episodes.listing import like_pattern
from caesar.memory.importance import SECONDS_PER_DAY, fact_importance
from caesar.memory.scope import Scope
from caesar.memory.standing import kinds
from caesar.memory.standing.offline import Statement, conflicts

MAX_TEXT = 500
MAX_CURRENT = 500  # a turn reads at most this many (newest first)
VECTOR_CACHE = 20_000  # bearing vectors kept in memory (1.5 kB each)
PEOPLE_CACHE = 256  # people whose current statements a process keeps between turns
_VectorKey = tuple[int, datetime, str | None]
_LIKING = ("likes", "dislikes")
# Slots whose `about` is the whole of what is said ("peanut", "metric"): the same `about` is
# the same statement. Elsewhere it is coarse ("cat", "daughter"): only the same words are.
_ABOUT_IS_VALUE = frozenset(
    "diet allergy drink units language length health fear likes dislikes uses format".split()
)


def _same_words(a: str, b: str) -> bool:
    return " ".join(a.lower().split()).strip(" .!") == " ".join(b.lower().split()).strip(" .!")


class StandingMemory(NamedTuple):
    """One statement as the prompt, the person and the API see it. A NamedTuple, not a
    dataclass: a turn builds one per current statement."""

    id: int
    kind: str
    slot: str
    text: str
    said_at: datetime
    updated_at: datetime
    confidence: float
    edit_count: int
    source_audit_id: int | None
    superseded_by: int | None = None
    contradicts: int | None = None
    vector: np.ndarray | None = None
    about: str = ""  # what it is about, in a normal form ("peanut", "vegetarian")

    def importance(self, now: datetime, settings: FactsImportanceSettings) -> float:
        """The ADR's importance: freshness × confidence × edit weight."""
        return fact_importance(
            age_days=(now - self.updated_at).total_seconds() / SECONDS_PER_DAY,
            confidence=self.confidence,
            edit_count=self.edit_count,
            halflife_days=settings.halflife_days,
            edit_weight_scale=settings.edit_weight_scale,
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "slot": self.slot,
            "text": self.text,
            "said_at": self.said_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "confidence": self.confidence,
            "edit_count": self.edit_count,
            "source_audit_id": self.source_audit_id,
            "superseded_by": self.superseded_by,
            "contradicts": self.contradicts,
        }


def clean_text(raw: str) -> str:
    text = " ".join(str(raw).split())
    if not text:
        raise InputError("a memory's text must not be empty")
    if len(text) > MAX_TEXT:
        raise InputError(f"a memory's text is longer than {MAX_TEXT} characters")
    if any(ord(ch) < 32 for ch in text):
        raise InputError("a memory's text must not contain control characters")
    return text


def search_pattern(text: str) -> str:
    """The LIKE pattern (ESCAPE '\\') of a search for `text`'s words in a memory's text, any
    case; an InputError for blank words or control characters."""
    words = " ".join(text.split())
    if not words:
        raise InputError("say what to search for")
    if any(ord(ch) < 32 for ch in words):
        raise InputError("a search must not contain control characters")
    return like_pattern(words.lower())


def _view(row: Memory, with_vector: bool = False) -> StandingMemory:
    vector = None
    if with_vector and row.vector is not None:
        vector = np.frombuffer(row.vector, dtype=np.float32)
    return StandingMemory(
        row.id,
        row.kind,
        row.slot,
        row.text,
        row.said_at,
        row.updated_at,
        row.confidence,
        row.edit_count,
        row.source_audit_id,
        row.superseded_by,
        row.contradicts,
        vector,
        row.about,
    )


_COLUMNS = Memory.__table__.c
_CURRENT = (
    select(
        _COLUMNS.id,
        _COLUMNS.kind,
        _COLUMNS.slot,
        _COLUMNS.text,
        _COLUMNS.said_at,
        _COLUMNS.updated_at,
        _COLUMNS.confidence,
        _COLUMNS.edit_count,
        _COLUMNS.source_audit_id,
        _COLUMNS.contradicts,
        _COLUMNS.model,
        _COLUMNS.about,
    )
    .where(
        _COLUMNS.person_id == bindparam("person"),
        _COLUMNS.superseded_by.is_(None),
        _COLUMNS.kind.in_(kinds.KINDS),
    )
    .order_by(_COLUMNS.id.desc())
    .limit(bindparam("limit"))
)
_VECTORS = select(_COLUMNS.id, _COLUMNS.vector).where(
    _COLUMNS.id.in_(bindparam("ids", expanding=True))
)
# What changes whenever the person's current statements do, whoever writes: one is added (the
# sum of ids), removed or superseded (the count; a foreign-key cascade from a forgotten chat
# too), edited or said again (the latest updated_at, the edit count), or loses the statement it
# contradicted (the count of `contradicts`). One aggregate over the person's index, not their
# rows.
_VERSION = select(
    func.count(),
    func.coalesce(func.sum(_COLUMNS.id), 0),
    func.max(_COLUMNS.updated_at),
    func.coalesce(func.sum(_COLUMNS.edit_count), 0),
    func.count(_COLUMNS.contradicts),
).where(
    _COLUMNS.person_id == bindparam("person"),
    _COLUMNS.superseded_by.is_(None),
    _COLUMNS.kind.in_(kinds.KINDS),
)


def _group(slot: str) -> tuple[str, ...]:
    """The slots a statement is weighed against: likes and dislikes are one."""
    return _LIKING if slot in _LIKING else (slot,)


class StandingStore:
    def __init__(self, db: Database, embedder: EmbedderHandle) -> None:
        self.db = db
        self.embedder = embedder
        # (memory id, updated_at, model) → its bearing vector, oldest dropped first. An edit
        # moves updated_at, so no process keeps an old text's vector.
        self._vectors: OrderedDict[_VectorKey, np.ndarray | None] = OrderedDict()
        # person → (their statements' version, their current statements): read again only
        # when the version moved
        self._current: OrderedDict[int, tuple[tuple[Any, ...], list[StandingMemory]]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    @property
    def model(self) -> str | None:
        """The embedder's id, kept with each vector; None with the embedder off."""
        return self.embedder.get().model_id if self.embedder.enabled else None

    def vectors(self, slotted: Sequence[tuple[str, str]]) -> list[np.ndarray | None]:
        """The bearing vectors of (slot, text) pairs (`kinds.bearing_text`), normalised; Nones
        with the embedder off. Outside any transaction: embedding is slow."""
        if not slotted or not self.embedder.enabled:
            return [None] * len(slotted)
        texts = [kinds.bearing_text(slot, text) for slot, text in slotted]
        return list(normalise(self.embedder.get().embed_batch(texts)))

    # -- the worker ---------------------------------------------------------------------------
    def learn(
        self,
        scope: Scope,
        log: audit.Audit,
        statements: Sequence[tuple[Statement, np.ndarray | None]],
        *,
        source_audit_id: int,
        said_at: datetime,
    ) -> int:
        """Write what one chat row said (in the worker's transaction); how many are new."""
        learned = 0
        for statement, vector in statements:
            if statement.kind not in kinds.KINDS or not statement.text.strip():
                continue
            if self._learn_one(scope, log, statement, vector, source_audit_id, said_at):
                learned += 1
        return learned

    def _learn_one(
        self,
        scope: Scope,
        log: audit.Audit,
        statement: Statement,
        vector: np.ndarray | None,
        source_audit_id: int,
        said_at: datetime,
    ) -> bool:
        session, person = scope.session, scope.person
        current = list(
            session.scalars(
                select(Memory).where(
                    Memory.person_id == person,
                    Memory.superseded_by.is_(None),
                    Memory.kind.in_(kinds.KINDS),
                    Memory.slot.in_(_group(statement.slot)),
                )
            )
        )
        for old in current:
            if (
                old.slot == statement.slot
                and old.polarity == statement.polarity
                and (
                    _same_words(old.text, statement.text)
                    or (statement.slot in _ABOUT_IS_VALUE and old.about == statement.about)
                )
            ):
                # said again: fresher, not twice (a person's later hand edit stays theirs)
                if said_at > old.updated_at:
                    old.updated_at = said_at
                old.confidence = max(old.confidence, statement.confidence)
                return False
        row = self._write(
            scope,
            log,
            audit.MEMORY_LEARNED,
            Statement(
                statement.kind,
                statement.slot,
                clean_text(statement.text)[:MAX_TEXT],
                statement.about[:200],
                statement.polarity,
                statement.change,
                statement.confidence,
            ),
            vector,
            said_at=said_at,
            source_audit_id=source_audit_id,
        )
        slot = kinds.slot_of(statement.slot)
        for old in current:
            older, newer = (old, row) if old.said_at <= said_at else (row, old)
            reverses = conflicts(
                (newer.slot, newer.about, newer.polarity), (older.slot, older.about, older.polarity)
            )
            changed = statement.change if newer is row else False
            if (slot.single and old.slot == row.slot) or (reverses and changed):
                older.superseded_by = newer.id
                log.append(
                    scope,
                    audit.MEMORY_SUPERSEDED,
                    {"memory_id": older.id, "by": newer.id},
                    subject_id=source_audit_id,
                )
            elif reverses:
                newer.contradicts = older.id
        return True

    def _write(
        self,
        scope: Scope,
        log: audit.Audit,
        event: str,
        statement: Statement,
        vector: np.ndarray | None,
        *,
        said_at: datetime,
        source_audit_id: int | None,
    ) -> Memory:
        """One new statement and the audit row that says so (its chat's id as the subject)."""
        session, person = scope.session, scope.person
        row = Memory(
            person_id=person,
            kind=statement.kind,
            slot=statement.slot,
            text=statement.text,
            about=statement.about,
            polarity=statement.polarity,
            confidence=statement.confidence,
            speaker="person",
            source_audit_id=source_audit_id,
            said_at=said_at,
            created_at=utcnow(),
            updated_at=said_at,
            vector=None if vector is None else np.asarray(vector, np.float32).tobytes(),
            model=None if vector is None else self.model,
        )
        session.add(row)
        session.flush()
        log.append(
            scope,
            event,
            {"memory_id": row.id, "kind": row.kind, "slot": row.slot, "text": row.text},
            subject_id=source_audit_id,
        )
        return row

    # -- reads --------------------------------------------------------------------------------
    def current(self, scope: Scope) -> list[StandingMemory]:
        """`person`'s statements that hold, with their vectors, newest first. This runs on
        every turn: the list is kept per person and read again only when their statements'
        version (`_VERSION`) moved; then core columns, not ORM objects, and the vectors from
        this process's cache."""
        session, person = scope.session, scope.person
        version = tuple(session.execute(_VERSION, {"person": person}).one())
        with self._lock:
            kept = self._current.get(person)
            if kept is not None and kept[0] == version:
                self._current.move_to_end(person)
                return list(kept[1])
        found = self._read_current(scope)
        with self._lock:
            self._current[person] = (version, found)
            while len(self._current) > PEOPLE_CACHE:
                self._current.popitem(last=False)
        return list(found)

    def _read_current(self, scope: Scope) -> list[StandingMemory]:
        session, person = scope.session, scope.person
        rows = session.execute(_CURRENT, {"person": person, "limit": MAX_CURRENT}).all()
        keys = {r[0]: (r[0], r[5], r[10]) for r in rows}
        missing = [i for i, key in keys.items() if key not in self._vectors]
        if missing:
            for memory_id, blob in session.execute(_VECTORS, {"ids": missing}):
                self._remember_vector(keys[memory_id], blob)
        return [
            StandingMemory(*r[:9], None, r[9], self._vectors.get(keys[r[0]]), r[11]) for r in rows
        ]

    def _remember_vector(self, key: _VectorKey, blob: bytes | None) -> None:
        vector = None if blob is None else np.frombuffer(blob, np.float32)
        with self._lock:
            self._vectors[key] = vector
            while len(self._vectors) > VECTOR_CACHE:
                self._vectors.popitem(last=False)

    def list(
        self, *, scope: Scope, kind: str | None = None, history: bool = False
    ) -> list[StandingMemory]:
        """`person`'s statements by kind, newest first; `history`: the replaced ones too."""
        person = scope.person
        with self.db.read() as session:
            query = select(Memory).where(Memory.person_id == person, Memory.kind.in_(kinds.KINDS))
            if kind is not None:
                query = query.where(Memory.kind == kind)
            if not history:
                query = query.where(Memory.superseded_by.is_(None))
            rows = session.scalars(query.order_by(Memory.said_at.desc(), Memory.id.desc()))
            return [_view(r) for r in rows]

    def search(self, text: str, *, scope: Scope) -> builtins.list[StandingMemory]:
        """Current statements whose text holds `text` (case-insensitive); an InputError for
        blank words or control characters."""
        person = scope.person
        needle = search_pattern(text)
        with self.db.read() as session:
            rows = session.scalars(
                select(Memory)
                .where(
                    Memory.person_id == person,
                    Memory.superseded_by.is_(None),
                    Memory.kind.in_(kinds.KINDS),
                    Memory.text.ilike(needle, escape="\\"),
                )
                .order_by(Memory.said_at.desc())
            )
            return [_view(r) for r in rows]

    def get(self, memory_id: int, *, scope: Scope) -> StandingMemory:
        person = scope.person
        with self.db.read() as session:
            return _view(self._owned(Scope(person, session), memory_id))

    @staticmethod
    def _owned(scope: Scope, memory_id: int) -> Memory:
        session, person = scope.session, scope.person
        row = session.get(Memory, memory_id)
        # another person's is not there at all; a dated memory is DatedStore's (its vector is
        # of its words alone, not of a slot's bearing)
        if row is None or row.person_id != person or row.kind not in kinds.KINDS:
            raise NotFound(f"no memory with id {memory_id}")
        return row

    # -- the person's own word ----------------------------------------------------------------
    def add(
        self,
        log: audit.Audit,
        text: str,
        *,
        kind: str,
        slot: str | None = None,
        scope: Scope,
    ) -> StandingMemory:
        """A statement the person writes by hand (confidence 1: their own word), with its
        bearing vector (embedded before the write transaction opens)."""
        person = scope.person
        kind = str(kinds.check_kind(kind))
        slot = kinds.check_slot(kind, slot)
        text = clean_text(text)
        [vector] = self.vectors([(slot, text)])
        with self.db.write() as session:
            row = self._write(
                Scope(person, session),
                log,
                audit.MEMORY_USER_ADDED,
                Statement(kind, slot, text, "", 1, False, 1.0),
                vector,
                said_at=utcnow(),
                source_audit_id=None,
            )
            return _view(row)

    def edit(self, log: audit.Audit, memory_id: int, text: str, *, scope: Scope) -> StandingMemory:
        """The person's correction (NotFound for anyone else's): the new text, re-embedded,
        now, with their edit counted."""
        person = scope.person
        text = clean_text(text)
        slot = self.get(memory_id, scope=scope).slot
        [vector] = self.vectors([(slot, text)])
        with self.db.write() as session:
            row = self._owned(Scope(person, session), memory_id)
            row.text = text
            row.edit_count += 1
            row.updated_at = utcnow()
            row.confidence = 1.0
            if vector is not None:
                row.vector, row.model = np.asarray(vector, np.float32).tobytes(), self.model
            log.append(
                Scope(person, session),
                audit.MEMORY_USER_EDITED,
                {"memory_id": row.id, "kind": row.kind, "slot": row.slot, "text": text},
                subject_id=row.source_audit_id,
            )
            return _view(row)

    def delete(self, log: audit.Audit, memory_id: int, *, scope: Scope) -> None:
        """Gone, with the rows that quote it; one row says which (never what it said). A
        statement it had replaced holds again."""
        person = scope.person
        with self.db.write() as session:
            row = self._owned(Scope(person, session), memory_id)
            kind, slot = row.kind, row.slot
            session.execute(
                update(Memory)
                .where(or_(Memory.superseded_by == memory_id, Memory.contradicts == memory_id))
                .values(superseded_by=None, contradicts=None)
            )
            quoting = session.scalars(
                select(audit.AuditLog.id).where(
                    audit.AuditLog.event_type.in_(
                        (audit.MEMORY_LEARNED, audit.MEMORY_USER_ADDED, audit.MEMORY_USER_EDITED)
                    ),
                    audit.AuditLog.person_id == person,
                    audit.AuditLog.payload["memory_id"].as_integer() == memory_id,
                )
            ).all()
            if quoting:
                session.execute(delete(audit.AuditLog).where(audit.AuditLog.id.in_(quoting)))
            session.delete(row)
            log.append(
                Scope(person, session),
                audit.MEMORY_USER_DELETED,
                {"memory_id": memory_id, "kind": kind, "slot": slot},
            )


def importance_order(
    memories: Sequence[StandingMemory], now: datetime, settings: FactsImportanceSettings
) -> list[StandingMemory]:
    return sorted(memories, key=lambda m: (-m.importance(now, settings), -m.id))
