"""Everything a request, a worker or a CLI command needs, built once from the settings."""

from __future__ import annotations

from dataclasses import dataclass, field

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


def _secrets(settings: Settings) -> list[str]:
    found = [settings.api_token.get_secret_value()] if settings.api_token else []
    if settings.people.frontend_token:
        found.append(settings.people.frontend_token.get_secret_value())
    for provider in settings.gateway.providers.values():
        if provider.api_key:
            found.append(provider.api_key.get_secret_value())
    if settings.embedder.api_key:
        found.append(settings.embedder.api_key.get_secret_value())
    # "ollama" and similar placeholders are not secrets worth cutting out of every payload.
    return [s for s in found if len(s) >= 8]


@dataclass
class Services:
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
    workers: dict[str, Worker] = field(default_factory=dict)
    readiness: Readiness = field(default_factory=Readiness)

    @classmethod
    def build(cls, settings: Settings, db: Database | None = None) -> Services:
        db = db or Database(settings.sqlalchemy_url)
        audit_log = Audit(_secrets(settings))
        embedder = EmbedderHandle(settings)
        services = cls(
            settings=settings,
            db=db,
            audit=audit_log,
            gateway=Gateway(settings.gateway),
            embedder=embedder,
            facts=FactsStore(db, settings.memory.facts_importance, audit_log),
            episodes=EpisodeMemory(
                db, embedder, settings.memory.episodes_recall, audit_log, settings.zone
            ),
            semantic=SemanticMemory(db, embedder),
            standing=StandingStore(db, embedder),
            dated=DatedStore(db, embedder),
        )
        services.workers = {w.name: w for w in _all_workers(services)}
        return services

    def owner_id(self) -> int:
        """The owner's person id (issue #23): who the server's own rows, the `api_token`
        and, by default, the CLI act as. Read once: nothing changes or removes the owner."""
        cached = self.__dict__.get("_owner_id")
        if cached is None:
            from caesar import people

            with self.db.read() as session:
                cached = self.__dict__["_owner_id"] = people.owner(session).id
        return int(cached)

    def person_id(self, name: str | None) -> int:
        """The id of the person called `name`; the owner's for None. NotFound names who
        there is."""
        if name is None:
            return self.owner_id()
        from caesar import people

        with self.db.read() as session:
            return people.named(session, name).id

    def enabled_workers(self) -> list[Worker]:
        return [w for w in self.workers.values() if w.enabled]

    def close(self) -> None:
        self.db.dispose()


def _all_workers(services: Services) -> list[Worker]:
    from caesar.memory.dated.backfill import DatedBackfillWorker
    from caesar.memory.episodes.reembed import PassagesWorker
    from caesar.memory.episodes.summarise import SummariseWorker
    from caesar.memory.facts.extract import ExtractWorker
    from caesar.memory.semantic import SemanticIndexWorker
    from caesar.memory.standing.backfill import StandingBackfillWorker
    from caesar.memory.upgrade import UpgradeWorker
    from caesar.proactive import ProactiveScheduler
    from caesar.retention import RetentionWorker

    return [
        ExtractWorker(services),
        StandingBackfillWorker(services),
        DatedBackfillWorker(services),
        SummariseWorker(services),
        PassagesWorker(services),
        SemanticIndexWorker(services),
        UpgradeWorker(services),
        RetentionWorker(services),
        ProactiveScheduler(services),
    ]
