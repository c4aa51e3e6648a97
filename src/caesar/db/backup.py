"""`caesar db backup`: a copy of the live database. SQLite is copied here, online, in one
snapshot, and the copy verified (integrity and foreign keys, then counted); PostgreSQL's copy
is pg_dump's, whose command is given (docs/reliability.md)."""

from __future__ import annotations

import os
import shlex
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import URL, make_url

from caesar.db.engine import BUSY_TIMEOUT_MS, Database
from caesar.errors import CaesarError, InputError


@dataclass(frozen=True)
class BackupResult:
    path: Path
    bytes: int
    audit_rows: int
    episodes: int
    facts: int


# audit rows, episodes, facts; an episode is one with a summary: a trivial or temporary chat's
# empty row is counted nowhere (the API, the dashboard, forget), nor here
_BACKUP_COUNTS = (
    "SELECT count(*) FROM audit_log",
    "SELECT count(*) FROM episode_summaries WHERE summary != ''",
    "SELECT count(*) FROM facts",
)


def sqlite_path(db: Database) -> Path:
    database = make_url(db.url).database
    if not database or database == ":memory:":
        raise InputError(
            "an in-memory SQLite database cannot be backed up; it is gone when caesar stops"
        )
    return Path(database).expanduser()


def backup_sqlite(db: Database, target: Path) -> BackupResult:
    """Copy the live SQLite database to `target` (which must not exist) and verify the copy."""
    source = sqlite_path(db)
    if not source.is_file():
        raise InputError(f"no database at {source}: nothing to back up")
    target = target.expanduser()
    if target.exists():
        raise InputError(f"{target} already exists: choose a new path (a backup never overwrites)")
    if not target.parent.is_dir():
        raise InputError(f"{target.parent} is not a directory")
    tmp = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        with (
            closing(sqlite3.connect(source, timeout=BUSY_TIMEOUT_MS / 1000)) as src,
            closing(sqlite3.connect(tmp)) as dst,
        ):
            # pages=-1: every page in one step, i.e. one snapshot. Stepwise copying restarts
            # whenever another connection writes, and a busy server writes all the time.
            src.backup(dst, pages=-1)
            # A single self-contained file, not a WAL-mode database with side files.
            dst.execute("PRAGMA journal_mode=DELETE")
            problems = _check(dst)
            if problems:
                raise CaesarError(f"the backup copy failed its integrity check: {problems}")
            counts = [int(dst.execute(sql).fetchone()[0]) for sql in _BACKUP_COUNTS]
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return BackupResult(target, target.stat().st_size, *counts)


def _check(conn: sqlite3.Connection) -> str:
    integrity = [row[0] for row in conn.execute("PRAGMA integrity_check")]
    if integrity != ["ok"]:
        return "; ".join(integrity[:5])
    orphans = conn.execute("PRAGMA foreign_key_check").fetchall()
    if orphans:
        return f"{len(orphans)} rows break a foreign key, e.g. {orphans[0]}"
    return ""


def libpq_url(db: Database) -> str:
    """The database URL as pg_dump takes it, without the password (never printed)."""
    url = make_url(db.url)
    bare = URL.create(
        "postgresql",
        username=url.username,
        host=url.host,
        port=url.port,
        database=url.database,
        query=url.query,
    )
    return bare.render_as_string(hide_password=False)


def pg_dump_command(db: Database, target: Path) -> str:
    return shlex.join(["pg_dump", "--format=custom", f"--file={target}", libpq_url(db)])


def pg_restore_command(db: Database, target: Path) -> str:
    return shlex.join(["pg_restore", f"--dbname={libpq_url(db)}", str(target)])
