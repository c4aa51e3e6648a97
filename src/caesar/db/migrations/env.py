"""Alembic environment: run programmatically by caesar.db.migrate (never needs alembic.ini)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from caesar.db.migrate import include_name
from caesar.db.models import Base

config = context.config


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite cannot ALTER much
        compare_type=True,
        include_name=include_name,  # full-text tables live outside the models
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `caesar db upgrade` (caesar.db.migrate)")
_run(connection)
