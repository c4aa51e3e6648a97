"""Each person's own indexes: on SQLite their full-text tables (migration 0017;
memory/engine/sqlite.py searches them), on PostgreSQL their partial indexes (a GIN over their
`episode_fts` rows, an HNSW over their `episode_vectors` rows for each embedding model's index;
memory/engine/postgres.py and pgvector.py name the person in their queries so that the planner
takes them; memory/engine/pgvector_migration.py builds and drops them, concurrently, outside
any transaction of the person's). Their names and the statements that make and drop them.
Imports nothing of caesar's, so the `Person` model's events (db/models.py) can make a
person's SQLite tables as the person is written.

Why on PostgreSQL: among 100 people with 10k episodes each, one person's search over the
shared HNSW index, filtered to their 1 %, ran 127 ms a turn against 7 ms alone (pgvector's
iterative scan walks everyone's vectors to find k of theirs), and over the shared GIN index 9.9
against 2.5 ms (docs/performance.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import Connection

# Must equal migration 0002's FTS5 tokenizer: query words are tokenized with it to look their
# document counts up in the index's vocabulary (porter stems "hiking" to "hike").
SQLITE_TOKENIZE = "porter unicode61 remove_diacritics 2"
# `episode_fts` rowid of person p's episode e: p << PERSON_SHIFT | e (migration 0011).
PERSON_SHIFT = 40
EPISODE_MASK = (1 << PERSON_SHIFT) - 1

# Not SQLAlchemy models (FTS5 cannot be declared; PostgreSQL's twin is trigger-maintained):
# the schema-vs-models comparison must skip these (FTS5's shadow tables included). The SQLite
# names are those of migrations 0002–0016; from 0017 each person has their own tables
# (memory/engine/sqlite.py, `is_person_index`).
KEYWORD_TABLES = (
    "episode_fts",
    "episode_fts_data",
    "episode_fts_idx",
    "episode_fts_content",
    "episode_fts_docsize",
    "episode_fts_config",
    "episode_fts_vocab",  # fts5vocab over episode_fts (migration 0003, SQLite only)
    # windows' words (migration 0005, memory/engine/window_keywords.py): contentless on SQLite
    "episode_window_fts",
    "episode_window_fts_data",
    "episode_window_fts_idx",
    "episode_window_fts_docsize",
    "episode_window_fts_config",
    "episode_fts_counts",  # each person's number of episode_fts rows (0014, PostgreSQL only)
    "episode_fts_words",  # each person's documents per word (0016, PostgreSQL only)
    "fulltext_reindex",  # where the reindex under FTS5's words stands (0015, PostgreSQL only)
)

# A person's tables: episode_fts_p<id> (+ _vocab) and episode_window_fts_p<id>, with FTS5's
# shadow tables (_data, _idx, _content, _docsize, _config).
PERSON_INDEX = re.compile(r"episode_(window_)?fts_p\d+(_[a-z]+)?")
# A chat row's conversation text, as the index holds it (= migration 0002's).
CONVERSATION_TEXT = """
    coalesce((SELECT group_concat(json_extract(m.value, '$.content'), char(10))
              FROM json_each(a.payload, '$.messages') AS m
              WHERE json_type(m.value) = 'object'
                AND json_extract(m.value, '$.role') IN ('user', 'assistant')), '')
    || char(10) || coalesce(json_extract(a.payload, '$.reply'), '')
"""


def is_person_index(name: str) -> bool:
    """Whether `name` is one of a person's full-text tables (or its FTS5 shadow). Pure."""
    return PERSON_INDEX.fullmatch(name) is not None


@dataclass(frozen=True)
class PersonTables:
    """One person's own tables and indexes: their names, the statements that make and drop
    them, and the keys of their rows. Pure but for `create` and `drop`."""

    person: int

    @property
    def fts(self) -> str:
        """The person's episode full-text table (SQLite)."""
        return f"episode_fts_p{int(self.person)}"

    @property
    def windows(self) -> str:
        """The person's window full-text table (SQLite)."""
        return f"episode_window_fts_p{int(self.person)}"

    def rowid(self, episode_id: int) -> int:
        """The `episode_fts` rowid of the person's episode `episode_id` (migration 0011)."""
        return (self.person << PERSON_SHIFT) | episode_id

    def rowids(self) -> tuple[int, int]:
        """The smallest and largest `episode_fts` rowid the person's episodes may take."""
        return self.rowid(0), self.rowid(EPISODE_MASK)

    def ddl(self) -> list[str]:
        """Statements creating the person's full-text tables and the triggers that keep their
        episode table (idempotent)."""
        p, fts, windows = int(self.person), self.fts, self.windows
        new_key = f"(new.person_id << {PERSON_SHIFT}) | new.id"
        old_key = f"(old.person_id << {PERSON_SHIFT}) | old.id"
        insert = f"""
        INSERT INTO {fts} (rowid, summary, conversation)
        SELECT {new_key}, new.summary, {CONVERSATION_TEXT}
        FROM audit_log AS a
        WHERE a.id = new.audit_log_id AND new.summary != '' AND new.person_id = {p};"""
        return [
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {fts} USING "
            f"fts5(summary, conversation, tokenize = '{SQLITE_TOKENIZE}')",
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {fts}_vocab USING fts5vocab({fts}, 'row')",
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {windows} USING "
            f"fts5(body, content = '', tokenize = '{SQLITE_TOKENIZE}')",
            f"CREATE TRIGGER IF NOT EXISTS {fts}_insert AFTER INSERT ON episode_summaries "
            f"WHEN new.person_id = {p} BEGIN {insert} END",
            f"CREATE TRIGGER IF NOT EXISTS {fts}_delete AFTER DELETE ON episode_summaries "
            f"WHEN old.person_id = {p} BEGIN DELETE FROM {fts} WHERE rowid = {old_key}; END",
            f"CREATE TRIGGER IF NOT EXISTS {fts}_update "
            "AFTER UPDATE OF summary, audit_log_id, person_id ON episode_summaries "
            f"WHEN old.person_id = {p} OR new.person_id = {p} "
            f"BEGIN DELETE FROM {fts} WHERE rowid = {old_key}; {insert} END",
        ]

    def create(self, connection: Connection) -> None:
        for sql in self.ddl():
            connection.exec_driver_sql(sql)

    def drop(self, connection: Connection) -> None:
        """Drop the person's full-text tables and triggers: every word of theirs goes too."""
        fts = self.fts
        for sql in (
            *(f"DROP TRIGGER IF EXISTS {fts}_{t}" for t in ("insert", "delete", "update")),
            f"DROP TABLE IF EXISTS {fts}_vocab",
            f"DROP TABLE IF EXISTS {fts}",
            f"DROP TABLE IF EXISTS {self.windows}",
        ):
            connection.exec_driver_sql(sql)

    def pg_fts_index(self) -> tuple[str, str]:
        """(name, CREATE INDEX … ON … statement tail) of the person's GIN index."""
        name = f"idx_episode_fts_document_p{int(self.person)}"
        return (
            name,
            f"{name} ON episode_fts USING GIN (document) WHERE person_id = {int(self.person)}",
        )

    def pg_vector_index(self, model_index: str, column: str, predicate: str) -> tuple[str, str]:
        """(name, statement tail) of the person's HNSW index beside the model's `model_index`,
        over `column` (e.g. `(embedding::vector(384)) vector_cosine_ops`) where `predicate`."""
        name = f"{model_index}_p{int(self.person)}"
        return name, (
            f"{name} ON episode_vectors USING hnsw ({column}) "
            f"WHERE ({predicate}) AND person_id = {int(self.person)}"
        )

    def pg_indexes(self, models: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
        """The person's partial indexes: their GIN, and one beside each of `models`
        (`pg_model_indexes`): (name, statement tail) each."""
        return [self.pg_fts_index(), *(self.pg_vector_index(*model) for model in models)]


# -- PostgreSQL ---------------------------------------------------------------------------------
# A person's partial indexes end in _p<id>: the GIN `idx_episode_fts_document_p<id>` and, per
# embedding model's HNSW index `idx_episode_vectors_hnsw_<model>_<dim>`, `<that>_p<id>`.
PG_PERSON_INDEX = re.compile(r"idx_episode_(?:fts_document|vectors_hnsw_[0-9a-f]{12}_\d+)_p\d+")
_PG_MODEL_INDEX = "^idx_episode_vectors_hnsw_[0-9a-f]{12}_[0-9]+$"


def pg_model_indexes(
    connection: Connection, model_prefix: str | None = None
) -> list[tuple[str, str, str]]:
    """The embedding models' valid HNSW indexes (those whose names start with `model_prefix`,
    if given) a person's are made beside: (name, column, predicate) each; none before pgvector's
    table exists."""
    if connection.exec_driver_sql("SELECT to_regclass('episode_vectors')").scalar() is None:
        return []
    models = connection.exec_driver_sql(
        "SELECT c.relname, pg_get_indexdef(i.indexrelid, 1, true), "
        "pg_get_expr(i.indpred, i.indrelid, true) FROM pg_index AS i "
        "JOIN pg_class AS c ON c.oid = i.indexrelid "
        f"WHERE i.indisvalid AND c.relname ~ '{_PG_MODEL_INDEX}' ORDER BY c.relname"
    ).all()
    return [
        (name, f"{column} vector_cosine_ops", predicate)
        for name, column, predicate in models
        if model_prefix is None or name.startswith(model_prefix)
    ]


def pg_index_person(name: str) -> int | None:
    """Whose partial index `name` is (None: not a person's). Pure."""
    if PG_PERSON_INDEX.fullmatch(name) is None:
        return None
    return int(name.rsplit("_p", 1)[1])
