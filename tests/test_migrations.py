"""Alembic on both engines: a blank database upgraded to head matches the models exactly; down
to base and up again works; `caesar db upgrade` does it from the command line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from typer.testing import CliRunner

from caesar.db import Database, migrate
from caesar.db.models import Base


@pytest.fixture
def blank_db(db_url: str) -> Iterator[Database]:
    db = Database(db_url)
    yield db
    db.dispose()


def schema_diff(db: Database) -> list[object]:
    with db.engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "compare_type": True,
                "compare_server_default": True,
                "include_name": migrate.include_name,
            },
        )
        return list(compare_metadata(context, Base.metadata))


def tables(db: Database) -> set[str]:
    """The model tables present (full-text index tables are not models: left out)."""
    found = set(sa.inspect(db.engine).get_table_names())
    return {t for t in found - {"alembic_version"} if not migrate.is_unmanaged(t)}


def all_tables(db: Database) -> set[str]:
    return set(sa.inspect(db.engine).get_table_names()) - {"alembic_version"}


def test_upgrade_blank_database_matches_the_models(blank_db):
    assert migrate.current_revision(blank_db) is None
    migrate.upgrade(blank_db)
    assert migrate.current_revision(blank_db) == migrate.head_revision()
    assert migrate.is_current(blank_db)
    assert tables(blank_db) == set(Base.metadata.tables)
    assert schema_diff(blank_db) == []


def test_downgrade_to_base_and_up_again(blank_db):
    migrate.upgrade(blank_db)
    migrate.downgrade(blank_db, "base")
    assert migrate.current_revision(blank_db) is None
    assert all_tables(blank_db) == set()  # nothing left behind, full-text tables included
    migrate.upgrade(blank_db)
    assert migrate.is_current(blank_db)
    assert schema_diff(blank_db) == []


def test_upgrade_twice_is_a_no_op(blank_db):
    migrate.upgrade(blank_db)
    migrate.upgrade(blank_db)
    assert migrate.is_current(blank_db)


def test_step_by_step_upgrade_and_downgrade(blank_db):
    """Every revision goes up and comes down on its own (not just head ↔ base)."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(migrate._config())
    revisions = [r.revision for r in reversed(list(script.walk_revisions()))]
    for revision in revisions:
        migrate.upgrade(blank_db, revision)
        assert migrate.current_revision(blank_db) == revision
    for previous in reversed([None, *revisions[:-1]]):
        migrate.downgrade(blank_db, previous or "base")
        assert migrate.current_revision(blank_db) == previous


def test_cursor_rows_exist_after_upgrade(blank_db):
    migrate.upgrade(blank_db)
    cursors = [name for name in Base.metadata.tables if name.endswith("_cursor")]
    assert cursors
    with blank_db.engine.connect() as connection:
        for name in cursors:
            rows = connection.execute(sa.text(f"SELECT id, last_audit_id FROM {name}")).all()
            assert [tuple(r) for r in rows] == [(1, 0)], name


def test_cli_db_upgrade(db_url, tmp_path: Path, monkeypatch):
    from caesar.cli.main import app

    monkeypatch.setenv("CAESAR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CAESAR_DATABASE_URL", db_url)
    runner = CliRunner()
    result = runner.invoke(app, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert f"empty → {migrate.head_revision()}" in result.output
    again = runner.invoke(app, ["db", "upgrade"])
    assert again.exit_code == 0, again.output
    assert f"{migrate.head_revision()} → {migrate.head_revision()}" in again.output
    db = Database(db_url)
    try:
        assert migrate.is_current(db) and schema_diff(db) == []
    finally:
        db.dispose()


def test_cli_db_upgrade_creates_the_home_sqlite_file(tmp_path: Path, monkeypatch):
    from caesar.cli.main import app

    home = tmp_path / "fresh" / ".caesar"
    monkeypatch.setenv("CAESAR_HOME", str(home))
    result = CliRunner().invoke(app, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert (home / "caesar.db").is_file()
