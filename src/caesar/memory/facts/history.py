"""A fact's past (issue #13): every value a key held, when it held it, and what replaced it.

Nothing new is stored: the audit log already has each change — `memory.fact.extracted`,
`memory.fact.updated` (old and new value), `memory.fact.user_edited`, `memory.fact.user_deleted`
— and `memory.fact.conflict`, an extraction that contradicted what the operator had set by hand
and was not applied. Only the current value (the facts table) is ever injected into a prompt;
the superseded ones live here, for the operator to see.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from caesar import audit
from caesar.db.models import AuditLog
from caesar.memory.scope import Scope

CHANGES = (
    audit.FACT_EXTRACTED,
    audit.FACT_UPDATED,
    audit.FACT_USER_EDITED,
    audit.FACT_USER_DELETED,
    audit.FACT_CONFLICT,
)
_BY = {
    audit.FACT_EXTRACTED: "extracted",
    audit.FACT_UPDATED: "extracted",
    audit.FACT_USER_EDITED: "operator",
    audit.FACT_USER_DELETED: "operator",
    audit.FACT_CONFLICT: "extracted",
}


@dataclass(frozen=True)
class Change:
    audit_id: int
    at: datetime
    event: str
    by: str  # "operator" or "extracted"
    value: str | None  # the value from then on (None: deleted; for a conflict, the proposal)
    old_value: str | None
    source_audit_id: int | None  # the chat it was extracted from
    until: datetime | None = None  # when the next value replaced it (None: still held)

    def as_json(self) -> dict[str, object]:
        return {
            "audit_id": self.audit_id,
            "at": self.at.isoformat(),
            "event": self.event,
            "by": self.by,
            "value": self.value,
            "old_value": self.old_value,
            "source_audit_id": self.source_audit_id,
            "until": self.until.isoformat() if self.until else None,
        }


def fact_history(scope: Scope, key: str) -> list[Change]:
    """Every change of `key`, oldest first; each value's `until` is when the next change that
    took effect (not a conflict) replaced it."""
    session, person = scope.session, scope.person
    rows = session.execute(
        select(AuditLog.id, AuditLog.created_at, AuditLog.event_type, AuditLog.payload)
        .where(
            AuditLog.subject_key == key,
            AuditLog.event_type.in_(CHANGES),
            AuditLog.person_id == person,
        )
        .order_by(AuditLog.id)
    ).all()
    changes = []
    for audit_id, at, event, payload in rows:
        data = payload if isinstance(payload, dict) else {}
        if event == audit.FACT_CONFLICT:  # the proposal, and the operator's value it met
            value, old = data.get("proposed"), data.get("value")
        elif event == audit.FACT_USER_DELETED:
            value, old = None, data.get("value")
        else:
            value, old = data.get("value"), data.get("old_value")
        changes.append(
            Change(
                audit_id=int(audit_id),
                at=at,
                event=event,
                by=_BY[event],
                value=value,
                old_value=old,
                source_audit_id=data.get("source_audit_id"),
            )
        )
    took_effect = [i for i, c in enumerate(changes) if c.event != audit.FACT_CONFLICT]
    out = list(changes)
    for here, after in zip(took_effect, took_effect[1:], strict=False):
        c = changes[here]
        out[here] = Change(**{**c.__dict__, "until": changes[after].at})
    return out
