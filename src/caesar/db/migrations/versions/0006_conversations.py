"""conversations: one episode per conversation, not per turn (issue #13)

A `conversations` table; each chat row's `subject_id` is its conversation and a completed
turn's `subject_key` the hash of the conversation through its reply
(`turns_key`: migrations/_frozen_turns.py, a frozen copy of caesar.memory.conversations'; the
hash must be the one live turns are matched by, and tests/test_migrations_frozen.py holds the
two equal). `episode_summaries.conversation_id` links the one episode of each.

Existing chats are grouped the way live turns now are: a turn whose history (what the client
resent) is a conversation's latest turn continues it; any other starts one. Of the episodes a
conversation had (one per turn, each re-summarising the turns before), the newest is kept,
with the recall counts of all of them, and the others are deleted with their keyword index
rows: the newest covered every turn the others did. If it is not the conversation's latest
turn, the summariser writes the conversation's episode again. A conversation whose latest
turn failed to summarise stays failed, for `caesar episodes retry-failed`. Nothing in the
audit log is lost; `memory_summarise_cursor` goes, the conversations are the queue now.

Downgrade drops the links and the table; the merged-away episodes are not restored.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

import logging
import uuid
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.orm import Session

from caesar.db.migrations import _frozen_sqlite as sqlite
from caesar.db.migrations._frozen_turns import Turn, turns_key

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

log = logging.getLogger("caesar.migrations")

_UNSUMMARISED = "tip_audit_id > summarised_audit_id"
IMPORTED = "import:sha256:"  # caesar.importer.HASH_PREFIX
_BATCH = 1000


def upgrade() -> None:
    bind = op.get_bind()
    op.create_table(
        "conversations",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("key", sa.String(200), nullable=False, unique=True),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("last_turn_at", sa.DateTime(), nullable=False),
        sa.Column("touched_at", sa.DateTime(), nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False, server_default="0"),
        sa.Column(
            "tip_audit_id",
            sa.Integer(),
            sa.ForeignKey("audit_log.id", ondelete="SET NULL"),
            nullable=True,
        ),
        sa.Column("summarised_audit_id", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("failed_audit_id", sa.Integer(), nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "idx_conversations_unsummarised",
        "conversations",
        ["touched_at"],
        sqlite_where=sa.text(_UNSUMMARISED),
        postgresql_where=sa.text(_UNSUMMARISED),
    )
    op.create_index("idx_conversations_tip", "conversations", ["tip_audit_id"])
    # A plain ADD COLUMN (a batch migration would drop migration 0002's triggers). No foreign
    # key: SQLite could not drop the column again; what deletes a conversation deletes its
    # episode (memory/forget.py), and retention's cascade from the chat row does.
    op.add_column("episode_summaries", sa.Column("conversation_id", sa.Integer(), nullable=True))
    op.create_index(
        "uq_episode_summaries_conversation",
        "episode_summaries",
        ["conversation_id"],
        unique=True,
    )
    with Session(bind=bind) as session:
        _group(session)
    op.drop_table("memory_summarise_cursor")


class _Conversation:
    def __init__(self, first: Any) -> None:
        self.id = 0
        self.key = uuid.uuid4().hex
        self.touched_at: datetime | None = None  # None: now
        self.started_at: datetime = first.created_at
        self.last_turn_at: datetime = first.created_at
        self.turns = 0
        self.tip: int | None = None
        self.tip_key: str | None = None
        self.rows: list[int] = []


def _turns(payload: dict[str, Any]) -> tuple[list[Turn], str | None]:
    messages: list[Turn] = [
        {"role": str(m.get("role", "")), "content": str(m.get("content", ""))}
        for m in payload.get("messages", [])
        if isinstance(m, dict)
    ]
    reply = payload.get("reply")
    return messages, reply if isinstance(reply, str) else None


def _group(session: Session) -> None:
    rows_query = sa.text(
        "SELECT id, event_type, created_at, payload, subject_key FROM audit_log "
        "WHERE event_type IN ('chat.completed', 'chat.failed') AND id > :after "
        "ORDER BY id LIMIT :limit"
    ).columns(
        sa.column("id", sa.Integer),
        sa.column("event_type", sa.String),
        sa.column("created_at", sa.DateTime),
        sa.column("payload", sa.JSON),
        sa.column("subject_key", sa.String),
    )
    found: list[_Conversation] = []
    at_tip: dict[str, list[_Conversation]] = {}  # a tip's key → the conversations it ends
    keys: dict[int, str] = {}  # completed row → its key
    after, seen = 0, 0
    while True:
        rows = session.execute(rows_query, {"after": after, "limit": _BATCH}).all()
        for row in rows:
            if (row.subject_key or "").startswith(IMPORTED):
                # a whole imported conversation: its own, keeping the importer's hash
                imported = _Conversation(row)
                imported.rows.append(int(row.id))
                imported.tip, imported.turns = int(row.id), 1
                imported.touched_at = row.created_at
                keys[int(row.id)] = row.subject_key
                found.append(imported)
                continue
            messages, reply = _turns(row.payload)
            history = messages[:-1]
            waiting = at_tip.get(turns_key(history)) if history else None
            conversation = waiting[-1] if waiting else None
            if conversation is None:
                conversation = _Conversation(row)
                found.append(conversation)
            conversation.rows.append(int(row.id))
            if row.event_type == "chat.completed":
                if conversation.tip_key is not None:
                    at_tip[conversation.tip_key].remove(conversation)
                key = turns_key([*messages, {"role": "assistant", "content": reply or ""}])
                keys[int(row.id)] = key
                conversation.tip, conversation.tip_key = int(row.id), key
                conversation.last_turn_at = row.created_at
                conversation.turns += 1
                at_tip.setdefault(key, []).append(conversation)
        seen += len(rows)
        if len(rows) < _BATCH:
            break
        after = int(rows[-1].id)
        log.info("conversations: %d chat rows read", seen)
    now = datetime.now(UTC).replace(tzinfo=None)  # naive UTC, as caesar.clock.utcnow
    for conversation in found:
        conversation.id = int(
            session.execute(
                sa.text(
                    "INSERT INTO conversations (key, started_at, last_turn_at, touched_at, turns,"
                    " tip_audit_id, summarised_audit_id) VALUES (:key, :started, :last, :now,"
                    " :turns, :tip, 0) RETURNING id"
                ),
                {
                    "key": conversation.key,
                    "started": conversation.started_at,
                    "last": conversation.last_turn_at,
                    "now": conversation.touched_at or now,
                    "turns": conversation.turns,
                    "tip": conversation.tip,
                },
            ).scalar_one()
        )
    links = [
        {"id": row_id, "conversation": c.id, "key": keys.get(row_id)}
        for c in found
        for row_id in c.rows
    ]
    for start in range(0, len(links), _BATCH):
        session.execute(
            sa.text(
                "UPDATE audit_log SET subject_id = :conversation, subject_key = :key WHERE id = :id"
            ),
            links[start : start + _BATCH],
        )
    _one_episode_each(session, found)
    session.flush()


def _one_episode_each(session: Session, found: list[_Conversation]) -> None:
    episodes: dict[int, Any] = {
        int(r.audit_log_id): r
        for r in session.execute(
            sa.text(
                "SELECT id, audit_log_id, recall_count, last_recalled_at FROM episode_summaries"
            ).columns(
                sa.column("id", sa.Integer),
                sa.column("audit_log_id", sa.Integer),
                sa.column("recall_count", sa.Integer),
                sa.column("last_recalled_at", sa.DateTime),
            )
        )
    }
    failed = set(
        session.scalars(
            sa.text(
                "SELECT DISTINCT subject_id FROM audit_log "
                "WHERE event_type = 'memory.episode.summarise_failed'"
            )
        )
    )
    for conversation in found:
        mine = [episodes[r] for r in conversation.rows if r in episodes]
        if not mine:
            if conversation.tip is not None and conversation.tip in failed:
                session.execute(
                    sa.text("UPDATE conversations SET failed_audit_id = :tip WHERE id = :id"),
                    {"tip": conversation.tip, "id": conversation.id},
                )
            continue
        kept, merged = mine[-1], mine[:-1]
        recalled = [e.last_recalled_at for e in mine if e.last_recalled_at is not None]
        if merged:
            ids = [int(e.id) for e in merged]
            if session.get_bind().dialect.name == "sqlite":  # this revision's shared table
                for episode_id, windows in sqlite.chat_windows(session, ids):
                    sqlite.delete_windows(session, "episode_window_fts", episode_id, windows)
            session.execute(
                sa.text("DELETE FROM episode_summaries WHERE id IN :ids").bindparams(
                    sa.bindparam("ids", expanding=True)
                ),
                {"ids": ids},
            )
        session.execute(
            sa.text(
                "UPDATE episode_summaries SET conversation_id = :conversation, "
                "recall_count = :count, last_recalled_at = :last WHERE id = :id"
            ),
            {
                "conversation": conversation.id,
                "count": sum(int(e.recall_count) for e in mine),
                "last": max(recalled) if recalled else None,
                "id": int(kept.id),
            },
        )
        session.execute(
            sa.text("UPDATE conversations SET summarised_audit_id = :done WHERE id = :id"),
            {"done": int(kept.audit_log_id), "id": conversation.id},
        )


def downgrade() -> None:
    now = datetime(2026, 1, 1)
    table = op.create_table(
        "memory_summarise_cursor",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("last_audit_id", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
    )
    # Past every chat: the old worker would otherwise summarise each turn again.
    last = op.get_bind().scalar(sa.text("SELECT COALESCE(MAX(id), 0) FROM audit_log"))
    op.bulk_insert(table, [{"id": 1, "last_audit_id": int(last or 0), "updated_at": now}])
    op.drop_index("uq_episode_summaries_conversation", table_name="episode_summaries")
    # SQLite ≥ 3.35 drops a column in place (the triggers do not read it).
    op.execute("ALTER TABLE episode_summaries DROP COLUMN conversation_id")
    op.execute(
        "UPDATE audit_log SET subject_id = NULL, subject_key = NULL "
        "WHERE event_type IN ('chat.completed', 'chat.failed')"
    )
    op.drop_table("conversations")
