"""every row of memory is one person's (issue #23, step 3)

A `person_id` (NOT NULL, a foreign key to `people`) on the tables of memory: audit rows (chats
and every other event), conversations, facts, episodes (with their recall counters and window
vectors) and semantic chunks; on PostgreSQL also pgvector's `episode_vectors`, copied by its
trigger from the episode. Every existing row becomes the owner's. A fact key and a conversation
key are unique per person now, not per table. The full-text rows (`episode_fts`,
`episode_window_fts`) are keyed by episode id and are scoped through their episode's person.

SQLite cannot add a NOT NULL foreign key in place: the tables are copied (Alembic's batch
mode) with foreign keys switched off for the copy (else dropping `audit_log` would cascade
into the episodes), and the full-text triggers on `episode_summaries` are created again.

Downgrade drops the columns: the rows stay, no longer anyone's. It refuses while anyone but
the owner has a row, whose keys could then collide.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-12
"""

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op

from caesar.db.migrations import _frozen_pgvector as pgvector_migration
from caesar.errors import ConfigError

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# Tables whose ids are never reused (AUTOINCREMENT): a copy keeps that.
_AUTOINCREMENT = {"audit_log", "conversations", "episode_summaries", "semantic_chunks"}
# (table, index on person_id and ..., columns of the unique key that becomes per person)
_TABLES: list[tuple[str, list[str] | None, str | None]] = [
    ("audit_log", ["event_type", "id"], None),
    ("conversations", None, "key"),
    ("facts", None, "key"),
    ("episode_summaries", ["model", "id"], None),
    ("semantic_chunks", ["model", "id"], None),
]
_NAMING = {"uq": "uq_%(table_name)s_%(column_0_name)s"}


@contextmanager
def _sqlite_without_foreign_keys() -> Iterator[None]:
    """Commit what came before, switch foreign keys off (a no-op inside a transaction), do
    the copy in a transaction of its own, check the keys, and switch them on again."""
    bind = op.get_bind()
    bind.exec_driver_sql("COMMIT")
    bind.exec_driver_sql("PRAGMA foreign_keys=OFF")
    bind.exec_driver_sql("BEGIN IMMEDIATE")
    try:
        yield
        broken = bind.exec_driver_sql("PRAGMA foreign_key_check").all()
        if broken:
            raise ConfigError(f"migration 0009 would break foreign keys: {broken[:5]}")
    except BaseException:
        bind.exec_driver_sql("ROLLBACK")
        bind.exec_driver_sql("PRAGMA foreign_keys=ON")
        bind.exec_driver_sql("BEGIN")
        raise
    bind.exec_driver_sql("COMMIT")
    bind.exec_driver_sql("PRAGMA foreign_keys=ON")
    bind.exec_driver_sql("BEGIN IMMEDIATE")


def _owner_id() -> int:
    owner = op.get_bind().scalar(sa.text("SELECT id FROM people WHERE is_owner"))
    if owner is None:
        raise ConfigError("migration 0009 found no owner in `people` (migration 0008 makes one)")
    return int(owner)


@contextmanager
def _sqlite_triggers_set_aside() -> Iterator[None]:
    """Drop every trigger for the copy and create it again after: a table copied is dropped
    with its triggers, and renaming the copy fails on a trigger naming a table in flight."""
    sql = "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
    triggers = op.get_bind().execute(sa.text(sql)).all()
    for name, _sql in triggers:
        op.execute(f"DROP TRIGGER {name}")
    yield
    for _name, create in triggers:
        op.execute(create)


@contextmanager
def _sqlite_sequence_kept(table: str) -> Iterator[dict[str, bool]]:
    """Copy options keeping the table's AUTOINCREMENT, and its sequence as it was before the
    copy: the largest id ever given (a row swept since may have had it), not the copy's
    largest id, so no id is ever given twice."""
    bind = op.get_bind()
    kept = table in _AUTOINCREMENT
    sql = "SELECT seq FROM sqlite_sequence WHERE name = :t"
    seq = bind.scalar(sa.text(sql), {"t": table}) if kept else None
    yield {"sqlite_autoincrement": kept}
    if seq is not None:
        bind.execute(sa.text("DELETE FROM sqlite_sequence WHERE name = :t"), {"t": table})
        bind.execute(
            sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES (:t, :s)"),
            {"t": table, "s": seq},
        )


def _upgrade_sqlite(owner: int) -> None:
    with _sqlite_without_foreign_keys(), _sqlite_triggers_set_aside():
        for table, index, unique in _TABLES:
            # In place first (no copy): the column, every row the owner's. Then one copy makes
            # it NOT NULL with its foreign key, which SQLite cannot add in place.
            op.execute(f"ALTER TABLE {table} ADD COLUMN person_id INTEGER")
            op.execute(f"UPDATE {table} SET person_id = {owner}")
            with (
                _sqlite_sequence_kept(table) as kwargs,
                op.batch_alter_table(
                    table, recreate="always", naming_convention=_NAMING, table_kwargs=kwargs
                ) as batch,
            ):
                batch.alter_column("person_id", existing_type=sa.Integer(), nullable=False)
                batch.create_foreign_key(f"fk_{table}_person", "people", ["person_id"], ["id"])
                if unique:
                    batch.drop_constraint(f"uq_{table}_{unique}", type_="unique")
                    batch.create_unique_constraint(
                        f"uq_{table}_person_{unique}", ["person_id", unique]
                    )
            if index:
                op.create_index(f"idx_{table}_person", table, ["person_id", *index])


def _upgrade_postgresql(owner: int) -> None:
    for table, index, unique in _TABLES:
        # a constant default fills the rows without rewriting the table; then it goes
        op.execute(
            f"ALTER TABLE {table} ADD COLUMN person_id INTEGER NOT NULL DEFAULT {owner} "
            f"CONSTRAINT fk_{table}_person REFERENCES people (id)"
        )
        op.execute(f"ALTER TABLE {table} ALTER COLUMN person_id DROP DEFAULT")
        if unique:
            op.drop_constraint(f"{table}_{unique}_key", table, type_="unique")
            op.create_unique_constraint(f"uq_{table}_person_{unique}", table, ["person_id", unique])
        if index:
            op.create_index(f"idx_{table}_person", table, ["person_id", *index])
    if pgvector_migration.installed(op.get_bind()):
        for statement in pgvector_migration.PERSON_SCHEMA:
            op.execute(statement)


def upgrade() -> None:
    owner = _owner_id()
    if op.get_bind().dialect.name == "sqlite":
        _upgrade_sqlite(owner)
    else:
        _upgrade_postgresql(owner)


def downgrade() -> None:
    bind = op.get_bind()
    owner = _owner_id()
    for table, _index, _unique in _TABLES:
        others = bind.scalar(sa.text(f"SELECT count(*) FROM {table} WHERE person_id <> {owner}"))
        if others:
            raise ConfigError(
                f"{table} holds {others} rows of people other than the owner: remove them "
                "(`caesar people remove`) before downgrading below 0009"
            )
    if bind.dialect.name == "postgresql":
        if pgvector_migration.installed(bind):
            for statement in pgvector_migration.PERSON_SCHEMA_DOWN:
                op.execute(statement)
        for table, index, unique in reversed(_TABLES):
            if index:
                op.drop_index(f"idx_{table}_person", table_name=table)
            if unique:
                op.drop_constraint(f"uq_{table}_person_{unique}", table, type_="unique")
                op.create_unique_constraint(f"{table}_{unique}_key", table, [unique])
            op.execute(f"ALTER TABLE {table} DROP COLUMN person_id")
        return
    with _sqlite_without_foreign_keys(), _sqlite_triggers_set_aside():
        for table, index, unique in reversed(_TABLES):
            if index:
                op.drop_index(f"idx_{table}_person", table_name=table)
            with (
                _sqlite_sequence_kept(table) as kwargs,
                op.batch_alter_table(table, recreate="always", table_kwargs=kwargs) as batch,
            ):
                if unique:
                    batch.drop_constraint(f"uq_{table}_person_{unique}", type_="unique")
                    batch.create_unique_constraint(f"uq_{table}_{unique}", [unique])
                batch.drop_constraint(f"fk_{table}_person", type_="foreignkey")
                batch.drop_column("person_id")
