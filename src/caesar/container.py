"""What a worker, a route or a command is handed: caesar's parts, built once (`Services`).

A protocol in a low module, so that the modules `Services` builds (the workers, the brain, the
proactive scheduler) can name its type without importing it: `services.py` imports them to
build them, and they import only this. `Services` (services.py) is the one implementation;
tests build it too, with real parts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from caesar.audit import Audit
    from caesar.config import Settings
    from caesar.db.engine import Database
    from caesar.embeddings import EmbedderHandle
    from caesar.gateway import Gateway
    from caesar.memory.dated.store import DatedStore
    from caesar.memory.facts.store import FactsStore
    from caesar.memory.recall.episodes import EpisodeMemory
    from caesar.memory.semantic import SemanticMemory
    from caesar.memory.standing.store import StandingStore
    from caesar.readiness import Readiness
    from caesar.workers import Worker


class Container(Protocol):
    settings: Settings
    db: Database
    audit: Audit
    gateway: Gateway
    embedder: EmbedderHandle
    facts: FactsStore
    episodes: EpisodeMemory
    semantic: SemanticMemory
    standing: StandingStore
    dated: DatedStore
    workers: dict[str, Worker]
    readiness: Readiness

    def owner_id(self) -> int: ...

    def person_id(self, name: str | None) -> int: ...

    def enabled_workers(self) -> list[Worker]: ...

    def close(self) -> None: ...
