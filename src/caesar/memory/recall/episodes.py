"""Episode recall's state (ADR-0034 §3–4): `EpisodeMemory`, what a recall needs beyond the
person's scope — the embedder, the recall settings, the operator's time zone, the engine's
search backend (picked once, memory/engine/backend.py) — and the record of what a turn
recalled (`record_recalls`: the counters, one `memory.episode.recalled` audit row each).

The recall itself is recall/pipeline.py's: a search keeps summaries of the current embedder
model whose relevance clears the threshold (hybrid: the `gated` relevance, recall/hybrid.py)
and whose conversation is younger than `max_age_days`, ranks them (`ranking = "prior"`, the
default: relevance alone, comparable matches newest first; `"adr"`: relevance × freshness ×
recall_weight; the dense fusion mode is always the ADR's), and returns the top K with every
component, so the audit row (and the preview API) can explain each one. With no keyword
match, hybrid relevance is exactly the cosine (docs/recall-quality.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from datetime import UTC, datetime, tzinfo

import numpy as np

from caesar import audit
from caesar.clock import utcnow
from caesar.config import EpisodesRecallSettings
from caesar.db.engine import Database
from caesar.db.models import EpisodeSummary
from caesar.embeddings import EmbedderHandle, embed_one, embed_soon
from caesar.memory.engine.backend import SearchBackend, backend_for
from caesar.memory.engine.pgvector_migration import Progress, VectorStatus
from caesar.memory.engine.rows import count_recalls
from caesar.memory.engine.said_vectors import SaidVectors
from caesar.memory.engine.vectors import CurrentModelIndex, VectorIndex
from caesar.memory.recall.hits import RecalledEpisode, RecallParams
from caesar.memory.recall.question import Asked, read_question
from caesar.memory.scope import Scope


class EpisodeMemory:
    def __init__(
        self,
        db: Database,
        embedder: EmbedderHandle,
        settings: EpisodesRecallSettings,
        audit_log: audit.Audit,
        zone: tzinfo = UTC,
    ) -> None:
        self.db = db
        self.zone = zone  # the operator's: "yesterday" is theirs
        self.embedder = embedder
        self.settings = settings
        self.audit = audit_log
        self._indexes = CurrentModelIndex(
            EpisodeSummary,
            lambda: self.embedder.get().model_id,
            extra_filter=EpisodeSummary.summary != "",
        )
        # the dated memories' vectors, searched in this process on either engine (issue #45)
        self.said = SaidVectors(lambda: self.embedder.get().model_id)
        # chosen once, by engine: what recall searches the episodes with
        self.backend: SearchBackend = backend_for(
            db,
            self._indexes,
            settings.vector_search,
            dimension=lambda: int(self.embed_query("dimension").shape[-1]),
        )

    def index(self, person: int) -> VectorIndex:
        return self._indexes.get(person)

    @contextmanager
    def reading(self, person: int, now: datetime | None = None) -> Iterator[Scope]:
        """`person`'s memory to recall from, at `now`: a read session on this engine. The one
        place a recall's scope is made (the brain, the preview, the tools)."""
        with self.db.read() as session:
            yield Scope(person, session, self.backend, now)

    def warm(self) -> int:
        """Ready the search now (start-up), rather than on the first turn."""
        return self.backend.warm(self.db)

    def warm_said(self) -> int:
        """Load the dated memories' vectors now, when recall shows them (a share of the
        budget): after start-up is ready (~66 s for a million on this host), not on a turn."""
        return self.said.warm(self.db) if self.settings.said_share > 0 else 0

    def migrate_vectors(self, progress: Progress | None = None) -> VectorStatus | None:
        """Move the vectors where the database searches them, if it does (PostgreSQL with
        pgvector): batched, resumable; recall goes on meanwhile."""
        return self.backend.migrate(self.db, progress)

    def forget(self, episode_ids: list[int]) -> None:
        """Never recall episodes deleted by retention again (the in-process index drops them)."""
        self.backend.forget(episode_ids)

    def embed_query(self, text: str) -> np.ndarray:
        return embed_one(self.embedder.get(), text)

    def embed_query_soon(self, text: str) -> Future[np.ndarray]:
        """`embed_query` on another thread (embeddings.embed_soon): `search` takes the future
        and reads what needs no vector while it is computed."""
        return embed_soon(self.embedder, text)

    def read(self, text: str, now: datetime) -> Asked:
        """What `text` says of time and gathering, on the operator's clock."""
        return read_question(text, now, self.zone)

    def search(
        self,
        query_vector: np.ndarray | Future[np.ndarray],
        now: datetime,
        params: RecallParams,
        query_text: str | None = None,
        asked: Asked | None = None,
        *,
        scope: Scope,
    ) -> list[RecalledEpisode]:
        """`person`'s episodes nearest the query (recall/pipeline.py, `search`), in a read
        session of their own: nobody else's is searched."""
        person = scope.person
        from caesar.memory.recall import pipeline  # the pipeline is handed this memory

        with self.reading(person, now) as scope:
            return pipeline.search(self, scope, query_vector, params, query_text, asked)

    def preview(
        self,
        query: str,
        now: datetime | None = None,
        *,
        scope: Scope,
        vector: np.ndarray | Future[np.ndarray] | None = None,
        **overrides: object,
    ) -> list[RecalledEpisode]:
        """What auto-recall would rank for `person`, without bumping anything (the ranking
        alone; recall/pipeline.py `preview` adds the excerpts). `vector`: the query's, if the
        caller has it under way (else it is embedded here)."""
        params = RecallParams.from_settings(self.settings, **overrides)
        vector = self.embed_query_soon(query) if vector is None else vector
        return self.search(vector, now or utcnow(), params, query_text=query, scope=scope)

    def record_recalls(
        self,
        scope: Scope,
        episodes: list[RecalledEpisode],
        *,
        now: datetime,
        context: dict[str, object],
    ) -> None:
        """Bump counters and append one `memory.episode.recalled` row per surfaced episode
        (`person`'s, as the episodes are)."""
        if not episodes:
            return
        index = self._indexes.loaded(scope.person)
        # One statement for all of them, and one for their audit rows: this runs inside every
        # chat turn's write transaction.
        count_recalls(scope, sorted(e.episode_id for e in episodes if not e.pending), now)
        rows = []
        for episode in episodes:
            if index is not None and not episode.pending:
                index.set_recall_count(episode.episode_id, episode.recall_count + 1)
            payload = {**episode.as_json(), **context}
            payload.pop("summary", None)
            payload["summary"] = episode.summary
            rows.append(
                audit.AuditEntry(audit.EPISODE_RECALLED, payload, subject_id=episode.audit_log_id)
            )
        self.audit.append_many(scope, rows)
