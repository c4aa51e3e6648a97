"""What `caesar serve` prints before it listens: what this server is made of, and what it will
remember and forget — the operator should not have to read the configuration to know."""

from __future__ import annotations

from datetime import tzinfo
from typing import TYPE_CHECKING

from caesar.config import Settings
from caesar.memory.engine.pgvector_migration import VectorStatus

if TYPE_CHECKING:
    from caesar.container import Container


def startup_summary(settings: Settings, built: Container, run_workers: bool) -> list[str]:
    """A few lines: database, embedder, routes, workers, time zone, recall window, retention."""
    url = built.db.engine.url.render_as_string(hide_password=True)
    embedder = settings.embedder
    lines = [
        f"database   {url}",
        f"embedder   {embedder.kind} {embedder.model}"
        if settings.semantic.enabled
        else "embedder   off (semantic.enabled = false): no recall",
    ]
    for task, target in settings.gateway.routes.items():
        name = target.partition(":")[0]
        lines.append(f"route      {task} → {target} ({settings.gateway.providers[name].kind})")
    on = [w.name for w in built.enabled_workers()] if run_workers else []
    where = (
        f" (in their own process, nice {settings.workers_nice})"
        if on and settings.workers_process
        else ""
    )
    lines.append(f"workers    {', '.join(on) + where if on else 'none in this process'}")
    lines.append(f"timezone   {_zone_line(settings)}")
    lines.append(f"recall     {_recall_line(settings)}")
    if settings.semantic.enabled:
        lines.append(f"search     {_search_line(settings, vector_status(settings, built))}")
    lines.append(f"retention  {_retention_line(settings, run_workers)}")
    return lines


def zone_name(zone: tzinfo) -> str:
    """'Europe/Berlin' for a ZoneInfo, 'UTC' for datetime.UTC."""
    return str(getattr(zone, "key", None) or zone)


def _zone_line(settings: Settings) -> str:
    name = zone_name(settings.zone)
    if settings.timezone is None:
        return f"{name} (the host's; the timezone setting names another)"
    return name


def _recall_line(settings: Settings) -> str:
    recall = settings.memory.episodes_recall
    if not settings.semantic.enabled:
        return "off (semantic.enabled = false)"
    if not recall.enabled:
        return "off (memory.episodes_recall.enabled = false)"
    if recall.max_age_days is None:
        return "past conversations of any age (no age window; age is a prior only)"
    return (
        f"conversations older than {recall.max_age_days} days are not recalled "
        "(memory.episodes_recall.max_age_days)"
    )


def vector_status(settings: Settings, built: Container) -> VectorStatus | None:
    """Where the embedder's episode vectors stand in PostgreSQL; None where they are searched
    in this process by choice (SQLite, or vector_search = "in_process")."""
    from caesar.memory.engine import upkeep

    vector_search = settings.memory.episodes_recall.vector_search
    return upkeep.vector_status(built.db, vector_search, settings.embedder.model)


def _search_line(settings: Settings, status: VectorStatus | None) -> str:
    if status is None:
        engine = "FTS5" if settings.sqlalchemy_url.startswith("sqlite") else "tsvector"
        return f"{engine} and an index of the episodes' vectors in this process"
    if status.ready:
        return f"tsvector and {status.describe()}: nothing loaded in this process"
    if not status.installed:
        return f"tsvector and an index in this process — {status.describe()}"
    return (
        "tsvector and an index in this process until the vectors are in pgvector "
        f"({status.describe()}): moved after warm-up, in the background"
    )


def _retention_line(settings: Settings, run_workers: bool) -> str:
    retention = settings.retention
    if retention.ttl_days is None:
        return "off — nothing is deleted unless you forget it (retention.ttl_days sets a TTL)"
    if not retention.enabled:
        return (
            f"off (retention.enabled = false) — the {retention.ttl_days}-day TTL is not "
            "applied; nothing is deleted unless you forget it"
        )
    seconds = retention.interval_seconds
    every = "hourly" if seconds == 3600 else f"every {seconds:g} s"
    where = "" if run_workers else "; by `caesar worker`, not this process"
    return (
        f"chats and audit rows older than {retention.ttl_days} days are deleted, with their "
        f"summaries and excerpts ({every} sweep{where})"
    )


def where_to_open(settings: Settings) -> list[str]:
    """Where the server answers, and where a browser opens its chat page (issue #25): an
    address that listens everywhere is opened on this host's loopback."""
    host = settings.host
    browse = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}.get(host, host)
    if ":" in browse and not browse.startswith("["):
        browse = f"[{browse}]"
    login = " (log in with the API token)" if settings.api_token is not None else ""
    return [
        f"caesar listening on http://{host}:{settings.port}",
        f"chat       http://{browse}:{settings.port}/dashboard/chat{login}",
    ]
