"""Episode recall (ADR-0034 §3–4): which past conversations a message brings back, and why.

A search keeps summaries of the current embedder model whose relevance clears the threshold
(hybrid: the `gated` relevance, see memory/recall/hybrid.py) and whose conversation is younger
than `max_age_days`, ranks them (`ranking = "prior"`, the default: relevance alone, comparable
matches newest first; `"adr"`: relevance × freshness × recall_weight; the dense path below is
always the ADR's), and returns the top K with every component, so the
`memory.episode.recalled` audit row (and the preview API) can explain each one.

Relevance is the ADR's raw cosine when `fusion = "dense"`; with the default `"hybrid"` it
fuses that cosine with keyword relevance over the summary and the conversation
(memory/recall/hybrid.py, measured in docs/recall-quality.md). With no keyword match, hybrid
relevance is exactly the cosine.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, fields
from datetime import UTC, datetime, tzinfo
from typing import Any

import numpy as np
from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from caesar import audit
from caesar.clock import utcnow
from caesar.config import EpisodesRecallSettings
from caesar.db.engine import Database
from caesar.db.models import AuditLog, EpisodeSummary
from caesar.embeddings import EmbedderHandle, embed_one, embed_soon, vector_of
from caesar.gateway.base import Message
from caesar.memory.conversations import NO_CURRENT, Current, unsummarised_within
from caesar.memory.importance import (
    SECONDS_PER_DAY,
    episode_rank,
    freshness,
    recall_weight,
)
from caesar.memory import passages
from caesar.memory.engine.backend import SearchBackend, search_backend
from caesar.memory.recall.hybrid import EPISODE_COLUMNS, Fusion, Ranking, hybrid_search
from caesar.memory.passages import window_spans, window_turns
from caesar.memory.engine.pgvector_migration import Progress, VectorStatus
from caesar.memory.recall.question import Asked, read_question
from caesar.memory.engine.sql import PERSON_CHECK, driver_rows, marks, person_checked
from caesar.memory.engine.vectors import CurrentModelIndex, VectorIndex, epoch_seconds, to_f32_bytes
from caesar.memory.transcript import conversation_turns

# A message naming a span brings up to this many of its conversations that have no episode
# yet (EpisodeMemory.unsummarised), their line saying so.
UNSUMMARISED_POOL = 5
UNSUMMARISED_LINE = "(not summarised yet)"
# Candidates fetched beyond top_k, so fresh counters from the database can reorder them.
OVERFETCH = 4
# Built once: every chat turn runs it.
_CANDIDATE_ROWS = select(*EPISODE_COLUMNS).where(
    EpisodeSummary.id.in_(bindparam("ids", expanding=True))
)


def rank_episodes(
    rows: list[tuple[int, int, str, datetime, int]],
    cosines: dict[int, float],
    now: datetime,
    params: RecallParams,
) -> list[RecalledEpisode]:
    """Score (id, audit_log_id, summary, created_at, recall_count) rows; best first, top K."""
    out = []
    for episode_id, audit_id, summary, created_at, count in rows:
        age = (now - created_at).total_seconds() / SECONDS_PER_DAY
        fresh = freshness(age, params.halflife_days)
        weight = recall_weight(count, params.recall_weight_scale)
        cosine = cosines[episode_id]
        out.append(
            RecalledEpisode(
                episode_id=episode_id,
                audit_log_id=audit_id,
                summary=summary,
                created_at=created_at,
                cosine=cosine,
                age_days=age,
                freshness=fresh,
                recall_count=count,
                recall_weight=weight,
                score=cosine * fresh * weight,
                relevance=cosine,
                gated=cosine,
            )
        )
    out.sort(key=lambda e: (-e.score, -e.episode_id))
    return out[: params.top_k]


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
        # chosen once, by engine: what recall searches the episodes with
        self.backend: SearchBackend = search_backend(
            db.engine.dialect.name,
            self._indexes,
            settings.vector_search,
            dimension=lambda: int(self.embed_query("dimension").shape[-1]),
        )

    def index(self, person: int) -> VectorIndex:
        return self._indexes.get(person)

    def warm(self) -> int:
        """Ready the search now (start-up), rather than on the first turn."""
        return self.backend.warm(self.db)

    def migrate_vectors(self, progress: Progress | None = None) -> VectorStatus | None:
        """Move the vectors where the database searches them, if it does (PostgreSQL with
        pgvector): batched, resumable; recall goes on meanwhile."""
        return self.backend.migrate(self.db, progress)

    def forget(self, episode_ids: list[int]) -> None:
        """Never recall episodes deleted by retention again (the in-process index drops them)."""
        self.backend.forget(episode_ids)

    def conversations(self, audit_ids: list[int], *, person: int) -> dict[int, list[Message]]:
        """The user/assistant turns of these chats of `person`'s (audit row id → turns), reply
        included: what excerpts are cut from. A chat swept since it was recalled is absent."""
        if not audit_ids:
            return {}
        with self.db.read() as session:
            rows = session.execute(
                select(AuditLog.id, AuditLog.payload).where(
                    AuditLog.id.in_(audit_ids),
                    person_checked(AuditLog.person_id, person),
                )
            ).all()
        return {int(i): conversation_turns(payload or {}) for i, payload in rows}

    def turn_cosines(
        self, episode_ids: list[int], vector: np.ndarray, *, person: int
    ) -> dict[int, np.ndarray]:
        """Each of these episodes' turn cosines with the (unit) message vector, in turn order
        (memory/passages.py, `turn_texts`), for those of `person`'s with turn vectors of
        its dimension: what picks their excerpts with the windows (`passages.lift`)."""
        if not episode_ids:
            return {}
        with self.db.read() as session:
            sql = (
                "SELECT id, turn_vectors FROM episode_summaries WHERE id IN "
                f"({marks(session, len(episode_ids))}) AND {PERSON_CHECK} = {marks(session, 1)}"
            )
            rows = driver_rows(session, sql, [*(int(i) for i in episode_ids), int(person)])
        return passages.cosines([(int(i), blob) for i, blob in rows], vector)

    def unsummarised(
        self, asked: Asked, now: datetime, *, person: int, current: Current = NO_CURRENT
    ) -> list[RecalledEpisode]:
        """`person`'s conversations held in the spans `asked` names that have no episode yet
        (memory/conversations.py `unsummarised_within`; not `current`, the turn's own), newest
        first, as recalled episodes marked `pending`: a chat an hour ago is part of "today"
        before the summariser, which waits for it to go quiet, has reached it. Their line
        says so; their turns are their excerpts, every window alike (no relevance is known:
        the block shows them from the start)."""
        spans = [(s.start, s.end) for s in asked.time.spans]
        if not spans:
            return []
        with self.db.read() as session:
            found = unsummarised_within(
                session, spans, person=person, current=current, limit=UNSUMMARISED_POOL
            )
        return [
            RecalledEpisode(
                episode_id=0,
                audit_log_id=c.tip_audit_id,
                summary=UNSUMMARISED_LINE,
                created_at=c.last_turn_at,
                cosine=0.0,
                age_days=(now - c.last_turn_at).total_seconds() / SECONDS_PER_DAY,
                freshness=1.0,
                recall_count=0,
                recall_weight=1.0,
                score=0.0,
                # placeholders: with_unsummarised (memory/context/build.py) weighs them
                windows=(0.0,) * len(window_spans(len(window_turns(c.turns)))),
                dated=True,
                pending=True,
            )
            for c in found
        ]

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
        person: int,
    ) -> list[RecalledEpisode]:
        """`person`'s episodes nearest the query: nobody else's is searched."""
        if params.fusion != "dense" and query_text:
            asked = asked or self.read(query_text, now)
            with self.db.read() as session:
                fused = hybrid_search(
                    session,
                    self.backend,
                    query_text,
                    query_vector,
                    now,
                    params,
                    asked,
                    person=person,
                )
            return [RecalledEpisode(**vars(hit)) for hit in fused]  # (asdict deep-copies)
        query_vector = vector_of(query_vector)
        backend = self.backend
        now_s = epoch_seconds(now)
        min_created = None
        if params.max_age_days is not None:
            min_created = now_s - params.max_age_days * SECONDS_PER_DAY
        rank = episode_rank(now_s, params.halflife_days, params.recall_weight_scale)

        # Rows swept since they were loaded are found missing and forgotten; searching again
        # lets the rows behind them take their slots (rarely more than one retry).
        for _attempt in range(3):
            with self.db.read() as session:
                backend.refresh(session, person=person)
                hits = backend.search(
                    session,
                    query_vector,
                    person=person,
                    limit=params.top_k * OVERFETCH,
                    threshold=params.similarity_threshold,
                    min_created=min_created,
                    rank=rank,
                    # freshness ≤ 1 and recall_weight ≤ its value at the largest count: what
                    # lets the IVF stage stop early without changing the result.
                    factor_range=(
                        0.0,
                        recall_weight(backend.max_recall_count, params.recall_weight_scale),
                    ),
                )
                if hits.ids.size == 0:
                    return []
                ids = [int(i) for i in hits.ids]
                rows = session.execute(_CANDIDATE_ROWS, {"ids": ids}).all()
            found = {r.id for r in rows}
            gone = [i for i in ids if i not in found]
            if not gone:
                break
            backend.forget(gone)
        cosines = {int(i): float(c) for i, c in zip(hits.ids, hits.cosine, strict=True)}
        return rank_episodes([tuple(r) for r in rows], cosines, now, params)  # type: ignore[misc]

    def preview(
        self,
        query: str,
        now: datetime | None = None,
        *,
        person: int,
        vector: np.ndarray | Future[np.ndarray] | None = None,
        **overrides: object,
    ) -> list[RecalledEpisode]:
        """What auto-recall would surface for `person`, without bumping anything. `vector`: the
        query's, if the caller has it under way (else it is embedded here)."""
        params = RecallParams.from_settings(self.settings, **overrides)
        vector = self.embed_query_soon(query) if vector is None else vector
        return self.search(vector, now or utcnow(), params, query_text=query, person=person)

    def record_recalls(
        self,
        session: Session,
        episodes: list[RecalledEpisode],
        *,
        now: datetime,
        context: dict[str, object],
        person: int,
    ) -> None:
        """Bump counters and append one `memory.episode.recalled` row per surfaced episode
        (`person`'s, as the episodes are)."""
        if not episodes:
            return
        index = self._indexes.loaded(person)
        # One statement for all of them, and one for their audit rows: this runs inside every
        # chat turn's write transaction. The core table, not the ORM entity: an ORM UPDATE
        # pays for session synchronisation this session has nothing to synchronise.
        table = EpisodeSummary.__table__
        ids = sorted(e.episode_id for e in episodes if not e.pending)
        if ids and session.get_bind().dialect.name != "sqlite":
            # Row locks in id order, as every writer of several episodes takes them (the
            # memory.passages worker, reembed): an UPDATE … IN locks in scan order, and with
            # the passages worker holding one of these rows that deadlocked — and PostgreSQL
            # aborted the chat turn. SQLite has one writer at a time: nothing to order.
            session.execute(
                select(table.c.id).where(table.c.id.in_(ids)).order_by(table.c.id).with_for_update()
            )
        if ids:
            session.execute(
                update(table)  # type: ignore[arg-type]  # a Table, typed as its FromClause base
                .where(table.c.id.in_(ids))
                .values(recall_count=table.c.recall_count + 1, last_recalled_at=now)
            )
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
        self.audit.append_many(session, rows, person=person)
