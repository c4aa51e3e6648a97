"""Alembic driven from code: `caesar db upgrade` and the test suite call `upgrade(db)`."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from caesar.db.engine import Database

MIGRATIONS = Path(__file__).parent / "migrations"


def unmanaged_tables() -> frozenset[str]:
    """Tables migrations create that are not SQLAlchemy models (full-text indexes, FTS5 shadow
    tables, pgvector's copy of the embeddings): autogenerate and the schema-vs-models test
    skip them."""
    from caesar.memory.engine.person_tables import KEYWORD_TABLES
    from caesar.memory.engine.pgvector_migration import VECTOR_TABLES

    return frozenset(KEYWORD_TABLES + VECTOR_TABLES)


def is_unmanaged(name: str) -> bool:
    """Whether the table `name` is unmanaged: one of `unmanaged_tables`, or one of a person's
    full-text tables on SQLite (memory/engine/sqlite.py, made as people are added)."""
    from caesar.memory.engine.sqlite import is_person_index

    return name in unmanaged_tables() or is_person_index(name)


def unmanaged_indexes() -> frozenset[str]:
    """Indexes migrations create on model tables outside the models (PostgreSQL's for
    pgvector's search)."""
    from caesar.memory.engine.pgvector_migration import RECALLS_INDEX

    return frozenset({RECALLS_INDEX})


def include_name(name: str | None, type_: str, _parent_names: object) -> bool:
    """Alembic's `include_name` hook: compare everything but the unmanaged tables and
    indexes."""
    if type_ == "index":
        return name not in unmanaged_indexes()
    return not (type_ == "table" and name is not None and is_unmanaged(name))


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def upgrade(db: Database, revision: str = "head") -> None:
    cfg = _config()
    with db.engine.begin() as connection:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, revision)


def downgrade(db: Database, revision: str) -> None:
    cfg = _config()
    with db.engine.begin() as connection:
        cfg.attributes["connection"] = connection
        command.downgrade(cfg, revision)


def current_revision(db: Database) -> str | None:
    with db.engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(_config()).get_current_head()


def is_current(db: Database) -> bool:
    return current_revision(db) == head_revision()
