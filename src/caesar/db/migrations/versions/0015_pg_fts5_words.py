"""PostgreSQL's full text cuts and counts words as SQLite's FTS5 does (issue #24)

Why: on LongMemEval dev, PostgreSQL's prompts differed from SQLite's for 72 of 160 questions
(answer in prompt 0.641 against 0.612, all evidence 0.950 against 0.963), where the issue asks
for the same figures within 0.005. Two causes (docs/recall-quality.md, "Why the engines
differ"): the words, and how BM25 counts them (memory/search/postgres.py). The words:

- A text search configuration `caesar_porter`: the english parser, each word unaccented and
  stemmed by the original Porter stemmer, no stop words dropped — as FTS5's
  `porter unicode61 remove_diacritics 2` (PostgreSQL's `english` stems by Porter2 and drops
  its stop words). Hyphenated words are indexed by their parts only, as FTS5 splits them.
- A column `tokens` on `episode_fts` and `episode_window_fts`: a row's number of words, BM25's
  document length as FTS5 counts it (PostgreSQL's `length()` is the distinct words), set from
  the tsvector (`caesar_tokens`) by a trigger whenever a row's words are written. Until an
  older row is indexed again it is NULL, and search takes `length()` in its stead.
- The episodes' trigger writes the new words from now on, as does the windows' writer. The
  rows written before are indexed again afterwards, in the background, batched and resumable
  (caesar.memory.engine.pg_words: `caesar serve` once ready, or `caesar db words`); this
  migration is quick whatever the size.

Without the `unaccent` extension (not installed, or the role may not create it) the
configuration stems without unaccenting, with a warning: only accented words then differ
from SQLite. Once a superuser creates it, `caesar db words` (or `caesar serve`) puts it in and
indexes the older rows again (`pg_words.mend_unaccent`).

SQLite: nothing.

Downgrade indexes every row under `english` again, here (batched, with progress: a frozen
copy of the live reindex's batch, `_reindex_batch`), and drops the column, the state and the
configuration.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

from __future__ import annotations

import logging
import time

import sqlalchemy as sa
from alembic import op
from sqlalchemy.exc import DBAPIError

from caesar.db.migrations._frozen_turns import conversation_turns, windows

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

log = logging.getLogger("caesar.migrations")

# Live code reads what these name (caesar.memory.engine.pg_words.WORDS and STATE):
# tests/test_migrations_frozen.py holds them equal.
CONFIG = "caesar_porter"
STATE = "fulltext_reindex"
# The english parser's word tokens; the hyphenated whole words (asciihword, hword, numhword)
# are dropped, their parts kept.
_WORDS = "asciiword, word, numword, hword_part, hword_asciipart, hword_numpart"
_WHOLE_HYPHENATED = "asciihword, hword, numhword"

# Frozen here (a migration must not change when runtime code does): migration 0002's
# `episode_fts_sync` under the new words, and the reindex's state (caesar.memory.engine.pg_words;
# the document of an episode is that module's `document`, which the reindex writes).
_CONVERSATION = """
    coalesce((SELECT string_agg(m.value ->> 'content', E'\\n' ORDER BY m.ordinality)
              FROM jsonb_array_elements(
                  CASE WHEN jsonb_typeof(a.payload -> 'messages') = 'array'
                       THEN a.payload -> 'messages' ELSE '[]'::jsonb END
              ) WITH ORDINALITY AS m(value, ordinality)
              WHERE jsonb_typeof(m.value) = 'object'
                AND m.value ->> 'role' IN ('user', 'assistant')), '')
    || E'\\n' || coalesce(a.payload ->> 'reply', '')
"""


def _document(config: str, summary: str) -> str:
    """An episode's tsvector under `config`, `summary` its summary's expression, over its chat's
    audit row `a`."""
    return (
        f"setweight(to_tsvector('{config}', {summary}), 'A') || "
        f"setweight(to_tsvector('{config}', {_CONVERSATION}), 'B')"
    )


def _sync_function(config: str) -> str:
    document = _document(config, "NEW.summary")
    return f"""CREATE OR REPLACE FUNCTION episode_fts_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM episode_fts WHERE episode_id = OLD.id;
        END IF;
        IF NEW.summary <> '' THEN
            INSERT INTO episode_fts (episode_id, document)
            SELECT NEW.id, {document}
            FROM audit_log AS a WHERE a.id = NEW.audit_log_id;
        END IF;
        RETURN NULL;
    END $$"""


# Every episode up to `upto` is the reindex's, every later one the new trigger's. (A server of
# the older version still writing during the upgrade could add a row with the older words past
# `upto`: stop them for `caesar db upgrade`, docs/deployment.md.)
_STATE = [
    f"""CREATE TABLE {STATE} (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        upto BIGINT NOT NULL,
        done_through BIGINT NOT NULL DEFAULT 0,
        finished_at TIMESTAMP WITHOUT TIME ZONE
    )""",
    f"""INSERT INTO {STATE} (id, upto, finished_at)
    SELECT 1, coalesce(max(episode_id), 0),
           CASE WHEN max(episode_id) IS NULL THEN now() AT TIME ZONE 'UTC' END
    FROM episode_fts""",
]

# Migration 0014's counter trigger, but an UPDATE touches only the people whose count it
# changes (it moved rows between them): re-indexing words changes none, and so locks no
# counter row (a reindex batch holding every batch person's counter until it committed
# deadlocked with writers that lock an episode's row, then its person's counter).
_COUNTED = """CREATE OR REPLACE FUNCTION episode_fts_counted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE' THEN
            INSERT INTO episode_fts_counts AS c (person_id, documents)
            SELECT person_id, sum(n) FROM (
                SELECT person_id, count(*) AS n FROM added GROUP BY person_id
                UNION ALL
                SELECT person_id, -count(*) AS n FROM gone GROUP BY person_id) AS d
            GROUP BY person_id HAVING sum(n) <> 0 ORDER BY person_id
            ON CONFLICT (person_id) DO UPDATE SET documents = c.documents + EXCLUDED.documents;
            RETURN NULL;
        END IF;
        IF TG_OP = 'DELETE' THEN
            UPDATE episode_fts_counts AS c SET documents = c.documents - g.n
            FROM (SELECT person_id, count(*) AS n FROM gone GROUP BY person_id
                  ORDER BY person_id) AS g
            WHERE c.person_id = g.person_id;
        END IF;
        IF TG_OP = 'INSERT' THEN
            INSERT INTO episode_fts_counts AS c (person_id, documents)
            SELECT person_id, count(*) FROM added GROUP BY person_id ORDER BY person_id
            ON CONFLICT (person_id) DO UPDATE SET documents = c.documents + EXCLUDED.documents;
        END IF;
        RETURN NULL;
    END $$"""
# 0014's own, for the downgrade.
_COUNTED_0014 = """CREATE OR REPLACE FUNCTION episode_fts_counted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            UPDATE episode_fts_counts AS c SET documents = c.documents - g.n
            FROM (SELECT person_id, count(*) AS n FROM gone GROUP BY person_id
                  ORDER BY person_id) AS g
            WHERE c.person_id = g.person_id;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO episode_fts_counts AS c (person_id, documents)
            SELECT person_id, count(*) FROM added GROUP BY person_id ORDER BY person_id
            ON CONFLICT (person_id) DO UPDATE SET documents = c.documents + EXCLUDED.documents;
        END IF;
        RETURN NULL;
    END $$"""

_TOKENS = [
    # A row's words: each lexeme's positions (to_tsvector keeps a bounded number of a lexeme's:
    # a word said hundreds of times in one chat is undercounted).
    """CREATE FUNCTION caesar_tokens(tsvector) RETURNS integer LANGUAGE sql IMMUTABLE
    PARALLEL SAFE AS $$ SELECT coalesce(sum(cardinality(positions)), 0)::integer
    FROM unnest($1) $$""",
    # Kept by a trigger, not a generated column: adding one rewrites the table (11 s for 10k
    # episodes' rows). The older rows get theirs when they are indexed again (pg_words).
    """CREATE FUNCTION caesar_tokens_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.tokens := caesar_tokens(NEW.document);
        RETURN NEW;
    END $$""",
    *(
        statement
        for table in ("episode_fts", "episode_window_fts")
        for statement in (
            f"ALTER TABLE {table} ADD COLUMN tokens INTEGER",
            f"CREATE TRIGGER {table}_tokens BEFORE INSERT OR UPDATE OF document ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION caesar_tokens_sync()",
        )
    ),
]


def _configuration(bind: sa.Connection) -> None:
    unaccent = "unaccent, "
    try:
        with bind.begin_nested():
            bind.execute(sa.text("CREATE EXTENSION IF NOT EXISTS unaccent"))
    except DBAPIError as e:
        unaccent = ""
        log.warning(
            "full text: the unaccent extension could not be created (%s); words are stemmed "
            "without removing accents. To fix, as a superuser, in caesar's database: CREATE "
            "EXTENSION unaccent; then `caesar db words` (or the next `caesar serve`) adds it "
            "and indexes the older rows again",
            str(e.orig).strip().splitlines()[0] if e.orig else e,
        )
    for statement in (
        f"CREATE TEXT SEARCH DICTIONARY {CONFIG}_stem (TEMPLATE = snowball, Language = porter)",
        f"CREATE TEXT SEARCH CONFIGURATION {CONFIG} (COPY = english)",
        f"ALTER TEXT SEARCH CONFIGURATION {CONFIG} ALTER MAPPING FOR {_WORDS} "
        f"WITH {unaccent}{CONFIG}_stem",
        f"ALTER TEXT SEARCH CONFIGURATION {CONFIG} DROP MAPPING FOR {_WHOLE_HYPHENATED}",
    ):
        bind.execute(sa.text(statement))


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        return
    _configuration(bind)
    for statement in [*_TOKENS, _sync_function(CONFIG), *_STATE, _COUNTED]:
        op.execute(statement)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        return
    op.execute(_COUNTED_0014)
    op.execute(f"DROP TABLE IF EXISTS {STATE}")
    for table in ("episode_window_fts", "episode_fts"):
        op.execute(f"DROP TRIGGER IF EXISTS {table}_tokens ON {table}")
        op.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS tokens")
    op.execute("DROP FUNCTION IF EXISTS caesar_tokens_sync()")
    op.execute("DROP FUNCTION IF EXISTS caesar_tokens(tsvector)")
    op.execute(_sync_function("english"))
    started, after, done = time.monotonic(), 0, 0
    while ids := _reindex_batch(bind, "english", after, None, 2_000):
        after, done = ids[-1], done + len(ids)
        log.info("full text under english: %d episodes indexed again", done)
    log.info("full text under english: done in %.1f s", time.monotonic() - started)
    op.execute(f"DROP TEXT SEARCH CONFIGURATION IF EXISTS {CONFIG}")
    op.execute(f"DROP TEXT SEARCH DICTIONARY IF EXISTS {CONFIG}_stem")


def _reindex_batch(
    conn: sa.Connection, config: str, after: int, upto: int | None, batch: int
) -> list[int]:
    """Index the next `batch` episodes after `after` (up to `upto`, None: all) and their windows
    again under `config`, in `conn`'s transaction; returns their ids, in order (fewer than
    `batch`: there are no more). A frozen copy, as of 2026-12-07, of
    caesar.memory.engine.pg_words.reindex_batch: do not edit it to follow live code."""
    bound = "" if upto is None else "AND episode_id <= :upto"
    ids = [
        int(i)
        for i in conn.execute(
            sa.text(
                f"SELECT episode_id FROM episode_fts WHERE episode_id > :after {bound} "
                "ORDER BY episode_id LIMIT :n"
            ),
            {"after": after, "upto": upto, "n": batch},
        ).scalars()
    ]
    if not ids:
        return ids
    conn.execute(
        sa.text(
            f"""UPDATE episode_fts AS f SET document = {_document(config, "e.summary")}
            FROM episode_summaries AS e JOIN audit_log AS a ON a.id = e.audit_log_id
            WHERE f.episode_id = e.id AND f.episode_id BETWEEN :first AND :last"""
        ),
        {"first": ids[0], "last": ids[-1]},
    )
    chats = conn.execute(
        sa.text(
            "SELECT e.id, a.payload FROM episode_summaries AS e "
            "JOIN audit_log AS a ON a.id = e.audit_log_id "
            "WHERE e.id IN (SELECT DISTINCT episode_id FROM episode_window_fts "
            "WHERE episode_id > :after AND episode_id <= :last)"
        ).columns(sa.column("id", sa.Integer), sa.column("payload", sa.JSON)),
        {"after": after, "last": ids[-1]},
    ).all()
    texts = [
        (int(chat.id), k, body)
        for chat in chats
        for k, body in enumerate(windows(conversation_turns(chat.payload)))
    ]
    if texts:
        episode, number, body = (list(column) for column in zip(*texts, strict=True))
        conn.execute(
            sa.text(
                f"UPDATE episode_window_fts AS w SET document = to_tsvector('{config}', v.body) "
                "FROM unnest(CAST(:ids AS integer[]), CAST(:ks AS smallint[]), "
                "CAST(:bodies AS text[])) AS v(id, k, body) "
                "WHERE w.episode_id = v.id AND w.window_no = v.k"
            ),
            {"ids": episode, "ks": number, "bodies": body},
        )
    return ids
