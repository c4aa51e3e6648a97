"""`caesar import FILE.jsonl`: past conversations become `chat.completed` rows, dated when they
happened, so the memory workers (summarise, extract, index) learn from them like live chats.

One conversation per line: `{"created_at": ISO-8601, "messages": [{"role", "content"}, …]}`,
ending with the assistant's message, which becomes the row's `reply`. Each line is validated
whole before anything is written (a bad line is reported with its number and skipped, never
half-imported); valid lines are written in batches, one transaction each. The payload's
content hash is the row's `subject_key` (indexed), so importing the same file twice, or a
file that overlaps an earlier one, adds nothing twice. Each line is a conversation of its own
(memory/conversations.py), finished: the summariser takes it without waiting.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator
from sqlalchemy import select

from caesar import audit
from caesar.clock import to_naive_utc, utcnow
from caesar.db.models import AuditLog
from caesar.errors import InputError
from caesar.memory import conversations
from caesar.memory.scope import Scope

if TYPE_CHECKING:
    from caesar.container import Container

BATCH_SIZE = 500
MAX_LINE_CHARS = 2_000_000
MAX_MESSAGES = 2000
HASH_PREFIX = "import:sha256:"
# Clock skew between the exporting machine and this one is not an error; a date in the future is.
FUTURE_TOLERANCE = timedelta(minutes=5)


class ImportedMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")  # exports carry ids, timestamps, …: not ours
    role: Literal["user", "assistant", "system"]
    content: StrictStr = Field(max_length=200_000)

    @field_validator("content")
    @classmethod
    def _as_stored(cls, value: str) -> str:
        # The audit log stores NUL as U+FFFD (PostgreSQL's JSONB cannot hold it); hashing the
        # stored form keeps "same hash" meaning "same stored conversation".
        return value.replace("\x00", audit.NUL_REPLACEMENT)


class ImportedConversation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    created_at: datetime
    messages: list[ImportedMessage] = Field(min_length=2, max_length=MAX_MESSAGES)

    @field_validator("created_at", mode="before")
    @classmethod
    def _iso_string(cls, value: Any) -> Any:
        # pydantic would also take a bare number as a Unix time; the format says ISO-8601.
        if not isinstance(value, str):
            raise ValueError("must be an ISO-8601 string, e.g. 2026-05-18T09:30:00Z")  # noqa: TRY004 - pydantic reports ValueError
        return value

    @field_validator("created_at")
    @classmethod
    def _not_future(cls, value: datetime) -> datetime:
        value = to_naive_utc(value)  # a naive time is taken as UTC
        if value > utcnow() + FUTURE_TOLERANCE:
            raise ValueError(f"{value.isoformat()} is in the future")
        return value

    @field_validator("messages")
    @classmethod
    def _ends_with_reply(cls, value: list[ImportedMessage]) -> list[ImportedMessage]:
        if value[-1].role != "assistant" or not value[-1].content.strip():
            raise ValueError("the last message must be a non-empty assistant message (the reply)")
        if not any(m.role == "user" and m.content.strip() for m in value[:-1]):
            raise ValueError("needs at least one non-empty user message before the reply")
        return value


def content_hash(conversation: ImportedConversation) -> str:
    """Stable over key order and whitespace in the file: only what is stored counts."""
    canonical = json.dumps(
        {
            "created_at": conversation.created_at.isoformat(),
            "messages": [[m.role, m.content] for m in conversation.messages],
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return HASH_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()


def parse_line(text: str) -> ImportedConversation:
    """One JSONL line → a validated conversation, or InputError saying what is wrong."""
    if len(text) > MAX_LINE_CHARS:
        raise InputError(f"line longer than {MAX_LINE_CHARS} characters")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(data, dict):
        raise InputError("expected a JSON object with created_at and messages")
    try:
        return ImportedConversation.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors()[:3]:
            where = ".".join(str(p) for p in err["loc"]) or "line"
            problems.append(f"{where}: {err['msg']}")
        raise InputError("; ".join(problems)) from None


def chat_payload(conversation: ImportedConversation, digest: str) -> dict[str, Any]:
    """The same shape as a live turn's chat.completed payload, marked as imported."""
    *earlier, reply = conversation.messages
    return {
        "messages": [{"role": m.role, "content": m.content} for m in earlier],
        "reply": reply.content,
        "imported": True,
        "content_hash": digest,
    }


@dataclass
class LineError:
    line: int
    error: str


@dataclass
class ImportReport:
    imported: int = 0
    duplicates: int = 0
    errors: list[LineError] = field(default_factory=list)
    # imported, but the next retention sweep will delete them (0 when no TTL is set)
    older_than_ttl: int = 0
    # One entry per valid input, in order: the chat.completed id it is stored as (for a
    # duplicate, the id stored the first time). Benchmarks map their sessions with this.
    audit_ids: list[int] = field(default_factory=list)


ProgressFn = Callable[[int], None]


def _lines(path: Path) -> Iterator[tuple[int, str | UnicodeDecodeError]]:
    """Decoded line by line, so one line that is not UTF-8 is one bad line, not a dead import."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield number, exc


def import_lines(
    services: Container,
    lines: Iterable[tuple[int, str | UnicodeDecodeError]],
    *,
    scope: Scope,
    batch_size: int = BATCH_SIZE,
    on_progress: ProgressFn | None = None,
) -> ImportReport:
    """Import numbered JSONL lines into `person`'s memory; blank lines are ignored.
    `on_progress(n)` after each line."""
    person = scope.person
    report = ImportReport()
    retention = services.settings.retention
    ttl_cutoff = (
        utcnow() - timedelta(days=retention.ttl_days)
        if retention.active and retention.ttl_days is not None
        else None
    )
    batch: list[tuple[ImportedConversation, str]] = []

    def flush() -> None:
        _write_batch(services, batch, report, ttl_cutoff, Scope(person))
        batch.clear()

    for number, text in lines:
        if isinstance(text, UnicodeDecodeError):
            report.errors.append(
                LineError(number, f"not UTF-8 at byte {text.start}: {text.reason}")
            )
        elif text.strip():
            try:
                conversation = parse_line(text)
            except InputError as exc:
                report.errors.append(LineError(number, str(exc)))
            else:
                batch.append((conversation, content_hash(conversation)))
                if len(batch) >= batch_size:
                    flush()
        if on_progress:
            on_progress(1)
    if batch:
        flush()
    return report


def _write_batch(
    services: Container,
    batch: list[tuple[ImportedConversation, str]],
    report: ImportReport,
    ttl_cutoff: datetime | None,
    scope: Scope,
) -> None:
    person = scope.person
    digests = list({digest for _, digest in batch})
    with services.db.write() as session:
        existing: dict[str, int] = {
            str(key): int(row_id)
            for key, row_id in session.execute(
                select(AuditLog.subject_key, AuditLog.id).where(
                    AuditLog.event_type == audit.CHAT_COMPLETED,
                    AuditLog.subject_key.in_(digests),
                    AuditLog.person_id == person,  # another person's copy is theirs
                )
            )
        }
        for conversation, digest in batch:
            if digest in existing:  # imported before, or twice in this file
                report.duplicates += 1
                report.audit_ids.append(existing[digest])
                continue
            row_id = conversations.add_finished(
                Scope(person, session),
                services.audit,
                chat_payload(conversation, digest),
                conversation.created_at,
                subject_key=digest,
            )
            existing[digest] = row_id
            report.imported += 1
            report.audit_ids.append(row_id)
            if ttl_cutoff is not None and conversation.created_at < ttl_cutoff:
                report.older_than_ttl += 1


def import_file(
    services: Container,
    path: Path,
    *,
    scope: Scope,
    batch_size: int = BATCH_SIZE,
    on_progress: ProgressFn | None = None,
) -> ImportReport:
    if not path.is_file():
        raise InputError(f"{path} is not a file")
    return import_lines(
        services, _lines(path), scope=scope, batch_size=batch_size, on_progress=on_progress
    )


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def import_conversations(
    services: Container,
    conversations: Iterable[dict[str, Any]],
    *,
    scope: Scope,
    batch_size: int = BATCH_SIZE,
) -> ImportReport:
    """For benchmarks and scripts: the same import from already-parsed objects (index+1 is the
    "line" number in errors)."""
    numbered = (
        (i, json.dumps(c, ensure_ascii=False, default=_json_default))
        for i, c in enumerate(conversations, start=1)
    )
    return import_lines(services, numbered, scope=scope, batch_size=batch_size)
