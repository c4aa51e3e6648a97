"""One engine per process, and the two kinds of transaction caesar uses.

SQLite allows one writer. A deferred transaction that reads and then writes can fail with
"database is locked" no matter the busy timeout (its snapshot is stale), so every write
transaction starts with BEGIN IMMEDIATE and waits its turn; reads stay deferred and, in WAL
mode, never block or get blocked. Writes are kept short: nothing slow (LLM calls, embedding)
ever runs inside one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

BUSY_TIMEOUT_MS = 30_000
T = TypeVar("T")
log = logging.getLogger(__name__)

# What an unreachable database raises (PostgreSQL down or restarting; SQLite busy past its
# timeout): the statement's transaction was rolled back, so nothing of it was kept.
UNAVAILABLE = (OperationalError, InterfaceError)


def outage(exc: OperationalError | InterfaceError) -> str:
    """The driver's own first line of the error, for a log line."""
    lines = str(exc.orig or exc).splitlines() or [type(exc).__name__]
    return lines[0][:300]


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event emit BEGIN itself (pysqlite's own is always DEFERRED).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        # Freed pages are zeroed: what the operator forgets (memory/forget.py) is not left
        # readable in the file.
        cursor.execute("PRAGMA secure_delete=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


class Database:
    """The engine plus `read()` / `write()` sessions. Create one per process."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = url
        parsed = make_url(url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        kwargs: dict[str, Any] = {"echo": echo}
        if self.is_sqlite:
            if parsed.database and parsed.database != ":memory:":
                Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000}
            kwargs["pool_size"] = 8
            kwargs["max_overflow"] = 16
        else:
            kwargs["pool_size"] = 10
            kwargs["max_overflow"] = 20
            kwargs["pool_pre_ping"] = True
        self.engine = create_engine(url, **kwargs)
        if self.is_sqlite:
            _sqlite_setup(self.engine)
            write_bind: Any = self.engine.execution_options(sqlite_begin="IMMEDIATE")
        else:
            write_bind = self.engine
        self._read = sessionmaker(self.engine, expire_on_commit=False)
        self._write = sessionmaker(write_bind, expire_on_commit=False)
        # Re-entrant: a write may run a helper that opens a write itself.
        self._write_lock: threading.RLock | nullcontext[None] = (
            threading.RLock() if self.is_sqlite else nullcontext()
        )

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._read() as session:
            yield session

    def reachable(self) -> bool:
        """Whether a statement runs now: False while PostgreSQL is down or restarting (the
        pool's pre-ping reconnects once it is back). The error goes to the log."""
        try:
            with self._read() as session:
                session.execute(text("SELECT 1"))
        except UNAVAILABLE as exc:
            log.warning("database unreachable: %s", outage(exc))
            return False
        return True

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A short write transaction, committed on success, rolled back on any error.

        On SQLite, threads of one process queue on a lock first: SQLite's own busy handler
        polls with growing sleeps and is unfair, so under 50 concurrent chats a writer could
        wait 20 s; a FIFO-ish in-process lock keeps the wait to the writes ahead of it
        (measured p99 7.1 s → 2.5 s at equal throughput). Other processes still queue on
        SQLite's lock (BEGIN IMMEDIATE + busy timeout)."""
        with self._write_lock, self._write() as session, session.begin():
            yield session

    def write_retrying(self, work: Callable[[Session], T], attempts: int = 3) -> T:
        """`work(session)` in a write transaction, run again from the start if PostgreSQL
        aborted the transaction as a deadlock victim or a serialization failure: it was rolled
        back whole, so running it again is safe, and a chat turn's record is not lost to a
        lock cycle with a background worker. Any other error is raised at once."""
        for attempt in range(1, attempts + 1):
            try:
                with self.write() as session:
                    return work(session)
            except OperationalError as exc:
                if attempt == attempts or not is_transient(exc):
                    raise
                log.warning("write transaction retried (attempt %d): %s", attempt, exc.orig)
        raise AssertionError("unreachable")  # the loop returns or raises

    @contextmanager
    def exclusively(self, key: int, what: str, *, wait: bool) -> Iterator[bool]:
        """PostgreSQL: the session-level advisory lock `key`, held while the block runs, so one
        process at a time does `what`, a long job (moving the vectors, indexing words again).
        Yields whether it is held: another process holding it yields False at once (the job is
        left to it), or with `wait`, is waited for."""
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as lock:
            held = bool(lock.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar())
            if not held:
                log.info(
                    "another process is %s: %s", what, "waiting for it" if wait else "left to it"
                )
            if not held and wait:
                lock.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
                held = True
            try:
                yield held
            finally:
                if held:
                    lock.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})

    @property
    def copies_itself(self) -> bool:
        """Whether `caesar db backup` copies the database itself (SQLite's online backup);
        PostgreSQL's copy is pg_dump's."""
        return self.is_sqlite

    def snapshot(self, session: Session) -> None:
        """Make every statement of `session`'s read transaction see one snapshot (PostgreSQL:
        REPEATABLE READ; SQLite's read transaction is one already). Before its first
        statement."""
        if not self.is_sqlite:
            session.connection(execution_options={"isolation_level": "REPEATABLE READ"})

    def dispose(self) -> None:
        self.engine.dispose()


# PostgreSQL SQLSTATEs of a transaction aborted only for running beside another one.
TRANSIENT_SQLSTATES = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure


def transaction_lock(session: Session, key: int) -> None:
    """PostgreSQL: take the transaction-scoped advisory lock `key` (held until the
    transaction ends, so one transaction at a time holds it). SQLite: nothing to take, it has
    one writer at a time."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def is_transient(exc: OperationalError) -> bool:
    return getattr(exc.orig, "sqlstate", None) in TRANSIENT_SQLSTATES
