"""pgvector's copy of the episode vectors (PostgreSQL), as migrations 0007 and 0009 create it: a
frozen copy, as of 2026-12-07, of `caesar.memory.engine.pgvector_migration`'s `RECALLS_INDEX`,
`MIN_VERSION`, `SCHEMA`, `PERSON_SCHEMA`, `PERSON_SCHEMA_DOWN`, `extension_problem`, `install`
and `installed`.

A migration carries the code it runs, so that its meaning does not drift when live code
changes. Do not edit this to follow live code. Live code installs the same schema where
migration 0007 could not (the extension was missing then), so the two must agree: a change to
the live schema needs a migration of its own. tests/test_migrations_frozen.py fails when this
and live code disagree.
"""

from __future__ import annotations

from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from caesar.errors import ConfigError

RECALLS_INDEX = "idx_episode_summaries_model_recalls"
MIN_VERSION = (0, 8)  # iterative index scans: filtered searches still return k rows

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS episode_vectors (
        episode_id INTEGER PRIMARY KEY REFERENCES episode_summaries (id) ON DELETE CASCADE,
        model VARCHAR(200) NOT NULL,
        dims INTEGER NOT NULL,
        created_at TIMESTAMP WITHOUT TIME ZONE NOT NULL,
        embedding vector NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS idx_episode_vectors_model_id ON episode_vectors (model, episode_id)",
    f"CREATE INDEX IF NOT EXISTS {RECALLS_INDEX} ON episode_summaries (model, recall_count)",
    """CREATE TABLE IF NOT EXISTS episode_vectors_backfill (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        upto BIGINT NOT NULL,
        copied_through BIGINT NOT NULL DEFAULT 0,
        finished_at TIMESTAMP WITHOUT TIME ZONE
    )""",
    # An upsert: a copy in flight may have written the row's older vector first.
    """CREATE OR REPLACE FUNCTION episode_vectors_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.summary <> '' AND jsonb_typeof(NEW.embedding) = 'array'
           AND jsonb_array_length(NEW.embedding) > 0 THEN
            INSERT INTO episode_vectors (episode_id, model, dims, created_at, embedding)
            VALUES (NEW.id, NEW.model, jsonb_array_length(NEW.embedding), NEW.created_at,
                    NEW.embedding::text::vector)
            ON CONFLICT (episode_id) DO UPDATE SET model = EXCLUDED.model,
                dims = EXCLUDED.dims, created_at = EXCLUDED.created_at,
                embedding = EXCLUDED.embedding;
        ELSIF TG_OP = 'UPDATE' THEN
            DELETE FROM episode_vectors WHERE episode_id = OLD.id;
        END IF;
        RETURN NULL;
    END $$""",
    "DROP TRIGGER IF EXISTS episode_vectors_sync ON episode_summaries",
    (
        "CREATE TRIGGER episode_vectors_sync AFTER INSERT OR UPDATE OF summary, embedding, "
        "model, created_at ON episode_summaries FOR EACH ROW EXECUTE FUNCTION episode_vectors_sync()"
    ),
    # After the trigger (whose lock waits out writes in flight): every episode up to here is
    # the copy's, every later one the trigger's. Nothing to copy: finished at once.
    """INSERT INTO episode_vectors_backfill (id, upto, finished_at)
    SELECT 1, coalesce(max(id), 0), CASE WHEN max(id) IS NULL THEN now() AT TIME ZONE 'UTC' END
    FROM episode_summaries ON CONFLICT (id) DO NOTHING""",
]

# Migration 0009: each vector is its episode's person's, copied by the trigger.
PERSON_SCHEMA = [
    "ALTER TABLE episode_vectors ADD COLUMN IF NOT EXISTS person_id INTEGER",
    """UPDATE episode_vectors AS v SET person_id = e.person_id FROM episode_summaries AS e
    WHERE e.id = v.episode_id AND v.person_id IS NULL""",
    "ALTER TABLE episode_vectors ALTER COLUMN person_id SET NOT NULL",
    """CREATE INDEX IF NOT EXISTS idx_episode_vectors_person
    ON episode_vectors (person_id, model, episode_id)""",
    """CREATE OR REPLACE FUNCTION episode_vectors_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.summary <> '' AND jsonb_typeof(NEW.embedding) = 'array'
           AND jsonb_array_length(NEW.embedding) > 0 THEN
            INSERT INTO episode_vectors (episode_id, model, dims, created_at, embedding,
                                         person_id)
            VALUES (NEW.id, NEW.model, jsonb_array_length(NEW.embedding), NEW.created_at,
                    NEW.embedding::text::vector, NEW.person_id)
            ON CONFLICT (episode_id) DO UPDATE SET model = EXCLUDED.model,
                dims = EXCLUDED.dims, created_at = EXCLUDED.created_at,
                embedding = EXCLUDED.embedding, person_id = EXCLUDED.person_id;
        ELSIF TG_OP = 'UPDATE' THEN
            DELETE FROM episode_vectors WHERE episode_id = OLD.id;
        END IF;
        RETURN NULL;
    END $$""",
]
PERSON_SCHEMA_DOWN = [SCHEMA[4], "ALTER TABLE episode_vectors DROP COLUMN person_id"]


def extension_problem(session: Session) -> str | None:
    """Why caesar's role cannot use pgvector in this database, and the fix; None when it can
    (the extension is there, or the role may create it). Reads only."""
    database, role = session.execute(text("SELECT current_database(), current_user")).one()
    then = (
        "Meanwhile recall searches an in-process index, as before. After the fix, restart "
        "`caesar serve` (it migrates in the background) or run `caesar db vectors`."
    )
    sql = "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
    version = session.execute(text(sql)).scalar()
    if version is not None:
        if _version(version) < MIN_VERSION:
            return (
                f"pgvector {version} is older than 0.8 (caesar needs its iterative index "
                f"scans): install pgvector >= 0.8 on the server, then `ALTER EXTENSION vector "
                f"UPDATE;` in database {database}. {then}"
            )
        return None
    sql = "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
    if session.execute(text(sql)).first() is None:
        return (
            "pgvector is not installed on the PostgreSQL server: install pgvector >= 0.8 "
            "(e.g. the postgresql-<version>-pgvector package, or from github.com/pgvector/"
            f"pgvector), then as a superuser `CREATE EXTENSION vector;` in database "
            f"{database}. {then}"
        )
    allowed = session.execute(
        text(
            "SELECT r.rolsuper OR (v.trusted AND has_database_privilege(current_database(), "
            "'CREATE')) FROM pg_roles AS r, pg_available_extension_versions AS v "
            "WHERE r.rolname = current_user AND v.name = 'vector' "
            "AND v.version = (SELECT default_version FROM pg_available_extensions "
            "WHERE name = 'vector')"
        )
    ).scalar()
    if not allowed:
        return (
            f"caesar's role {role} may not create the pgvector extension (that takes a "
            f"superuser): as a superuser, run `CREATE EXTENSION vector;` in database "
            f"{database}; caesar's role needs no more than it has. {then}"
        )
    return None


def _version(value: str) -> tuple[int, ...]:
    return tuple(int(part) for part in value.split(".")[:2] if part.isdigit())


def install(session: Session) -> None:
    """Create the extension (if the role may) and the schema, in the caller's transaction;
    idempotent. A ConfigError names the fix when the extension cannot be created.

    Live code's `install` also runs `PERSON_SCHEMA` once the episodes have a `person_id`: never
    so at migration 0007, whose episodes have none (0009 adds it, and runs `PERSON_SCHEMA`)."""
    problem = extension_problem(session)
    if problem is not None:
        raise ConfigError(problem)
    try:
        with session.begin_nested():
            session.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
    except DBAPIError as exc:  # e.g. a privilege the catalogue did not show
        raise ConfigError(
            f"CREATE EXTENSION vector failed ({exc.orig}): as a superuser, run "
            "`CREATE EXTENSION vector;` in caesar's database, then `caesar db vectors`."
        ) from None
    for statement in SCHEMA:
        session.execute(text(statement))


def installed(conn: Connection) -> bool:
    """Whether pgvector's table exists in this database."""
    return conn.scalar(text("SELECT to_regclass('episode_vectors')")) is not None
