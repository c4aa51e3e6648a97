"""The facts layer: what caesar knows about the operator, ranked by importance at read time.

Two writers: the operator (`set_by_operator`, `delete`: the API, CLI and dashboard) and the
`memory.extract` worker (`upsert_extracted`). The operator's word wins: an extraction from a
chat that happened before the operator last touched a key never overrides or resurrects it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import String, bindparam, func, select, type_coerce
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from caesar import audit
from caesar.clock import utcnow
from caesar.config import FactsImportanceSettings
from caesar.db.engine import Database
from caesar.db.models import AuditLog, Fact
from caesar.errors import InputError, NotFound
from caesar.memory.facts.history import Change, fact_history
from caesar.memory.importance import SECONDS_PER_DAY, fact_importance_v
from caesar.memory.scope import Scope

MAX_KEY = 100
MAX_VALUE = 1000
_KEY = re.compile(r"^[a-z][a-z0-9_]*$")
# Separators an operator or a model may use between words; anything else is refused rather
# than silently dropped ("café" must not become "caf").
_SEPARATORS = re.compile(r"[\s\-.]+")


def normalise_key(raw: str) -> str:
    """'Dog Name' / 'dog-name' / "dog's name" → 'dog_name'. Keys are short ASCII snake_case
    starting with a letter; anything else is an error, never silently rewritten."""
    key = raw.strip().lower().replace("'", "").replace("’", "")
    key = re.sub(r"_+", "_", _SEPARATORS.sub("_", key)).rstrip("_")
    if not key or not _KEY.match(key):
        raise InputError(
            f"invalid fact key {raw[:120]!r}: use snake_case, starting with a letter "
            "(a-z, 0-9, _), e.g. dog_name"
        )
    if len(key) > MAX_KEY:
        raise InputError(f"fact key longer than {MAX_KEY} characters")
    return key


def clean_value(raw: str) -> str:
    """One line, no control characters (PostgreSQL refuses NUL; the prompt wants one line)."""
    value = " ".join(str(raw).split())
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        raise InputError("fact value must not contain control characters")
    if not value:
        raise InputError("fact value must not be empty")
    if len(value) > MAX_VALUE:
        raise InputError(f"fact value longer than {MAX_VALUE} characters")
    return value


class RankedFact(NamedTuple):
    # A NamedTuple, not a dataclass: list_all builds one per fact on every chat turn.
    key: str
    value: str
    confidence: float
    importance: float
    edit_count: int
    source_audit_id: int | None
    created_at: datetime
    updated_at: datetime

    def as_json(self) -> dict[str, object]:
        return {
            "key": self.key,
            "value": self.value,
            "confidence": self.confidence,
            "importance": round(self.importance, 6),
            "updated_at": self.updated_at.isoformat(),
            "edit_count": self.edit_count,
            "source_audit_id": self.source_audit_id,
        }


def _edit_counts_query(*, one_key: bool) -> Any:
    """Operator edits per key after the key's last deletion. Core tables, built once: this
    runs on every chat turn, and an ORM statement built per call cost more than the query.
    A join against each key's last deletion rather than a correlated subquery per edit row."""
    log = AuditLog.__table__.c
    last_delete = select(log.subject_key, func.max(log.id).label("last_id")).where(
        log.event_type == audit.FACT_USER_DELETED, log.person_id == bindparam("person")
    )
    if one_key:
        last_delete = last_delete.where(log.subject_key == bindparam("key"))
    deleted = last_delete.group_by(log.subject_key).subquery("last_delete")
    query = (
        select(log.subject_key, func.count())
        .select_from(
            AuditLog.__table__.outerjoin(deleted, deleted.c.subject_key == log.subject_key)
        )
        .where(
            log.event_type == audit.FACT_USER_EDITED,
            log.person_id == bindparam("person"),
            log.subject_key.is_not(None),
            log.id > func.coalesce(deleted.c.last_id, 0),
        )
        .group_by(log.subject_key)
    )
    return query.where(log.subject_key == bindparam("key")) if one_key else query


_EDIT_COUNTS = _edit_counts_query(one_key=False)
_EDIT_COUNT_OF_KEY = _edit_counts_query(one_key=True)
# What edit counts are computed from, summed up: audit rows are never changed and ids never
# reused, and a new row's id is larger than any before it, so (how many, largest id) of the
# edit and deletion rows changes whenever one is added (largest id) or removed (how many).
_EDIT_ROWS_SIGNATURE = select(func.count(), func.max(AuditLog.__table__.c.id)).where(
    AuditLog.__table__.c.event_type.in_((audit.FACT_USER_EDITED, audit.FACT_USER_DELETED)),
    AuditLog.__table__.c.person_id == bindparam("person"),
)


def edit_counts(scope: Scope, key: str | None = None) -> dict[str, int]:
    """`person`'s edits per key (`memory.fact.user_edited` rows, ADR-0034 §4), counting only
    edits after the key's last `memory.fact.user_deleted`: deleting a fact forgets the
    interest the operator once showed in it."""
    session, person = scope.session, scope.person
    if key is None:
        rows = session.execute(_EDIT_COUNTS, {"person": person})
    else:
        rows = session.execute(_EDIT_COUNT_OF_KEY, {"key": key, "person": person})
    return {str(k): int(n) for k, n in rows}


def by_keys(scope: Scope, keys: Sequence[str]) -> dict[str, Fact]:
    """`person`'s facts of `keys` as they are now, by key (a key with no fact is absent)."""
    session, person = scope.session, scope.person
    if not keys:
        return {}
    rows = session.scalars(select(Fact).where(Fact.key.in_(list(keys)), Fact.person_id == person))
    return {f.key: f for f in rows}


def _raw(column: Any) -> Any:
    """A timestamp as the driver returns it: on SQLite the stored ISO text, parsed below with
    the C `fromisoformat` (SQLAlchemy's own SQLite parser is several times slower); on
    PostgreSQL the driver's datetime, untouched."""
    return type_coerce(column, String)


def _when(value: datetime | str) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def _age_days(raw: list[Any], now: datetime) -> np.ndarray:
    if raw and isinstance(raw[0], str):  # SQLite's ISO text: numpy parses it in C
        stamps = np.array(raw, dtype="datetime64[us]")
        ages: np.ndarray = (np.datetime64(now, "us") - stamps) / np.timedelta64(1, "D")  # type: ignore[operator]
        return ages
    return np.array([(now - u).total_seconds() for u in raw]) / SECONDS_PER_DAY


_FACT = Fact.__table__.c
# Core columns, not ORM attributes: an ORM-enabled select pays for ORM result processing.
_COLUMNS = (
    _FACT.key,
    _FACT.value,
    _FACT.confidence,
    _FACT.source_audit_id,
    _raw(_FACT.created_at).label("created_at"),
    _raw(_FACT.updated_at).label("updated_at"),
)
_I_KEY, _I_VALUE, _I_CONFIDENCE, _I_SOURCE, _I_CREATED, _I_UPDATED = range(len(_COLUMNS))
_ALL_ROWS = select(*_COLUMNS).where(_FACT.person_id == bindparam("person")).order_by(_FACT.key)
_ROW_OF_KEY = select(*_COLUMNS).where(
    _FACT.key == bindparam("key"), _FACT.person_id == bindparam("person")
)


class FactsStore:
    def __init__(
        self, db: Database, settings: FactsImportanceSettings, audit_log: audit.Audit
    ) -> None:
        self.db = db
        self.settings = settings
        self.audit = audit_log
        # Per person, (signature of their edit/deletion rows, the edit counts computed from
        # them): every turn needs the counts; they change only when the person edits or
        # deletes a fact (any process) or retention sweeps such a row. Replaced whole.
        self._edit_counts: dict[int, tuple[tuple[int, int | None], dict[str, int]]] = {}

    def _ranked(
        self, rows: Sequence[Any], edits: dict[str, int], now: datetime, limit: int | None
    ) -> list[RankedFact]:
        """`rows` (_COLUMNS, sorted by key) ranked. Vectorised, and rows are read by index
        (attribute access on a Row is ~40x slower): this runs over every fact, every turn."""
        if not rows:
            return []
        counts = [edits.get(r[_I_KEY], 0) for r in rows]
        scores = fact_importance_v(
            age_days=_age_days([r[_I_UPDATED] for r in rows], now),
            confidence=np.array([r[_I_CONFIDENCE] for r in rows], dtype=np.float64),
            edit_count=np.array(counts, dtype=np.float64),
            halflife_days=self.settings.halflife_days,
            edit_weight_scale=self.settings.edit_weight_scale,
        )
        # Most important first; a stable sort keeps equal scores in key order, so the ranking
        # never flickers between turns.
        order = np.argsort(-scores, kind="stable")[:limit].tolist()
        return [
            RankedFact(
                rows[i][_I_KEY],
                rows[i][_I_VALUE],
                rows[i][_I_CONFIDENCE],
                float(scores[i]),
                counts[i],
                rows[i][_I_SOURCE],
                _when(rows[i][_I_CREATED]),
                _when(rows[i][_I_UPDATED]),
            )
            for i in order
        ]

    def list_all(
        self, now: datetime | None = None, *, scope: Scope, limit: int | None = None
    ) -> list[RankedFact]:
        """Every fact of `person`'s (or the `limit` most important), most important first
        (ADR-0034 §4). Importance is computed here, at read time, never stored."""
        person = scope.person
        now = now or utcnow()
        with self.db.read() as session:
            rows = session.execute(_ALL_ROWS, {"person": person}).all()
            edits = self._all_edit_counts(Scope(person, session)) if rows else {}
        return self._ranked(rows, edits, now, limit)

    def _all_edit_counts(self, scope: Scope) -> dict[str, int]:
        """`edit_counts(session)`, recomputed only when the rows it counts changed. The
        signature is read before the counts: a write committed between the two leaves counts
        newer than their signature (recomputed next time), never older."""
        session, person = scope.session, scope.person
        count, last_id = session.execute(_EDIT_ROWS_SIGNATURE, {"person": person}).one()
        signature = (int(count), None if last_id is None else int(last_id))
        cached = self._edit_counts.get(person)
        if cached is not None and cached[0] == signature:
            return cached[1]
        counts = edit_counts(scope)
        self._edit_counts = {**self._edit_counts, person: (signature, counts)}
        return counts

    def get(self, raw_key: str, now: datetime | None = None, *, scope: Scope) -> RankedFact:
        person = scope.person
        key = normalise_key(raw_key)
        with self.db.read() as session:
            row = session.execute(_ROW_OF_KEY, {"key": key, "person": person}).first()
            if row is None:
                raise NotFound(f"no fact with key {key!r}")
            edits = edit_counts(Scope(person, session), key)
        return self._ranked([row], edits, now or utcnow(), None)[0]

    def set_by_operator(self, raw_key: str, raw_value: str, *, scope: Scope) -> tuple[Fact, int]:
        """Create or edit; the operator's word is certain (confidence 1.0). Setting the same
        value again still counts as an edit: touching a fact is how the operator says it
        matters (ADR-0034 §Alternatives). Returns the fact and the audit id of the edit."""
        key, value = normalise_key(raw_key), clean_value(raw_value)
        try:
            return self._set(key, value, scope)
        except IntegrityError:
            # PostgreSQL only (SQLite writes are serialised): the extractor inserted the same
            # new key between our read and our insert. Now it exists, so this is an edit.
            return self._set(key, value, scope)

    def _set(self, key: str, value: str, scope: Scope) -> tuple[Fact, int]:
        person = scope.person
        now = utcnow()
        with self.db.write() as session:
            fact = session.scalar(select(Fact).where(Fact.key == key, Fact.person_id == person))
            old = fact.value if fact else None
            if fact is None:
                fact = Fact(
                    key=key,
                    value=value,
                    confidence=1.0,
                    created_at=now,
                    updated_at=now,
                    person_id=person,
                )
                session.add(fact)
            else:
                fact.value, fact.confidence, fact.updated_at = value, 1.0, now
            row = self.audit.append(
                Scope(person, session),
                audit.FACT_USER_EDITED,
                {"key": key, "old_value": old, "value": value},
                subject_key=key,
                created_at=now,
            )
            # The fact now comes from the operator's edit: link it there.
            fact.source_audit_id = row.id
            session.flush()
            return fact, row.id

    def delete(self, raw_key: str, *, scope: Scope) -> int:
        """Delete `person`'s fact `raw_key`; returns the audit id of the deletion."""
        person = scope.person
        key = normalise_key(raw_key)
        with self.db.write() as session:
            fact = session.scalar(select(Fact).where(Fact.key == key, Fact.person_id == person))
            if fact is None:
                raise NotFound(f"no fact with key {key!r}")
            session.delete(fact)
            row = self.audit.append(
                Scope(person, session),
                audit.FACT_USER_DELETED,
                {"key": key, "value": fact.value},
                subject_key=key,
            )
            return row.id

    @staticmethod
    def _set_by_operator(session: Session, fact: Fact) -> bool:
        """Whether the fact's current value is one the operator set by hand."""
        if fact.source_audit_id is None:
            return False
        source = session.scalar(
            select(AuditLog.event_type).where(AuditLog.id == fact.source_audit_id)
        )
        return source == audit.FACT_USER_EDITED

    def _conflict(
        self, session: Session, fact: Fact, proposed: str, source_audit_id: int
    ) -> str | None:
        seen = session.scalar(
            select(AuditLog.id).where(
                AuditLog.event_type == audit.FACT_CONFLICT,
                AuditLog.subject_key == fact.key,
                AuditLog.subject_id == source_audit_id,
                AuditLog.person_id == fact.person_id,
            )
        )
        if seen is not None:
            return None
        self.audit.append(
            Scope(fact.person_id, session),
            audit.FACT_CONFLICT,
            {
                "key": fact.key,
                "value": fact.value,
                "proposed": proposed,
                "source_audit_id": source_audit_id,
            },
            subject_key=fact.key,
            subject_id=source_audit_id,
        )
        return audit.FACT_CONFLICT

    def history(self, raw_key: str, *, scope: Scope) -> list[Change]:
        """Every value `person`'s `raw_key` held, when, and what replaced it
        (memory/facts/history.py)."""
        person = scope.person
        key = normalise_key(raw_key)
        with self.db.read() as session:
            changes = fact_history(Scope(person, session), key)
        if not changes:
            raise NotFound(f"no fact with key {key!r}, now or before")
        return changes

    def upsert_extracted(
        self,
        scope: Scope,
        *,
        key: str,
        value: str,
        confidence: float,
        source_audit_id: int,
        said_at: datetime,
    ) -> str | None:
        """One extracted fact of `person`'s (whose chat it came from), inside the extract
        worker's transaction. `said_at` is when the
        source chat happened; it becomes the fact's `updated_at`, so freshness measures how
        long ago the operator said it. Returns the audit event written, or None.

        - new key: `memory.fact.extracted`
        - changed value: `memory.fact.updated` with old and new — unless the operator set the
          current value by hand: then `memory.fact.conflict`, and the value stays
        - same value (case-insensitively): refresh `updated_at` and keep the higher confidence
        - the fact was set, edited or deleted after this chat happened: nothing (stale news;
          this is also what makes re-processing a chat a no-op)
        """
        session, person = scope.session, scope.person
        fact = session.scalar(select(Fact).where(Fact.key == key, Fact.person_id == person))
        if fact is not None and fact.updated_at > said_at:
            return None
        if fact is None:
            deleted_at = session.scalar(
                select(func.max(AuditLog.created_at)).where(
                    AuditLog.event_type == audit.FACT_USER_DELETED,
                    AuditLog.subject_key == key,
                    AuditLog.person_id == person,
                )
            )
            if deleted_at is not None and deleted_at > said_at:
                return None
            session.add(
                Fact(
                    key=key,
                    value=value,
                    confidence=confidence,
                    source_audit_id=source_audit_id,
                    created_at=said_at,
                    updated_at=said_at,
                    person_id=person,
                )
            )
            session.flush()
            self.audit.append(
                scope,
                audit.FACT_EXTRACTED,
                {
                    "key": key,
                    "value": value,
                    "confidence": confidence,
                    "source_audit_id": source_audit_id,
                },
                subject_key=key,
                subject_id=source_audit_id,
            )
            return audit.FACT_EXTRACTED
        if fact.value.casefold() != value.casefold():
            if self._set_by_operator(session, fact):
                # Operator edits are the strongest signal the ADR names: an extraction that
                # contradicts one is recorded, not applied (once per source chat).
                return self._conflict(session, fact, value, source_audit_id)
            old = fact.value
            fact.value, fact.confidence = value, confidence
            fact.source_audit_id, fact.updated_at = source_audit_id, said_at
            self.audit.append(
                scope,
                audit.FACT_UPDATED,
                {
                    "key": key,
                    "old_value": old,
                    "value": value,
                    "confidence": confidence,
                    "source_audit_id": source_audit_id,
                },
                subject_key=key,
                subject_id=source_audit_id,
            )
            return audit.FACT_UPDATED
        # The operator said it again: fresher and at least as certain, no audit noise.
        fact.confidence = max(fact.confidence, confidence)
        fact.updated_at = said_at
        return None
