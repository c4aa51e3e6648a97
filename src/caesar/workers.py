"""The cursor-polling loop every background worker shares.

A worker reads a batch of audit rows past its cursor, does the slow part (LLM, embedding)
outside any transaction, then writes its results *and* advances the cursor in one short
write transaction. The cursor update is a compare-and-swap (`WHERE last_audit_id = <what
we read>`): if another worker process finished the same batch first, ours writes nothing.
So a crash at any point, or two workers on one database, leaves every row with exactly one
outcome — the price is, rarely, one wasted LLM call.
"""

from __future__ import annotations

import logging
import os
import random
import sys
import threading
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

from sqlalchemy import CursorResult, select, update
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session

from caesar import audit
from caesar.clock import utcnow
from caesar.db.engine import UNAVAILABLE, outage
from caesar.db.models import AuditLog
from caesar.errors import CaesarError
from caesar.memory.scope import Scope

if TYPE_CHECKING:
    from caesar.container import Container

log = logging.getLogger(__name__)

Prepared = TypeVar("Prepared")
T = TypeVar("T")


class Worker(ABC):
    """Anything `caesar worker` can run: one step does a batch and says how much it did."""

    name: ClassVar[str]

    @property
    @abstractmethod
    def enabled(self) -> bool: ...

    @property
    @abstractmethod
    def interval_seconds(self) -> float: ...

    @abstractmethod
    def step(self) -> int:
        """Do one batch; return how many items were handled (0 = caught up)."""

    @property
    def threads(self) -> int:
        """How many threads `WorkerRunner` runs this worker on. One, unless the worker keeps
        its own threads off each other's work (`memory.passages`)."""
        return 1

    def catch_up_step(self) -> int:
        """One batch of `caesar worker --once`, which takes everything now (the summariser
        does not wait for a conversation to go quiet)."""
        return self.step()


class CursorWorker(Worker, Generic[Prepared]):
    cursor_model: ClassVar[Any]
    source_events: ClassVar[tuple[str, ...]] = audit.CONVERSATION_EVENTS

    def __init__(self, services: Container) -> None:
        self.services = services
        self.db = services.db
        self.audit: audit.Audit = services.audit

    @property
    @abstractmethod
    def batch_size(self) -> int: ...

    @abstractmethod
    def prepare(self, rows: Sequence[AuditLog]) -> Prepared:
        """The slow part, outside any transaction. Must not write to the database."""

    @abstractmethod
    def apply(self, session: Session, rows: Sequence[AuditLog], prepared: Prepared) -> None:
        """Write the outcomes, inside the transaction that advances the cursor."""

    def cursor(self, session: Session) -> int:
        value = session.scalar(
            select(self.cursor_model.last_audit_id).where(self.cursor_model.id == 1)
        )
        return int(value or 0)

    def until(self, session: Session) -> int | None:
        """The last audit id this worker reads (a backfill's end, `BackfillWorker`); None: it
        follows the log for ever."""
        return None

    def _waiting(self, session: Session, after_id: int) -> list[Any]:
        waiting = [AuditLog.id > after_id, AuditLog.event_type.in_(self.source_events)]
        end = self.until(session)
        return waiting if end is None else [*waiting, AuditLog.id <= end]

    def pending(self, session: Session, after_id: int, limit: int) -> Sequence[AuditLog]:
        return session.scalars(
            select(AuditLog)
            .where(*self._waiting(session, after_id))
            .order_by(AuditLog.id)
            .limit(limit)
        ).all()

    def backlog(self) -> int:
        from sqlalchemy import func

        with self.db.read() as session:
            waiting = self._waiting(session, self.cursor(session))
            return int(
                session.scalar(select(func.count()).select_from(AuditLog).where(*waiting)) or 0
            )

    def step(self) -> int:
        with self.db.read() as session:
            start = self.cursor(session)
            rows = self.pending(session, start, self.batch_size)
            session.expunge_all()
        if not rows:
            return 0
        prepared = self.prepare(rows)
        with self.db.write() as session:
            # The append lock before the chat rows, in a forget's order (memory/forget.py): a
            # forget under way has then committed, and its chats are gone, when they are read.
            audit.serialise_appends(session)
            if not rows_still_there(session, rows):
                # Retention swept (or a forget removed) some of these chats while the slow part
                # ran: writing their outcomes would break a foreign key. Nothing is written; the
                # next step reads the batch again without them.
                log.info("%s: chats after %d swept meanwhile; batch redone", self.name, start)
                return len(rows)
            moved = cast(
                CursorResult[Any],
                session.execute(
                    update(self.cursor_model)
                    .where(self.cursor_model.id == 1, self.cursor_model.last_audit_id == start)
                    .values(last_audit_id=rows[-1].id, updated_at=utcnow())
                ),
            ).rowcount
            if moved != 1:
                log.info("%s: batch after %d taken by another worker", self.name, start)
                return len(rows)
            self.apply(session, rows, prepared)
        return len(rows)


# A queue worker draws its batch from this many batches' worth of the queue's head.
SPREAD = 8


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, else the machine's)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def spread(items: Sequence[T], size: int) -> list[T]:
    """`size` of `items` (the head of a queue, oldest first), chosen at random and kept in
    order. Two worker processes on one queue then mostly take different work, instead of
    racing for the same batch, where the loser's LLM and embedding calls are wasted (measured
    by bench/bench_scale_out.py). One worker still takes everything, roughly oldest first."""
    if len(items) <= size:
        return list(items)
    return [items[i] for i in sorted(random.sample(range(len(items)), size))]


def rows_still_there(session: Session, rows: Sequence[AuditLog]) -> bool:
    """Whether every row still exists; FOR KEY SHARE (PostgreSQL) keeps them from being deleted
    until this transaction ends. On SQLite the write transaction's lock already does."""
    ids = [row.id for row in rows]
    query = select(AuditLog.id).where(AuditLog.id.in_(ids))
    found = session.scalars(query.with_for_update(read=True, key_share=True)).all()
    return len(found) == len(ids)


def run_until_caught_up(worker: Worker, on_progress: Callable[[int], None] | None = None) -> int:
    """`caesar worker --once`: steps until a step finds nothing; returns the total handled."""
    total = 0
    while True:
        done = worker.catch_up_step()
        if done == 0:
            return total
        total += done
        if on_progress:
            on_progress(done)


def _audit_crash(worker: Worker, exc: BaseException) -> None:
    services = getattr(worker, "services", None)
    if services is None:
        return
    try:
        with services.db.write() as session:
            services.audit.append(
                Scope(services.owner_id(), session),
                audit.WORKER_CRASHED,
                {
                    "worker": worker.name,
                    "error": f"{type(exc).__name__}: {exc}"[:2000],
                    "traceback": traceback.format_exc()[-4000:],
                },
                # the server's own row
            )
    except Exception:  # the database itself may be what failed; the log line remains
        log.exception("%s: could not audit the crash", worker.name)


# While the database is unreachable (PostgreSQL restarting), a worker tries again this often
# and says so in the log once, then again every OUTAGE_REMINDER_SECONDS while it lasts: not a
# crash with its traceback every interval (a 5 s restart under load logged 240 of them).
OUTAGE_RETRY_SECONDS = 2.0
OUTAGE_REMINDER_SECONDS = 60.0


class BackfillWorker(CursorWorker[Prepared]):
    """A cursor worker that reads the chats from before a migration again and then is idle:
    it stops at its cursor row's `until_audit_id` (set by the migration to the extract
    worker's cursor then; memory.standing, memory.dated)."""

    def until(self, session: Session) -> int:
        value = session.scalar(
            select(self.cursor_model.until_audit_id).where(self.cursor_model.id == 1)
        )
        return int(value or 0)


class _Outage:
    """One worker's view of a database outage, for its log lines."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.since: float | None = None
        self.said_at = 0.0

    def seen(self, exc: OperationalError | InterfaceError) -> None:
        now = time.monotonic()
        if self.since is None or now - self.said_at >= OUTAGE_REMINDER_SECONDS:
            if self.since is None:
                self.since = now
            log.warning(
                "worker %s: database unavailable for %.0f s (%s); trying again every %.0f s",
                self.name,
                now - self.since,
                outage(exc),
                OUTAGE_RETRY_SECONDS,
            )
            self.said_at = now

    def over(self) -> None:
        if self.since is not None:
            log.warning(
                "worker %s: database reachable again after %.0f s",
                self.name,
                time.monotonic() - self.since,
            )
            self.since = None


class WorkerRunner:
    """Runs workers forever, each on its own thread (or on its `threads`), until `stop()`. A
    step that raises is audited as `worker.crashed` and retried after the worker's interval;
    it never kills the process (or the server that hosts it)."""

    def __init__(
        self,
        workers: Sequence[Worker],
        *,
        catch_up_every: float | None = None,
        nice: int | None = None,
    ) -> None:
        """`catch_up_every`: take work without waiting for a conversation to go quiet
        (`catch_up_step`), and look again that many seconds after a step found none, not the
        worker's interval (`caesar import` learning its own rows while the person waits).
        `nice`: each worker thread lowers its own priority by this much (Linux: a thread's
        nice value is its own), the process that hosts them keeps its own."""
        self.workers = list(workers)
        self.catch_up_every = catch_up_every
        self.nice = nice
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _loop(self, worker: Worker) -> None:
        if self.nice and sys.platform == "linux":
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + self.nice)
        outage = _Outage(worker.name)
        while not self._stop.is_set():
            try:
                done = worker.step() if self.catch_up_every is None else worker.catch_up_step()
                outage.over()
            except UNAVAILABLE as exc:  # not the worker's fault: its batch rolled back whole
                outage.seen(exc)
                self._stop.wait(max(worker.interval_seconds, OUTAGE_RETRY_SECONDS))
                continue
            except (CaesarError, Exception) as exc:
                log.exception("worker %s crashed", worker.name)
                _audit_crash(worker, exc)
                done = 0
            if done == 0:
                self._stop.wait(
                    worker.interval_seconds if self.catch_up_every is None else self.catch_up_every
                )

    def start(self) -> None:
        for worker in self.workers:
            count = max(1, worker.threads)
            for k in range(count):
                name = worker.name if count == 1 else f"{worker.name}-{k + 1}"
                thread = threading.Thread(target=self._loop, args=(worker,), name=name, daemon=True)
                thread.start()
                self._threads.append(thread)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def stopped(self, timeout: float) -> bool:
        """Waits up to `timeout` s; True once `stop()` was called."""
        return self._stop.wait(timeout)

    def wait(self) -> None:
        try:
            while not self._stop.is_set():
                self._stop.wait(1.0)
        finally:
            self.stop()
