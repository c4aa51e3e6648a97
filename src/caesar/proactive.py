"""Proactive runs: brain turns caesar starts itself from a configured prompt.

    [[proactive]]
    name = "morning"
    prompt = "Good morning. Anything I should keep in mind today?"
    cron = "0 7 * * *"            # UTC; or interval_seconds = 3600

A run goes through the same pipeline as a chat (facts, auto-recall, one audit transaction)
and is audited as `proactive.completed` / `proactive.failed` with `subject_key` = its name, so
"when did it last run?" is one indexed query. The `proactive` worker runs the due ones. Before
a scheduled run it claims the slot with a `proactive.started` row, written in a transaction
that re-checks the last run (serialised by BEGIN IMMEDIATE on SQLite, an advisory lock on
PostgreSQL), so two processes running the scheduler never fire the same slot twice.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from croniter import croniter  # type: ignore[import-untyped]
from sqlalchemy import func, select

from caesar import audit
from caesar.brain import Brain, TurnResult, proactive_kind
from caesar.clock import utcnow
from caesar.config import ProactiveSettings
from caesar.db.engine import transaction_lock
from caesar.db.models import AuditLog
from caesar.errors import CaesarError, NotFound, ProviderError
from caesar.memory.scope import Scope
from caesar.workers import Worker

if TYPE_CHECKING:
    from caesar.container import Container

log = logging.getLogger(__name__)

PROACTIVE_STARTED = "proactive.started"
RUN_EVENTS = (PROACTIVE_STARTED, audit.PROACTIVE_COMPLETED, audit.PROACTIVE_FAILED)
MAX_POLL_SECONDS = 30.0


def find(settings: Any, name: str) -> ProactiveSettings:
    for spec in settings.proactive:
        if spec.name == name:
            return spec  # type: ignore[no-any-return]
    known = ", ".join(p.name for p in settings.proactive) or "none configured"
    raise NotFound(f"no proactive run named {name!r} (known: {known}); add a [[proactive]] table")


def schedule_text(spec: ProactiveSettings) -> str:
    if spec.cron is not None:
        return f"cron {spec.cron} (UTC)"
    return f"every {spec.interval_seconds:g} s"


def next_run(spec: ProactiveSettings, last_run: datetime | None, since: datetime) -> datetime:
    """When `spec` is next due. Never run before: an interval run is due at once (`since`), a
    cron run at its first time after `since` — a 07:00 check-in must not fire at 15:00 just
    because the scheduler started then. After downtime a missed slot runs once, not N times."""
    if spec.interval_seconds is not None:
        return since if last_run is None else last_run + timedelta(seconds=spec.interval_seconds)
    base = last_run or since
    return croniter(spec.cron, base).get_next(datetime)  # type: ignore[no-any-return]


def last_runs(scope: Scope, names: Iterable[str]) -> dict[str, datetime]:
    """When each of `names` last ran as `person`."""
    session, person = scope.session, scope.person
    rows = session.execute(
        select(AuditLog.subject_key, func.max(AuditLog.created_at))
        .where(
            AuditLog.event_type.in_(RUN_EVENTS),
            AuditLog.subject_key.in_(list(names)),
            AuditLog.person_id == person,
        )
        .group_by(AuditLog.subject_key)
    ).all()
    return {str(key): value for key, value in rows}


def run_proactive(
    services: Container, name: str, brain: Brain | None = None, *, scope: Scope
) -> TurnResult:
    """Run `name` now, as `person` (their memory, their rows). Every attempt leaves an audit
    row: the brain records provider failures as `proactive.failed`; anything else that stops
    the turn is recorded here, then raised."""
    person = scope.person
    spec = find(services.settings, name)
    brain = brain or Brain(services)
    try:
        return brain.turn(spec.prompt, kind=proactive_kind(name), scope=scope)
    except ProviderError:
        raise
    except CaesarError as exc:
        with services.db.write() as session:
            services.audit.append(
                Scope(person, session),
                audit.PROACTIVE_FAILED,
                {"proactive": name, "error": str(exc)[:1000], "error_type": type(exc).__name__},
                subject_key=name,
            )
        raise


class ProactiveScheduler(Worker):
    name = "proactive"

    def __init__(self, services: Container, clock: Callable[[], datetime] = utcnow) -> None:
        self.services = services
        self.db = services.db
        self.clock = clock
        self.started_at = clock()
        self._brain: Brain | None = None

    @property
    def specs(self) -> list[ProactiveSettings]:
        return list(self.services.settings.proactive)

    @property
    def enabled(self) -> bool:
        return bool(self.specs)

    @property
    def interval_seconds(self) -> float:
        intervals = [s.interval_seconds for s in self.specs if s.interval_seconds is not None]
        return min([MAX_POLL_SECONDS, *intervals])

    def schedule(
        self, now: datetime | None = None
    ) -> list[tuple[ProactiveSettings, datetime | None, datetime]]:
        """(spec, last run, next due) for every configured run (the owner's: the runs are the
        server's settings, which the owner keeps)."""
        owner = self.services.owner_id()
        with self.db.read() as session:
            last = last_runs(Scope(owner, session), [s.name for s in self.specs])
        return [
            (s, last.get(s.name), next_run(s, last.get(s.name), self.started_at))
            for s in self.specs
        ]

    def _claim(self, spec: ProactiveSettings, now: datetime) -> bool:
        with self.db.write() as session:
            transaction_lock(session, zlib.crc32(f"caesar.proactive:{spec.name}".encode()))
            owner = self.services.owner_id()
            last = last_runs(Scope(owner, session), [spec.name]).get(spec.name)
            if next_run(spec, last, self.started_at) > now:
                return False  # another process ran it since we looked
            self.services.audit.append(
                Scope(owner, session),
                PROACTIVE_STARTED,
                {"proactive": spec.name},
                subject_key=spec.name,
                created_at=now,
            )
            return True

    def step(self) -> int:
        now = self.clock()
        ran = 0
        for spec, _last, due in self.schedule(now):
            if due > now or not self._claim(spec, now):
                continue
            self._brain = self._brain or Brain(self.services)
            try:
                run_proactive(
                    self.services, spec.name, self._brain, scope=Scope(self.services.owner_id())
                )
            except CaesarError as exc:  # audited by run_proactive / the brain; next slot retries
                log.warning("proactive %s failed: %s", spec.name, exc)
            ran += 1
        return ran
