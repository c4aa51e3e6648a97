"""The schema. Changed only through numbered Alembic migrations (caesar/db/migrations).

All datetimes are naive UTC. The audit log is the source of truth; facts, episode summaries
and semantic chunks are derived from it by idempotent workers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Connection,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    event,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from caesar.memory.engine import person_tables

JsonType = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    pass


def _person() -> Mapped[int]:
    """Whose row this is (issue #23, migration 0009). No default: every writer names it."""
    return mapped_column(Integer, ForeignKey("people.id"), nullable=False)


class AuditLog(Base):
    """Append-only. `subject_id` / `subject_key` index what a row is about (the source chat of
    a recalled episode, the key of an edited fact) so aggregates over them never scan."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    event_type: Mapped[str] = mapped_column(String(64), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    payload: Mapped[dict[str, Any]] = mapped_column(JsonType, nullable=False)
    subject_id: Mapped[int | None] = mapped_column(Integer, nullable=True, default=None)
    subject_key: Mapped[str | None] = mapped_column(String(200), nullable=True, default=None)
    # who acted: the person whose chat, fact or forget this is (migration 0009)
    person_id: Mapped[int] = _person()

    __table_args__ = (
        Index("idx_audit_log_type_id", "event_type", "id"),
        Index("idx_audit_log_person", "person_id", "event_type", "id"),
        Index("idx_audit_log_created", "created_at"),
        Index("idx_audit_log_type_subject_key", "event_type", "subject_key"),
        Index("idx_audit_log_type_subject_id", "event_type", "subject_id"),
        # Never reuse an id: cursors and the vector index only look past the largest id seen.
        {"sqlite_autoincrement": True},
    )


class Fact(Base):
    __tablename__ = "facts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(100), nullable=False)
    value: Mapped[str] = mapped_column(Text, nullable=False)
    confidence: Mapped[float] = mapped_column(Float, nullable=False)
    # A fact outlives the chat it came from (retention sweeps chats, not what the operator
    # taught caesar): the link is cleared, the fact stays.
    source_audit_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("audit_log.id", ondelete="SET NULL"), nullable=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)

    # Retention deletes chats in batches; ON DELETE SET NULL looks facts up by this column.
    person_id: Mapped[int] = _person()

    # A key is unique per person (migration 0009), not per table.
    __table_args__ = (
        Index("idx_facts_source_audit", "source_audit_id"),
        UniqueConstraint("person_id", "key", name="uq_facts_person_key"),
    )


class Memory(Base):
    """A thing said, kept on its own: the standing kinds, what the person says holds until they
    say otherwise (`instruction`, `constraint`, `preference`, `profile`; memory/standing/kinds.py,
    issue #46, docs/standing.md), and the dated memories of what was said and done, by the
    person or caesar (kind `said`; memory/dated/, issue #45).

    `text` is the person's own words; `about` what it is about, in a normal form, which tells a
    restatement or a change of mind from a new statement. A newer statement that replaces one
    (a new home, "I eat fish again now") sets the older's `superseded_by`: the history keeps
    both, the prompt gets the current. `contradicts`: another current statement that says the
    opposite with no word of a change; the prompt shows both, dated.

    Derived from the chat it was said in (`source_audit_id`): forgetting that chat, or the
    retention sweep deleting it, deletes the memory (ON DELETE CASCADE). One the person wrote
    by hand has none. `vector`: float32 of the statement with the words of what it bears on
    (`kinds.bearing_text`), by `model`."""

    __tablename__ = "memories"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    person_id: Mapped[int] = _person()
    kind: Mapped[str] = mapped_column(String(20), nullable=False)
    slot: Mapped[str] = mapped_column(String(40), nullable=False)
    text: Mapped[str] = mapped_column(Text, nullable=False)
    about: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    polarity: Mapped[int] = mapped_column(Integer, nullable=False, default=1, server_default="1")
    confidence: Mapped[float] = mapped_column(Float, nullable=False)
    # who said it: "person" (caesar's own words become dated memories, never standing ones)
    speaker: Mapped[str] = mapped_column(
        String(20), nullable=False, default="person", server_default="person"
    )
    source_audit_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("audit_log.id", ondelete="CASCADE"), nullable=True
    )
    said_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    superseded_by: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("memories.id", ondelete="SET NULL"), nullable=True
    )
    contradicts: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("memories.id", ondelete="SET NULL"), nullable=True
    )
    edit_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    vector: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # dated memories (kind `said`, migration 0020): the conversation (conversations.id) and the
    # turn in it the words were said in, and the time they name, resolved on the person's
    # clock (naive UTC)
    conversation_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    turn: Mapped[int | None] = mapped_column(Integer, nullable=True)
    refers_start: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    refers_end: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)

    __table_args__ = (
        # a turn reads the person's current ones: superseded_by IS NULL
        Index("idx_memories_person_current", "person_id", "superseded_by", "kind"),
        Index("idx_memories_person_kind_said", "person_id", "kind", "said_at"),
        Index("idx_memories_conversation", "conversation_id"),
        Index("idx_memories_source_audit", "source_audit_id"),
        Index("idx_memories_superseded_by", "superseded_by"),
        Index("idx_memories_contradicts", "contradicts"),
        {"sqlite_autoincrement": True},
    )


_NO_PASSAGES = "passage_vectors IS NULL AND summary != ''"
_NO_TURNS = "turn_vectors IS NULL AND summary != ''"
_UNSUMMARISED = "tip_audit_id > summarised_audit_id"


class Conversation(Base):
    """The unit of episodic memory (issue #13): the turns of one conversation, however a client
    sends them. Its chat rows carry its id in `audit_log.subject_id`; a completed turn's
    `subject_key` is the hash of the conversation up to and including that turn's reply
    (memory/conversations.py), so a client that resends the history is recognised by it.

    `tip_audit_id` is the latest answered turn, whose row holds the whole conversation;
    `summarised_audit_id` the tip the episode was last written from (0: never). The summariser
    takes a conversation once it is behind and has been quiet for a while; `failed_audit_id`
    is the tip it last failed on, so a failing one is not retried in a loop."""

    __tablename__ = "conversations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # the client's own id (`conversation_id`), or one caesar made up
    key: Mapped[str] = mapped_column(String(200), nullable=False)
    started_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    last_turn_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    # wall-clock time of the last turn written: the quiet period runs from here
    touched_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    turns: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    tip_audit_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("audit_log.id", ondelete="SET NULL"), nullable=True
    )
    summarised_audit_id: Mapped[int] = mapped_column(
        Integer, nullable=False, default=0, server_default="0"
    )
    failed_audit_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    person_id: Mapped[int] = _person()

    __table_args__ = (
        # two people's clients may both say `kitchen`
        UniqueConstraint("person_id", "key", name="uq_conversations_person_key"),
        # The memory.summarise worker's queue: conversations whose episode is behind.
        Index(
            "idx_conversations_unsummarised",
            "touched_at",
            sqlite_where=text(_UNSUMMARISED),
            postgresql_where=text(_UNSUMMARISED),
        ),
        Index("idx_conversations_tip", "tip_audit_id"),
        {"sqlite_autoincrement": True},
    )


class EpisodeSummary(Base):
    """ADR-0034 §1. `created_at` is when the summarised conversation happened (for a live chat,
    within one worker interval of the summary; for an imported one, its original date), so the
    time anchors "3 days ago" describe the conversation. `embedding_f32` is a compact copy of
    `embedding` for fast loading into the in-process vector index; the JSON stays the record.
    `passage_vectors` holds the conversation's window vectors and `turn_vectors` its turns'
    (memory/passages.py, float16)."""

    __tablename__ = "episode_summaries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    audit_log_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("audit_log.id", ondelete="CASCADE"), nullable=False, unique=True
    )
    summary: Mapped[str] = mapped_column(Text, nullable=False)
    embedding: Mapped[list[float]] = mapped_column(JsonType, nullable=False)
    model: Mapped[str] = mapped_column(String(200), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    last_recalled_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    recall_count: Mapped[int] = mapped_column(
        Integer, nullable=False, default=0, server_default="0"
    )
    embedding_f32: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    passage_vectors: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    turn_vectors: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    # One episode per conversation; `audit_log_id` is the conversation's turn it was written
    # from (its tip then), whose row holds the whole conversation. No foreign key (migration
    # 0006 says why): whatever deletes a conversation deletes its episode.
    conversation_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    person_id: Mapped[int] = _person()

    __table_args__ = (
        Index("idx_episode_summaries_audit", "audit_log_id"),
        Index("idx_episode_summaries_person", "person_id", "model", "id"),
        # a person's conversations held in a span of time, newest first (migration 0013)
        Index("idx_episode_summaries_person_created", "person_id", "created_at"),
        Index("uq_episode_summaries_conversation", "conversation_id", unique=True),
        Index("idx_episode_summaries_created", "created_at"),
        Index("idx_episode_summaries_model_id", "model", "id"),
        # The memory.passages worker's queue: summarised episodes still without windows.
        Index(
            "idx_episode_summaries_no_passages",
            "id",
            sqlite_where=text(_NO_PASSAGES),
            postgresql_where=text(_NO_PASSAGES),
        ),
        # ... and those still without turn vectors (windows and turns are written together;
        # episodes from before migration 0018 have windows alone)
        Index(
            "idx_episode_summaries_no_turns",
            "id",
            sqlite_where=text(_NO_TURNS),
            postgresql_where=text(_NO_TURNS),
        ),
        {"sqlite_autoincrement": True},
    )


class SemanticChunk(Base):
    """The v0.4 semantic index: raw replies, chunked and embedded, for explicit recall."""

    __tablename__ = "semantic_chunks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    audit_log_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("audit_log.id", ondelete="CASCADE"), nullable=False
    )
    chunk_index: Mapped[int] = mapped_column(Integer, nullable=False)
    text: Mapped[str] = mapped_column(Text, nullable=False)
    embedding: Mapped[list[float]] = mapped_column(JsonType, nullable=False)
    embedding_f32: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    model: Mapped[str] = mapped_column(String(200), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    person_id: Mapped[int] = _person()

    __table_args__ = (
        UniqueConstraint("audit_log_id", "chunk_index", name="uq_semantic_chunks_audit_chunk"),
        Index("idx_semantic_chunks_person", "person_id", "model", "id"),
        Index("idx_semantic_chunks_model_id", "model", "id"),
        {"sqlite_autoincrement": True},
    )


class Person(Base):
    """Someone caesar remembers for (issue #23, docs/household.md). `token_hash` is the SHA-256
    (hex) of the person's token, never the token; the owner has none, because the owner's
    token is the `api_token` setting. Exactly one owner, created by migration 0008."""

    __tablename__ = "people"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), nullable=False, unique=True)
    token_hash: Mapped[str | None] = mapped_column(String(64), nullable=True, unique=True)
    is_owner: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)
    # Who the trusted front-end's user header names (migration 0010, `[people]`
    # frontend_token): Open WebUI's user id; None for someone it has never named.
    frontend_id: Mapped[str | None] = mapped_column(
        String(255), nullable=True, unique=True, index=True
    )

    __table_args__ = (
        Index(
            "uq_people_owner",
            "is_owner",
            unique=True,
            sqlite_where=text("is_owner"),
            postgresql_where=text("is_owner"),
        ),
        {"sqlite_autoincrement": True},
    )


class _CursorMixin:
    """A singleton row (id=1): the last audit id a worker has finished with."""

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    last_audit_id: Mapped[int] = mapped_column(
        Integer, nullable=False, default=0, server_default="0"
    )
    updated_at: Mapped[datetime] = mapped_column(DateTime, nullable=False)


class MemoryExtractCursor(_CursorMixin, Base):
    __tablename__ = "memory_extract_cursor"


class MemoryStandingCursor(_CursorMixin, Base):
    """The `memory.standing` worker: the chats from before migration 0019, read again for the
    standing statements said in them; it stops at `until_audit_id` (the extract worker's
    cursor when the migration ran: past it, `memory.extract` learns them itself)."""

    __tablename__ = "memory_standing_cursor"
    until_audit_id: Mapped[int] = mapped_column(
        Integer, nullable=False, default=0, server_default="0"
    )


class MemoryDatedCursor(_CursorMixin, Base):
    """The `memory.dated` worker: the chats from before migration 0020, read again for their
    dated memories; it stops at `until_audit_id` (the extract worker's cursor when the
    migration ran: past it, `memory.extract` writes them itself)."""

    __tablename__ = "memory_dated_cursor"
    until_audit_id: Mapped[int] = mapped_column(
        Integer, nullable=False, default=0, server_default="0"
    )


class SemanticIndexCursor(_CursorMixin, Base):
    __tablename__ = "semantic_index_cursor"


# SQLite keeps each person's full text in tables of their own (memory/engine/sqlite.py, migration
# 0017): however a person is written (`caesar people add`, a front-end's first sight, a test) or
# deleted, their tables come or go with them, in the same transaction. (PostgreSQL's partial
# indexes of a person's rows are built concurrently, after: pgvector_migration.py.) Registered here, with
# the model, so that no import order can leave a person without them.
@event.listens_for(Person, "after_insert")
def _person_added(_mapper: object, connection: Connection, row: Person) -> None:
    if connection.dialect.name == "sqlite":
        person_tables.PersonTables(row.id).create(connection)


@event.listens_for(Person, "after_delete")
def _person_removed(_mapper: object, connection: Connection, row: Person) -> None:
    if connection.dialect.name == "sqlite":
        person_tables.PersonTables(row.id).drop(connection)
