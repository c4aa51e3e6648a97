"""PostgreSQL's full text cuts and counts words as SQLite's FTS5 does (issue #24)

Why: on LongMemEval dev, PostgreSQL's prompts differed from SQLite's for 72 of 160 questions
(answer in prompt 0.641 against 0.612, all evidence 0.950 against 0.963), where the issue asks
for the same figures within 0.005. Two causes (docs/recall-quality.md, "Why the engines
differ"): the words, and how BM25 counts them. This migration fixes the words:

- A text search configuration `caesar_porter`: the english parser, each word unaccented and
  stemmed by the original Porter stemmer, no stop words dropped — as FTS5's
  `porter unicode61 remove_diacritics 2` (PostgreSQL's `english` stems by Porter2 and drops
  its stop words). Hyphenated words are indexed by their parts only, as FTS5 splits them.
- A column `tokens` on `episode_fts` and `episode_window_fts`: a row's number of words, BM25's
  document length as FTS5 counts it (PostgreSQL's `length()` is the distinct words). Generated
  from the tsvector (`caesar_tokens`), so nothing writes it.
- Every row is indexed again under the new configuration: episodes from their summary and
  chat (the trigger's own expression), windows from their chat with today's windowing
  (memory/search/passages.py), in batches, with a log line of progress.

Without the `unaccent` extension (not installed, or the role may not create it) the
configuration stems without unaccenting, with a warning: only accented words then differ
from SQLite.

SQLite: nothing.

Downgrade indexes every row under `english` again and drops the column and the configuration.

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

from caesar.memory.search import passages
from caesar.memory.transcript import conversation_turns

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

log = logging.getLogger("caesar.migrations")

CONFIG = "caesar_porter"  # = memory/search/postgres.py's FTS_CONFIG
_BATCH = 2_000
# The english parser's word tokens; the hyphenated whole words (asciihword, hword, numhword)
# are dropped, their parts kept.
_WORDS = "asciiword, word, numword, hword_part, hword_asciipart, hword_numpart"
_WHOLE_HYPHENATED = "asciihword, hword, numhword"

# = migration 0002's document, under a configuration of choice.
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
    return (
        f"setweight(to_tsvector('{config}', {summary}), 'A') || "
        f"setweight(to_tsvector('{config}', {_CONVERSATION}), 'B')"
    )


def _sync(config: str) -> str:
    """Migration 0002's `episode_fts_sync`, under `config`."""
    return f"""CREATE OR REPLACE FUNCTION episode_fts_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM episode_fts WHERE episode_id = OLD.id;
        END IF;
        IF NEW.summary <> '' THEN
            INSERT INTO episode_fts (episode_id, document)
            SELECT NEW.id, {_document(config, "NEW.summary")}
            FROM audit_log AS a WHERE a.id = NEW.audit_log_id;
        END IF;
        RETURN NULL;
    END $$"""


_TOKENS = [
    # A row's words: each lexeme's positions (to_tsvector keeps up to 256 of a lexeme's).
    """CREATE FUNCTION caesar_tokens(tsvector) RETURNS integer LANGUAGE sql IMMUTABLE
    PARALLEL SAFE AS $$ SELECT coalesce(sum(cardinality(positions)), 0)::integer
    FROM unnest($1) $$""",
    "ALTER TABLE episode_fts ADD COLUMN tokens INTEGER "
    "GENERATED ALWAYS AS (caesar_tokens(document)) STORED",
    "ALTER TABLE episode_window_fts ADD COLUMN tokens INTEGER "
    "GENERATED ALWAYS AS (caesar_tokens(document)) STORED",
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
            "without removing accents. To fix, as a superuser: CREATE EXTENSION unaccent; "
            "then `caesar db downgrade 0014 && caesar db upgrade`",
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


def _reindex(bind: sa.Connection, config: str) -> None:
    """Every episode's and window's tsvector again, under `config`, `_BATCH` episodes a
    statement, with progress."""
    total = int(bind.scalar(sa.text("SELECT count(*) FROM episode_fts")) or 0)
    started = last = time.monotonic()
    done, after = 0, 0
    episodes = sa.text(
        f"""UPDATE episode_fts AS f SET document = {_document(config, "e.summary")}
        FROM episode_summaries AS e JOIN audit_log AS a ON a.id = e.audit_log_id
        WHERE f.episode_id = e.id AND f.episode_id IN (
            SELECT episode_id FROM episode_fts WHERE episode_id > :after
            ORDER BY episode_id LIMIT :n)
        RETURNING f.episode_id"""
    )
    chats = sa.text(
        "SELECT e.id, a.payload FROM episode_summaries AS e "
        "JOIN audit_log AS a ON a.id = e.audit_log_id "
        "WHERE e.id IN (SELECT DISTINCT episode_id FROM episode_window_fts "
        "WHERE episode_id > :after AND episode_id <= :upto)"
    ).columns(sa.column("id", sa.Integer), sa.column("payload", sa.JSON))
    window = sa.text(
        f"UPDATE episode_window_fts SET document = to_tsvector('{config}', :body) "
        "WHERE episode_id = :id AND window_no = :k"
    )
    while True:
        ids = sorted(
            int(i) for i in bind.execute(episodes, {"after": after, "n": _BATCH}).scalars()
        )
        upto = ids[-1] if ids else None
        rows = [] if upto is None else bind.execute(chats, {"after": after, "upto": upto}).all()
        updates = [
            {"id": int(row.id), "k": k, "body": body}
            for row in rows
            for k, body in enumerate(passages.windows(conversation_turns(row.payload)))
        ]
        if updates:
            bind.execute(window, updates)
        done += len(ids)
        if upto is None:
            break
        after = upto
        if time.monotonic() - last >= 5.0:
            last = time.monotonic()
            log.info("full text under %s: %d of %d episodes", config, done, total)
    log.info(
        "full text under %s: %d episodes indexed again in %.1f s",
        config,
        done,
        time.monotonic() - started,
    )


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        return
    _configuration(bind)
    op.execute(_sync(CONFIG))
    _reindex(bind, CONFIG)
    for statement in _TOKENS:
        op.execute(statement)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        return
    op.execute("ALTER TABLE episode_window_fts DROP COLUMN IF EXISTS tokens")
    op.execute("ALTER TABLE episode_fts DROP COLUMN IF EXISTS tokens")
    op.execute("DROP FUNCTION IF EXISTS caesar_tokens(tsvector)")
    op.execute(_sync("english"))
    _reindex(bind, "english")
    op.execute(f"DROP TEXT SEARCH CONFIGURATION IF EXISTS {CONFIG}")
    op.execute(f"DROP TEXT SEARCH DICTIONARY IF EXISTS {CONFIG}_stem")
