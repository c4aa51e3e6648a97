"""Database.write_retrying: a write transaction PostgreSQL aborts only for running beside another
one (deadlock victim, serialization failure) is run again from the start; any other error is
raised at once — on a real PostgreSQL, whose own errors are raised here with those SQLSTATEs."""

from __future__ import annotations

import pytest
from conftest import OWNER
from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError, OperationalError

from caesar import audit
from caesar.db import Database, migrate
from caesar.db.models import AuditLog
from caesar.memory.scope import Scope


@pytest.fixture
def pg_db(pg_url):
    db = Database(pg_url)
    migrate.upgrade(db)
    yield db
    db.dispose()


def _raise(session, sqlstate: str) -> None:
    session.execute(
        text(f"DO $$ BEGIN RAISE EXCEPTION 'test' USING ERRCODE = '{sqlstate}'; END $$")
    )


def _rows(db: Database) -> int:
    with db.read() as session:
        return int(session.scalar(select(func.count()).select_from(AuditLog)) or 0)


@pytest.mark.parametrize("sqlstate", ["40P01", "40001"])
def test_a_deadlock_victim_is_run_again_and_written_once(pg_db, sqlstate):
    attempts = []

    def work(session):
        attempts.append(1)
        audit.Audit().append(Scope(OWNER, session), "test.row", {"n": len(attempts)})
        if len(attempts) == 1:
            _raise(session, sqlstate)  # after a write: the rollback must take it back
        return len(attempts)

    assert pg_db.write_retrying(work) == 2
    assert _rows(pg_db) == 1


def test_other_errors_and_the_last_attempt_are_raised(pg_db):
    with pytest.raises(IntegrityError):  # unique_violation: not transient, not retried
        pg_db.write_retrying(lambda session: _raise(session, "23505"))
    tried = []

    def lock_not_available(session):  # an OperationalError too, but not a lock cycle
        tried.append(1)
        _raise(session, "55P03")

    with pytest.raises(OperationalError):
        pg_db.write_retrying(lock_not_available)
    assert len(tried) == 1
    attempts = []

    def always(session):
        attempts.append(1)
        _raise(session, "40P01")

    with pytest.raises(OperationalError):
        pg_db.write_retrying(always, attempts=3)
    assert len(attempts) == 3 and _rows(pg_db) == 0
