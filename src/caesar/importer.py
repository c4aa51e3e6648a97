"""`caesar import FILE`: past conversations become `chat.completed` rows, dated when they
happened, so the memory workers (summarise, extract, index) learn from them like live chats.

Other assistants' exports (ChatGPT, Claude, Open WebUI; import_formats.py reads them) are
found by shape; each source conversation is one row, keyed `import:<format>:<its id>`, so a
second import of the same export, or of a later one, adds only what is new. Batches are one
transaction each: a conversation is written whole or not at all, and an import stopped
halfway finishes the rest when run again.

caesar's own JSONL, one conversation per line: `{"created_at": ISO-8601, "messages": [{"role", "content"}, …]}`,
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

from caesar import audit, import_formats
from caesar.clock import to_naive_utc, utcnow
from caesar.db.models import AuditLog
from caesar.errors import InputError
from caesar.import_formats import Broken, FileBroken, Source
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
    format: str = "caesar"
    imported: int = 0
    duplicates: int = 0
    errors: list[LineError] = field(default_factory=list)  # caesar JSONL: lines skipped
    broken: list[Broken] = field(default_factory=list)  # an export's conversations skipped
    empty: int = 0  # an export's conversations with nothing said in them
    # imported, but the next retention sweep will delete them (0 when no TTL is set)
    older_than_ttl: int = 0
    # One entry per valid input, in order: the chat.completed id it is stored as (for a
    # duplicate, the id stored the first time). Benchmarks map their sessions with this.
    audit_ids: list[int] = field(default_factory=list)

    @property
    def failed(self) -> int:
        """Conversations that could not be read: the import exits non-zero."""
        return len(self.errors) + len(self.broken)

    @property
    def found(self) -> int:
        """Conversations the file holds that are (now) in memory."""
        return self.imported + self.duplicates


ProgressFn = Callable[[int], None]


def _ttl_cutoff(services: Container) -> datetime | None:
    retention = services.settings.retention
    if retention.active and retention.ttl_days is not None:
        return utcnow() - timedelta(days=retention.ttl_days)
    return None


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
    ttl_cutoff = _ttl_cutoff(services)
    batch: list[_Row] = []

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
                digest = content_hash(conversation)
                at = conversation.created_at
                batch.append(_Row(digest, chat_payload(conversation, digest), at, at))
                if len(batch) >= batch_size:
                    flush()
        if on_progress:
            on_progress(1)
    if batch:
        flush()
    return report


@dataclass(frozen=True)
class _Row:
    """A conversation ready to write: its key (what a re-import finds it by), payload, dates."""

    key: str
    payload: dict[str, Any]
    created_at: datetime
    last_at: datetime


def _write_batch(
    services: Container,
    batch: list[_Row],
    report: ImportReport,
    ttl_cutoff: datetime | None,
    scope: Scope,
) -> None:
    person = scope.person
    keys = list({row.key for row in batch})
    with services.db.write() as session:
        existing: dict[str, int] = {
            str(key): int(row_id)
            for key, row_id in session.execute(
                select(AuditLog.subject_key, AuditLog.id).where(
                    AuditLog.event_type == audit.CHAT_COMPLETED,
                    AuditLog.subject_key.in_(keys),
                    AuditLog.person_id == person,  # another person's copy is theirs
                )
            )
        }
        new: dict[str, _Row] = {}
        for row in batch:
            if row.key in existing or row.key in new:  # imported before, or twice in this file
                report.duplicates += 1
            else:
                new[row.key] = row
        written = conversations.add_finished_many(
            Scope(person, session),
            services.audit,
            [
                conversations.Finished(row.payload, row.created_at, row.key, row.last_at)
                for row in new.values()
            ],
        )
        existing.update(zip(new, written, strict=True))
        for row in batch:  # in the file's order, a repeat with its first's row
            report.audit_ids.append(existing[row.key])
        for row in new.values():
            report.imported += 1
            if ttl_cutoff is not None and row.last_at < ttl_cutoff:
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


# -- other assistants' exports (import_formats.py) --------------------------------------------
KEY_PREFIX = "import:"
LABELS = import_formats.LABELS  # what the CLI and the dashboard call each format
MAX_CONVERSATION_CHARS = MAX_LINE_CHARS


def source_row(source: Source, fmt: str) -> _Row | str | None:
    """A source conversation as caesar stores an imported one; a reason it cannot be (a
    `Broken`); None when nothing was said in it."""
    messages = [m for m in source.messages if m.content.strip()]
    if not any(m.role == "user" for m in messages):
        return None
    if len(messages) > MAX_MESSAGES:
        return f"{len(messages)} messages, more than the {MAX_MESSAGES} an import takes"
    if sum(len(m.content) for m in messages) > MAX_CONVERSATION_CHARS:
        return f"longer than {MAX_CONVERSATION_CHARS:,} characters"
    times = [m.at for m in messages if m.at is not None]
    start = to_naive_utc(min([source.created_at, *times]))
    last = to_naive_utc(max([source.created_at, *times]))
    if last > utcnow() + FUTURE_TOLERANCE:
        return f"dated {last.isoformat()}, in the future"
    *earlier, final = messages
    reply = final if final.role == "assistant" else None
    said = earlier if reply else messages

    def stored(role: str, content: str, at: datetime | None) -> dict[str, Any]:
        item: dict[str, Any] = {"role": role, "content": content.replace("\x00", "\ufffd")}
        if at is not None:
            item["at"] = to_naive_utc(at).isoformat()
        return item

    payload: dict[str, Any] = {
        "messages": [stored(m.role, m.content, m.at) for m in said],
        # A conversation that ended on the person's words (the reply failed) keeps them.
        "reply": reply.content.replace("\x00", "\ufffd") if reply else "",
        "imported": True,
        "source": fmt,
        "source_key": source.key,
    }
    if reply is not None and reply.at is not None:
        payload["reply_at"] = to_naive_utc(reply.at).isoformat()
    if source.title:
        payload["title"] = source.title[:300]
    return _Row(KEY_PREFIX + source.key, payload, start, last)


def import_sources(
    services: Container,
    sources: Iterable[Source | Broken],
    fmt: str,
    *,
    scope: Scope,
    batch_size: int = BATCH_SIZE,
    on_progress: ProgressFn | None = None,
) -> ImportReport:
    """Import an export's conversations (import_formats.read) into `scope.person`'s memory."""
    report = ImportReport(format=fmt)
    ttl_cutoff = _ttl_cutoff(services)
    batch: list[_Row] = []
    for source in sources:
        if isinstance(source, Broken):
            report.broken.append(source)
        else:
            row = source_row(source, fmt)
            if row is None:
                report.empty += 1
            elif isinstance(row, str):
                report.broken.append(Broken(source.key, row))
            else:
                batch.append(row)
                if len(batch) >= batch_size:
                    _write_batch(services, batch, report, ttl_cutoff, Scope(scope.person))
                    batch.clear()
        if on_progress:
            on_progress(1)
    if batch:
        _write_batch(services, batch, report, ttl_cutoff, Scope(scope.person))
    return report


def _sources(path: Path, named: str | None) -> tuple[str, Iterator[Source | Broken] | None]:
    """The format `path` is in (found by its shape, or `named` and checked) and its
    conversations (None for caesar JSONL). InputError for an unknown name; FileBroken for a
    file in no known format or not in the named one, before anything is written."""
    if named is not None and named not in import_formats.FORMATS:
        raise InputError(
            f"unknown format {named!r}; known formats: {', '.join(import_formats.FORMATS)}"
        )
    if not path.is_file():
        raise InputError(f"{path} is not a file")
    if named is None:
        return import_formats.found_and_read(path)
    if named != "caesar":
        return named, import_formats.read(path, named)  # says what else it looks like
    found = import_formats.detect(path)
    if found != "caesar":
        raise FileBroken(f"{path}: not {LABELS['caesar']}: it looks like a {LABELS[found]}")
    return "caesar", None


def import_path(
    services: Container,
    path: Path,
    *,
    scope: Scope,
    fmt: str | None = None,
    batch_size: int = BATCH_SIZE,
    on_format: Callable[[str], None] | None = None,
    on_total: Callable[[int], None] | None = None,
    on_progress: ProgressFn | None = None,
) -> ImportReport:
    """`caesar import`: `path` in whichever format it is (or `fmt`, checked). A file that cannot
    be read at all raises FileBroken before anything is written. `on_format(name)` once the
    format is known; `on_total(n)`: how many conversations (or lines) there are."""
    found, read = _sources(path, fmt)
    if on_format:
        on_format(found)
    if read is None:
        if on_total:
            on_total(_count_lines(path))
        return import_file(
            services, path, scope=scope, batch_size=batch_size, on_progress=on_progress
        )
    sources = list(read)
    if on_total:
        on_total(len(sources))
    return import_sources(
        services, sources, found, scope=scope, batch_size=batch_size, on_progress=on_progress
    )


def _count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)
