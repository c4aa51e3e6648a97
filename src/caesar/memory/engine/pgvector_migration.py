"""Moving a PostgreSQL install's episode vectors into pgvector (issue #24): the schema, what
is left to do, and doing it — batched, resumable, with progress — while chat goes on.

The schema (`install`, run by migration 0007, or later by `migrate` once the extension can be
created): `episode_vectors(episode_id, model, dims, created_at, embedding vector)`, kept in step
with `episode_summaries` by a trigger — in the transaction that writes the row, gone with it
(ON DELETE CASCADE) — from the JSON embedding, the record; trivial (empty) summaries are left
out, as recall skips them. The trigger copies every episode written after it was created; the
older ones are copied by `migrate`, in batches of one transaction each, its place kept in
`episode_vectors_backfill` (so a stopped copy resumes where it stopped). Then the current
model's HNSW index is built (CREATE INDEX CONCURRENTLY: chat keeps writing meanwhile; a build
that was stopped leaves an invalid index, dropped and built again).

Until the copy is finished and the model's index valid (`VectorStatus.ready`), recall keeps
searching its in-process index (memory/engine/pgvector.py, `PgvectorSearch`). One process
migrates at a time (an advisory lock); the others see the result in the database.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, TextClause, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from caesar.db.engine import Database
from caesar.errors import ConfigError
from caesar.memory.engine import person_tables

log = logging.getLogger("caesar.vectors")

# Not SQLAlchemy models: the schema-vs-models comparison skips them (db/migrate.py).
VECTOR_TABLES = ("episode_vectors", "episode_vectors_backfill")
# The largest recall count of a model's episodes in one index probe, not a read of every
# episode (the bound pgvector's over-fetch needs, read before each search). PostgreSQL only.
RECALLS_INDEX = "idx_episode_summaries_model_recalls"
MIN_VERSION = (0, 8)  # iterative index scans: filtered searches still return k rows
BATCH = 2_000  # episodes per copy transaction
_LOCK = 0x6361657361727663  # pg_advisory_lock key of the migration ("caesarvc")
_QUALIFIES = (
    "summary <> '' AND jsonb_typeof(embedding) = 'array' AND jsonb_array_length(embedding) > 0"
)

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
    # An upsert: a copy in flight (migrate) may have written the row's older vector first.
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

# Migration 0009 (issue #23): each vector is its episode's person's, copied by the trigger, so a
# person's search filters on this table alone (HNSW's iterative scan keeps it complete).
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
assert "CREATE OR REPLACE FUNCTION" in PERSON_SCHEMA_DOWN[0]

# (phase, done, total): "copy" counts episodes, "index" the index build's tuples (0 of 0
# while PostgreSQL reports none)
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class VectorStatus:
    """Where one embedding model's vectors stand in this database."""

    installed: bool  # episode_vectors exists (else: `problem` says why not)
    problem: str | None = None  # why pgvector cannot be used here, and the fix
    copied: bool = False  # every episode older than the trigger has been copied
    left: int = 0  # episode ids still to copy (an upper bound on episodes)
    index: str | None = None  # the model's valid HNSW index
    dims: int | None = None  # its dimension

    @property
    def ready(self) -> bool:
        return self.installed and self.copied and self.index is not None

    @property
    def usable(self) -> bool:
        """pgvector can serve here (now, or once `migrate` has run)."""
        return self.installed or self.problem is None

    def describe(self) -> str:
        if not self.installed:
            return self.problem or (
                "pgvector's tables are not in this database yet: `caesar serve` creates them "
                "after its warm-up, or run `caesar db vectors`"
            )
        if not self.copied:
            return f"episode vectors still to copy into pgvector (up to {self.left:,})"
        if self.index is None:
            return "the embedding model's HNSW index is not built yet"
        return f"pgvector ({self.index}, {self.dims} dims)"


def index_prefix(model: str) -> str:
    return f"idx_episode_vectors_hnsw_{hashlib.sha1(model.encode()).hexdigest()[:12]}_"


def index_name(model: str, dim: int) -> str:
    """The HNSW index of `model`'s vectors of `dim` dimensions. Pure."""
    return f"{index_prefix(model)}{dim}"


def literal(value: str) -> str:
    """A string as an SQL literal: a partial index's predicate must appear verbatim in the
    query for the planner to use it, so the model is written into the statement."""
    return "'" + value.replace("'", "''") + "'"


def index_predicate(model: str, dim: int, alias: str = "") -> str:
    """The rows `index_name(model, dim)` holds; a search names them the same way."""
    return f"{alias}model = {literal(model)} AND {alias}dims = {int(dim)}"


# -- what is there ------------------------------------------------------------------------------
def status(session: Session, model: str) -> VectorStatus:
    """A few catalogue reads; nothing is changed."""
    tables = "SELECT to_regclass('episode_vectors'), to_regclass('episode_vectors_backfill')"
    if None in session.execute(text(tables)).one():
        return VectorStatus(installed=False, problem=extension_problem(session))
    state = "SELECT upto, copied_through, finished_at FROM episode_vectors_backfill"
    upto, through, finished = session.execute(text(state)).one()
    found = session.execute(
        text(
            "SELECT c.relname, i.indisvalid FROM pg_class AS c "
            "JOIN pg_index AS i ON i.indexrelid = c.oid WHERE c.relname LIKE :prefix"
        ),
        {"prefix": index_prefix(model).replace("_", r"\_") + "%"},
    ).all()
    # the model's index, not a person's partial one beside it (person_tables.py: <name>_p<id>)
    prefix = index_prefix(model)
    valid = [name for name, ok in found if ok and name[len(prefix) :].isdigit()]
    return VectorStatus(
        installed=True,
        copied=finished is not None,
        left=max(0, int(upto) - int(through)) if finished is None else 0,
        index=valid[0] if valid else None,
        dims=int(valid[0].rsplit("_", 1)[1]) if valid else None,
    )


def extension_problem(session: Session) -> str | None:
    """Why caesar's role cannot use pgvector in this database, and the fix; None when it can
    (the extension is there, or the role may create it). Reads only."""
    where = session.execute(text("SELECT current_database(), current_user")).one()
    database, role = where
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


# -- doing it -----------------------------------------------------------------------------------
def install(session: Session) -> None:
    """Create the extension (if the role may) and the schema, in the caller's transaction;
    idempotent. A ConfigError names the fix when the extension cannot be created."""
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
    if _has_people(session.connection()):
        for statement in PERSON_SCHEMA:
            session.execute(text(statement))


def installed(conn: Connection) -> bool:
    """Whether pgvector's table exists in this database."""
    return conn.scalar(text("SELECT to_regclass('episode_vectors')")) is not None


def _has_people(conn: Connection) -> bool:
    """Whether the episodes are people's yet (migration 0009)."""
    sql = (
        "SELECT 1 FROM information_schema.columns "
        "WHERE table_name = 'episode_summaries' AND column_name = 'person_id'"
    )
    return conn.scalar(text(sql)) is not None


def migrate(
    db: Database,
    model: str,
    *,
    dimension: Callable[[], int] | None = None,
    progress: Progress | None = None,
    batch: int = BATCH,
    wait: bool = False,
) -> VectorStatus:
    """Copy the vectors left to copy, then build `model`'s HNSW index; returns where things
    stand after. Resumable: stop it anywhere and run it again. `dimension` gives the model's
    dimension when it has no vectors yet (a fresh install), so its index exists before they
    come. Another process migrating: wait for it, or (not `wait`) return at once."""
    report = progress or (lambda _phase, _done, _total: None)
    with db.read() as session:
        before = status(session, model)
        missing = person_indexes_missing(session, model=model) if before.ready else []
    if before.ready and not missing:
        return before
    if before.problem is not None:
        raise ConfigError(before.problem)
    with db.exclusively(_LOCK, "migrating the episode vectors", wait=wait) as held:
        if not held:
            return before
        if not before.installed:
            with db.write() as session:
                install(session)
        _copy(db, batch, report)
        _build_index(db, model, dimension, report)
        build_person_indexes(db, report, model=model)
    with db.read() as session:
        return status(session, model)


_PEOPLE_LOCK = 0x6361657361727070  # pg_advisory_lock key of the people's indexes ("caesarpp")


def person_indexes_missing(
    session: Session, *, model: str | None = None, person: int | None = None
) -> list[tuple[str, str]]:
    """A household's people's partial indexes (person_tables.py; `person`'s alone if given;
    beside `model`'s HNSW index only, if given) not built yet, or left invalid by a build that
    was stopped: (name, statement tail) each. An install of one has none: the shared indexes
    are the owner's."""
    people = session.execute(text("SELECT id FROM people ORDER BY id")).scalars().all()
    if len(people) < 2:
        return []
    valid = set(
        session.execute(
            text(
                "SELECT c.relname FROM pg_class AS c JOIN pg_index AS i ON i.indexrelid = c.oid "
                "WHERE i.indisvalid AND c.relname LIKE 'idx\\_episode\\_%\\_p%'"
            )
        ).scalars()
    )
    prefix = None if model is None else index_prefix(model)
    models = person_tables.pg_model_indexes(session.connection(), prefix)
    targets = [p for p in people if person is None or p == person]
    wanted = [w for p in targets for w in person_tables.PersonTables(p).pg_indexes(models)]
    return [(name, tail) for name, tail in wanted if name not in valid]


def build_person_indexes(
    db: Database,
    report: Progress | None = None,
    *,
    model: str | None = None,
    person: int | None = None,
) -> int:
    """Each person's partial indexes that are missing (`person`'s alone, if given), built
    concurrently, outside any transaction of theirs, while chat goes on (a plain CREATE INDEX
    in the transaction writing the person would stop every write to the table while it reads
    it); the indexes of people removed meanwhile are dropped. Until a person's are built, their
    searches use the shared indexes, with the same results. Run by `migrate`, by `caesar serve`
    after its warm-up, after `caesar people add` and a front-end's new person (theirs alone:
    no other process builds a person's who did not exist when it looked). Returns how many were
    built."""
    report = report or (lambda _phase, _done, _total: None)
    if person is not None:
        with db.read() as session:
            missing = person_indexes_missing(session, model=model, person=person)
        return _build_concurrently(db, missing, report)
    with db.exclusively(_PEOPLE_LOCK, "building the people's own indexes", wait=False) as held:
        if not held:
            return 0
        with db.read() as session:
            people = set(session.execute(text("SELECT id FROM people")).scalars())
            gone = [
                name
                for name in session.execute(
                    text("SELECT relname FROM pg_class WHERE relkind = 'i' AND relname ~ :p"),
                    {"p": "^idx_episode_.*_p[0-9]+$"},
                ).scalars()
                if person_tables.pg_index_person(name) not in (None, *people)
            ]
            missing = person_indexes_missing(session, model=model)
        _drop_concurrently(db, gone)
        return _build_concurrently(db, missing, report)


def drop_person_indexes(db: Database, person: int) -> None:
    """A removed person's partial indexes, dropped concurrently (a plain DROP INDEX waits for,
    and then holds up, every search of the table)."""
    with db.read() as session:
        names = session.execute(
            text("SELECT relname FROM pg_class WHERE relkind = 'i' AND relname ~ :p"),
            {"p": f"^idx_episode_.*_p{int(person)}$"},
        ).scalars()
        mine = [n for n in names if person_tables.pg_index_person(n) == int(person)]
    _drop_concurrently(db, mine)


def _ddl(sql: str) -> TextClause:
    # a model's name, written into a predicate, is text: no colon in it is a parameter
    return text(sql.replace(":", "\\:"))


def _drop_concurrently(db: Database, names: list[str]) -> None:
    if not names:
        return
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for name in names:
            conn.execute(_ddl(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))


def _build_concurrently(db: Database, missing: list[tuple[str, str]], report: Progress) -> int:
    if not missing:
        return 0
    report("people", 0, len(missing))
    built = 0
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for done, (name, tail) in enumerate(missing, start=1):
            person = person_tables.pg_index_person(name)
            there = "SELECT 1 FROM people WHERE id = :id"
            if conn.execute(text(there), {"id": person}).first() is not None:
                conn.execute(_ddl(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))
                conn.execute(_ddl(f"CREATE INDEX CONCURRENTLY {tail}"))
                built += 1
            report("people", done, len(missing))
    return built


def _copy(db: Database, batch: int, report: Progress) -> None:
    """The episodes older than the trigger, `batch` ids per transaction, from where the last
    copy stopped (`copied_through`, moved in the same transaction as the rows)."""
    state = "SELECT upto, copied_through, finished_at FROM episode_vectors_backfill"
    with db.read() as session:
        upto, through, finished = session.execute(text(state)).one()
        if finished is not None:
            return
        sql = "SELECT count(*) FROM episode_summaries WHERE id > :after AND id <= :upto"
        total = int(session.execute(text(sql), {"after": through, "upto": upto}).scalar() or 0)
    done = 0
    report("copy", 0, total)
    while True:
        with db.write() as session:
            span = session.execute(
                text(
                    "SELECT count(*), max(id) FROM (SELECT id FROM episode_summaries "
                    "WHERE id > :after AND id <= :upto ORDER BY id LIMIT :n) AS b"
                ),
                {"after": through, "upto": upto, "n": batch},
            ).one()
            end = upto if span[1] is None else int(span[1])
            # FOR KEY SHARE: an episode deleted meanwhile is skipped, not a foreign-key error
            session.execute(
                text(
                    "INSERT INTO episode_vectors (episode_id, model, dims, created_at, embedding, "
                    "person_id) SELECT id, model, jsonb_array_length(embedding), created_at, "
                    "embedding::text::vector, person_id FROM (SELECT * FROM episode_summaries "
                    f"WHERE id > :after AND id <= :end AND {_QUALIFIES} "
                    "ORDER BY id FOR KEY SHARE) AS e ON CONFLICT (episode_id) DO NOTHING"
                ),
                {"after": through, "end": end},
            )
            last = end >= upto
            session.execute(
                text(
                    "UPDATE episode_vectors_backfill SET copied_through = :end, finished_at = "
                    "CASE WHEN :last THEN now() AT TIME ZONE 'UTC' END WHERE id = 1"
                ),
                {"end": end, "last": last},
            )
        through, done = end, min(total, done + int(span[0]))
        report("copy", total if last else done, total)
        if last:
            return


def model_dims(session: Session, model: str) -> int | None:
    """The dimension most of `model`'s vectors have (None: it has none)."""
    sql = (
        "SELECT dims FROM episode_vectors WHERE model = :m GROUP BY dims "
        "ORDER BY count(*) DESC, dims DESC LIMIT 1"
    )
    found = session.execute(text(sql), {"m": model}).scalar()
    return None if found is None else int(found)


def _build_index(
    db: Database, model: str, dimension: Callable[[], int] | None, report: Progress
) -> None:
    with db.read() as session:
        now = status(session, model)
        dim = model_dims(session, model)
        if now.index is not None:
            return
        if dim is None and dimension is None:
            return  # no vectors and no dimension yet: built by a later run
        dim = int(dim if dim is not None else dimension())  # type: ignore[misc]
        odd = session.execute(
            text("SELECT count(*) FROM episode_vectors WHERE model = :m AND dims <> :d"),
            {"m": model, "d": dim},
        ).scalar()
    if odd:
        log.warning(
            "%d episodes of %s have vectors of another size than its %d: they are not "
            "searched (as the in-process index skips them)",
            odd,
            model,
            dim,
        )
    name = index_name(model, dim)
    build = (
        f"CREATE INDEX CONCURRENTLY {name} ON episode_vectors "
        f"USING hnsw ((embedding::vector({dim})) vector_cosine_ops) "
        f"WHERE {index_predicate(model, dim)}"
    )
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        # an invalid index is a build that was stopped: built again from the start
        conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))
        _run_watched(db, conn, build, report)
        conn.execute(text("ANALYZE episode_vectors"))


def _run_watched(db: Database, conn: Connection, sql: str, report: Progress) -> None:
    """Run the index build on `conn` in a thread, reporting PostgreSQL's progress of it."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            conn.execute(text(sql))
        except BaseException as exc:  # re-raised below, in the caller's thread
            failed.append(exc)

    pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
    builder = threading.Thread(target=run, name="vector-index", daemon=True)
    builder.start()
    watch = text(
        "SELECT tuples_done, tuples_total FROM pg_stat_progress_create_index WHERE pid = :pid"
    )
    report("index", 0, 0)
    while builder.is_alive():
        builder.join(timeout=1.0)
        with db.engine.connect() as probe:
            row = probe.execute(watch, {"pid": pid}).first()
        if row is not None and builder.is_alive():
            report("index", int(row[0] or 0), int(row[1] or 0))
    if failed:
        raise failed[0]
    report("index", 1, 1)


def progress_log(emit: Callable[[str], None], every: float = 5.0) -> Progress:
    """A Progress that says where the migration is at most every `every` seconds, and when a
    phase starts and ends."""
    last_at, last_phase = [0.0], [""]

    def report(phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        start = phase != last_phase[0]
        end = total > 0 and done >= total
        if not (start or end or now - last_at[0] >= every):
            return
        last_at[0], last_phase[0] = now, phase
        if phase == "people":
            emit(f"the people's own search indexes: {done:,} of {total:,} built")
        elif phase == "copy":
            share = f" ({100 * done / total:.0f}%)" if total else ""
            emit(f"episode vectors: {done:,} of {total:,} episodes copied into pgvector{share}")
        elif end:
            emit("episode vectors: HNSW index built; recall searches pgvector")
        elif total:
            emit(f"episode vectors: building the HNSW index, {done:,} of {total:,} vectors")
        else:
            emit("episode vectors: building the HNSW index (chat goes on meanwhile)")

    return report
