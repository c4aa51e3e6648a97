"""The facts layer: what caesar knows about the operator, ranked by importance at read time."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from caesar import audit
from caesar.clock import utcnow
from caesar.config import FactsImportanceSettings
from caesar.db.engine import Database
from caesar.db.models import Fact
from caesar.errors import InputError, NotFound
from caesar.memory.importance import SECONDS_PER_DAY, fact_importance

MAX_KEY = 100
MAX_VALUE = 1000
_KEY = re.compile(r"^[a-z][a-z0-9_]*$")


def normalise_key(raw: str) -> str:
    """'Dog Name' → 'dog_name'. Keys are short snake_case (the extractor is asked for that)."""
    key = re.sub(r"[^a-z0-9]+", "_", raw.strip().lower()).strip("_")
    if not key or not _KEY.match(key):
        raise InputError(f"invalid fact key {raw!r}: use letters, digits and underscores")
    if len(key) > MAX_KEY:
        raise InputError(f"fact key longer than {MAX_KEY} characters")
    return key


def clean_value(raw: str) -> str:
    value = " ".join(str(raw).split())
    if not value:
        raise InputError("fact value must not be empty")
    if len(value) > MAX_VALUE:
        raise InputError(f"fact value longer than {MAX_VALUE} characters")
    return value


@dataclass(frozen=True)
class RankedFact:
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


class FactsStore:
    def __init__(self, db: Database, settings: FactsImportanceSettings, audit_log: audit.Audit) -> None:
        self.db = db
        self.settings = settings
        self.audit = audit_log

    def edit_counts(self, session: Session) -> dict[str, int]:
        return audit.count_by_subject_key(session, audit.FACT_USER_EDITED)

    def list_all(self, now: datetime | None = None) -> list[RankedFact]:
        """Every fact, most important first (ADR-0034 §4)."""
        now = now or utcnow()
        with self.db.read() as session:
            facts = session.scalars(select(Fact)).all()
            edits = self.edit_counts(session) if facts else {}
        ranked = [
            RankedFact(
                key=f.key,
                value=f.value,
                confidence=f.confidence,
                importance=fact_importance(
                    age_days=(now - f.updated_at).total_seconds() / SECONDS_PER_DAY,
                    confidence=f.confidence,
                    edit_count=edits.get(f.key, 0),
                    halflife_days=self.settings.halflife_days,
                    edit_weight_scale=self.settings.edit_weight_scale,
                ),
                edit_count=edits.get(f.key, 0),
                source_audit_id=f.source_audit_id,
                created_at=f.created_at,
                updated_at=f.updated_at,
            )
            for f in facts
        ]
        ranked.sort(key=lambda r: (-r.importance, r.key))
        return ranked

    def get(self, key: str) -> RankedFact:
        key = normalise_key(key)
        for fact in self.list_all():
            if fact.key == key:
                return fact
        raise NotFound(f"no fact with key {key!r}")

    def set_by_operator(self, raw_key: str, raw_value: str) -> tuple[Fact, int]:
        """Create or edit; the operator's word is certain (confidence 1.0). Returns the fact
        and the audit id of the edit."""
        key, value = normalise_key(raw_key), clean_value(raw_value)
        now = utcnow()
        with self.db.write() as session:
            fact = session.scalar(select(Fact).where(Fact.key == key))
            old = fact.value if fact else None
            if fact is None:
                fact = Fact(key=key, value=value, confidence=1.0, created_at=now, updated_at=now)
                session.add(fact)
            else:
                fact.value, fact.confidence, fact.updated_at = value, 1.0, now
            row = self.audit.append(
                session,
                audit.FACT_USER_EDITED,
                {"key": key, "old_value": old, "value": value},
                subject_key=key,
            )
            # The fact now comes from the operator's edit: link it there.
            fact.source_audit_id = row.id
            session.flush()
            return fact, row.id

    def delete(self, raw_key: str) -> int:
        key = normalise_key(raw_key)
        with self.db.write() as session:
            fact = session.scalar(select(Fact).where(Fact.key == key))
            if fact is None:
                raise NotFound(f"no fact with key {key!r}")
            session.delete(fact)
            row = self.audit.append(
                session,
                audit.FACT_USER_DELETED,
                {"key": key, "value": fact.value},
                subject_key=key,
            )
            return row.id

    def upsert_extracted(
        self,
        session: Session,
        *,
        key: str,
        value: str,
        confidence: float,
        source_audit_id: int,
    ) -> None:
        """One extracted fact, inside the extract worker's transaction: a new key is
        `memory.fact.extracted`, a changed value `memory.fact.updated`; a repeat of the same
        value only refreshes `updated_at` and confidence (the operator said it again)."""
        now = utcnow()
        fact = session.scalar(select(Fact).where(Fact.key == key))
        if fact is None:
            session.add(
                Fact(
                    key=key,
                    value=value,
                    confidence=confidence,
                    source_audit_id=source_audit_id,
                    created_at=now,
                    updated_at=now,
                )
            )
            session.flush()
            self.audit.append(
                session,
                audit.FACT_EXTRACTED,
                {"key": key, "value": value, "confidence": confidence, "source_audit_id": source_audit_id},
                subject_key=key,
                subject_id=source_audit_id,
            )
            return
        if fact.value != value:
            old = fact.value
            fact.value, fact.confidence = value, confidence
            fact.source_audit_id, fact.updated_at = source_audit_id, now
            self.audit.append(
                session,
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
        else:
            fact.confidence = max(fact.confidence, confidence)
            fact.updated_at = now
