"""Small builders for memory tests: real rows, real embeddings, written the way caesar does."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from conftest import OWNER
from sqlalchemy import func, select

from caesar.clock import utcnow
from caesar.db.models import AuditLog, Conversation
from caesar.errors import EmbedderError
from caesar.memory import conversations
from caesar.memory.episodes.rows import episode_row
from caesar.memory.scope import Scope


def days_ago(days: float, now: datetime | None = None) -> datetime:
    return (now or utcnow()) - timedelta(days=days)


def add_chat(services: Any, user: str, reply: str, created_at: datetime | None = None) -> int:
    """A one-turn conversation, as `caesar import` writes one: its chat row's id."""
    with services.db.write() as session:
        return conversations.add_finished(
            Scope(OWNER, session),
            services.audit,
            {"messages": [{"role": "user", "content": user}], "reply": reply},
            created_at or utcnow(),
        )


def add_episode(
    services: Any, summary: str, created_at: datetime, *, recall_count: int = 0
) -> tuple[int, int]:
    """A chat row and its summary, embedded by the services' embedder: (episode id, audit id)."""
    embedder = services.embedder.get()
    vector = embedder.embed_batch([summary])[0]
    audit_id = add_chat(services, f"(chat behind: {summary})", "ok", created_at)
    with services.db.write() as session:
        row = episode_row(
            audit_log_id=audit_id,
            summary=summary,
            vector=vector,
            model=embedder.model_id,
            created_at=created_at,
            recall_count=recall_count,
            scope=Scope(OWNER),
        )
        link_summarised(session, row)
        session.add(row)
        session.flush()
        return row.id, audit_id


def link_summarised(session: Any, row: Any) -> None:
    """Episode `row` and its conversation linked as the summariser leaves them: the
    conversation summarised up to the chat the row was written from."""
    conversation = session.scalars(
        select(Conversation).where(Conversation.tip_audit_id == row.audit_log_id)
    ).one()
    conversation.summarised_audit_id = row.audit_log_id
    row.conversation_id = conversation.id


def events(services: Any, event_type: str) -> list[AuditLog]:
    with services.db.read() as session:
        return list(
            session.scalars(
                select(AuditLog).where(AuditLog.event_type == event_type).order_by(AuditLog.id)
            )
        )


def count(services: Any, model: Any, *where: Any) -> int:
    with services.db.read() as session:
        return int(session.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def cosine(services: Any, a: str, b: str) -> float:
    va, vb = services.embedder.get().embed_batch([a, b])
    return float(va @ vb)


class BrokenEmbedder:
    """A real implementation of the Embedder protocol whose backend is down."""

    model_id = "all-MiniLM-L6-v2"

    def __init__(self) -> None:
        self.calls = 0

    def embed_batch(self, texts: Any) -> Any:
        self.calls += 1
        raise EmbedderError("all-MiniLM-L6-v2: onnxruntime session is gone")


def write_config(path: Path, settings: Any) -> Path:
    """A TOML config equivalent to test `settings` (what `caesar …` reads via CAESAR_CONFIG)."""
    import json as _json

    data = _json.loads(settings.model_dump_json())  # SecretStr is masked here: keys come below

    gateway = settings.gateway
    lines = [f'home = "{settings.home}"']
    if settings.database_url:
        lines.append(f'database_url = "{settings.database_url}"')
    for name, provider in gateway.providers.items():
        lines.append(f"[gateway.providers.{name}]")
        lines.append(f'kind = "{provider.kind}"')
        if provider.base_url:
            lines.append(f'base_url = "{provider.base_url}"')
        if provider.api_key:
            lines.append(f'api_key = "{provider.api_key.get_secret_value()}"')
        lines.append(f"max_retries = {provider.max_retries}")
        lines.append(f"timeout_seconds = {provider.timeout_seconds}")
    lines.append("[gateway.routes]")
    for task, target in gateway.routes.items():
        lines.append(f'{task} = "{target}"')
    lines.append("[embedder]")
    lines.append(f'cache_dir = "{settings.embedder.cache_dir}"')
    # TOML has no null: a setting that is None (no TTL, no age window) is left out.
    for section in ("semantic", "retention"):
        lines.append(f"[{section}]")
        for key, value in data[section].items():
            if value is not None:
                lines.append(f"{key} = {_json.dumps(value)}")
    for sub, values in data["memory"].items():
        lines.append(f"[memory.{sub}]")
        for key, value in values.items():
            if value is not None:
                lines.append(f"{key} = {_json.dumps(value)}")
    for run in data["proactive"]:
        lines.append("[[proactive]]")
        for key, value in run.items():
            if value is not None:
                lines.append(f"{key} = {_json.dumps(value)}")
    path.write_text("\n".join(lines) + "\n")
    return path


# Settings overrides for the offline memory routes, with the workers that learn turned on.
LEARNING: dict[str, Any] = {
    "gateway": {
        "routes": {"memory_extract": "offline:patterns", "memory_summarise": "offline:textrank"}
    },
    "memory": {"facts_extract": {"enabled": True}, "episodes_summarise": {"enabled": True}},
}


def learning_household(make_services: Any, db_url: str, name: str) -> tuple[Any, int, str]:
    """The owner (the test token) and one more person, `name`, on `db_url`, with the offline
    memory routes on, so that chats become facts, episodes and windows: (services, the
    person's id, their token)."""
    from conftest import TEST_TOKEN

    from caesar import people

    services = make_services(api_token=TEST_TOKEN, database_url=db_url, **LEARNING)
    with services.db.write() as session:
        person, token = people.add(session, services.audit, name)
        return services, person.id, token


def engine_scope(session: Any, person: int = OWNER, model: str = "m") -> Scope:
    """`person`'s scope in `session` on its database's engine (full text and an in-process
    index of `model`'s vectors), as recall is handed one: for tests that write rows by hand."""
    from caesar.db.models import EpisodeSummary
    from caesar.memory.engine.backend import search_backend
    from caesar.memory.engine.vectors import CurrentModelIndex

    indexes = CurrentModelIndex(EpisodeSummary, lambda: model)
    engine = search_backend(session.get_bind().dialect.name, indexes, "in_process")
    return Scope(person, session, engine)


def install_at(tmp_path: Any, revision: str, payload: dict[str, Any]) -> str:
    """An install migrated to `revision` holding one chat (audit id 1, 2026-11-01 10:00) that
    its extract worker has read; then upgraded to head. Its database URL."""
    import json

    from sqlalchemy import text

    from caesar.db import migrate
    from caesar.db.engine import Database

    url = f"sqlite:///{tmp_path / 'upgraded.db'}"
    db = Database(url)
    migrate.upgrade(db, revision)
    with db.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO audit_log (id, event_type, created_at, payload, person_id) VALUES "
                "(1, 'chat.completed', '2026-11-01 10:00:00', :payload, 1)"
            ),
            {"payload": json.dumps(payload)},
        )
        connection.execute(text("UPDATE memory_extract_cursor SET last_audit_id = 1"))
    migrate.upgrade(db)
    db.dispose()
    return url
