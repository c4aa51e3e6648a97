"""Embedding episodes after the summary: conversation windows, and re-embedding.

Worker `memory.passages` embeds the 3-turn windows (memory/passages.py) of every summarised
chat that has none yet, and each of its turns alone (`turn_vectors`: they pick the excerpts
shown). It is its own worker, not a step of `memory.summarise`, because the costs differ by
~50×: 14 ms per chat for the summary against ~690 ms for a LongMemEval-size chat's windows —
up to 32 of up to 256 tokens (docs/performance.md); its turns cost more again (~630 ms). Its
queue is the episodes themselves — `turn_vectors IS NULL`, under a partial index — so it needs
no cursor: a crash or an embedder outage leaves the rows NULL and the next step takes them
again, and a write is conditional on the row still lacking them, so two workers never write
twice. An episode whose chat has no text gets empty values: done, with no windows. An episode
from before migration 0018 has its windows already: its turns alone are embedded.

`caesar episodes reembed` brings older episodes up to date: those embedded by another model
(after `embedder` settings changed — recall only compares vectors of the current model, so
they are never recalled) and those without windows. Each is re-embedded from its stored
summary and its source chat — no LLM call — in batches, one write transaction per batch, so
an interrupted run loses nothing and the next run continues with what is left.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from caesar.db.engine import Database
from caesar.db.models import AuditLog, EpisodeSummary
from caesar.embeddings import Embedder, cut_short, normalise
from caesar.memory import passages
from caesar.memory.engine import window_keywords
from caesar.memory.engine.backend import FullTextSearch
from caesar.memory.episodes.rows import embedding_values
from caesar.memory.transcript import conversation_turns
from caesar.workers import SPREAD, Worker, spread, usable_cores

if TYPE_CHECKING:
    from caesar.container import Container


@dataclass(frozen=True)
class EmbeddedWindows:
    texts: list[str]  # passages.windows of the chat
    vectors: bytes | None  # packed (passages.pack); b"" for a chat without text; None: not embedded
    turns: bytes  # the turns' vectors (passages.turn_texts), packed; b"" for a chat without text


def embed_windows(
    embedder: Embedder, payloads: Sequence[dict[str, Any]], windows: Sequence[bool] | None = None
) -> list[EmbeddedWindows]:
    """Each chat payload's windows and turns, their vectors packed, embedded in one batch call;
    `windows[i]` False: the i-th chat's turns alone (its windows are stored already).

    A window longer than the model reads (`cut_short`: three long turns, past MiniLM's 256
    tokens) is not embedded: its vector would be of its first turn or two alone. It is the
    mean of its turns' vectors instead, which speaks for every turn in it, at no cost."""
    chats = [conversation_turns(p) for p in payloads]
    wanted = windows if windows is not None else [True] * len(chats)
    texts = [passages.windows(c) if w else [] for c, w in zip(chats, wanted, strict=True)]
    turns = [passages.turn_texts(c) for c in chats]
    long = cut_short(embedder, [t for ws in texts for t in ws])
    flat = [t for ts in turns for t in ts]
    flat += [t for t, cut in zip((t for ws in texts for t in ws), long, strict=True) if not cut]
    vectors = embedder.embed_batch(flat) if flat else np.zeros((0, 0), dtype=np.float32)
    turn_at = 0  # where this chat's turns are in `vectors`
    window_at = sum(len(ts) for ts in turns)  # where its next embedded window is
    cut_at = 0  # where its windows are in `long`
    out = []
    for ws, ts, w in zip(texts, turns, wanted, strict=True):
        own_turns = vectors[turn_at : turn_at + len(ts)]
        rows = []
        spans = passages.window_spans(len(ts)) if ws else []
        for (a, b), cut in zip(spans, long[cut_at : cut_at + len(ws)], strict=True):
            if cut:
                rows.append(normalise(own_turns[a:b].mean(axis=0, keepdims=True))[0])
            else:
                rows.append(vectors[window_at])
                window_at += 1
        out.append(
            EmbeddedWindows(
                ws,
                (passages.pack(np.array(rows)) if ws else b"") if w else None,
                passages.pack(own_turns) if ts else b"",
            )
        )
        turn_at += len(ts)
        cut_at += len(ws)
    return out


def store_windows(
    words: FullTextSearch,
    session: Session,
    episode_id: int,
    embedded: EmbeddedWindows,
    conditions: Sequence[Any] = (),
    **values: Any,
) -> bool:
    """Write an episode's window and turn vectors (and `values`) if its row still meets
    `conditions`, and index the windows' words (memory/engine/window_keywords.py) in the same
    transaction; its turn vectors alone if its windows were not embedded (stored already).
    Whether the row was written."""
    written = {"turn_vectors": embedded.turns, **values}
    if embedded.vectors is not None:
        written["passage_vectors"] = embedded.vectors
    result = session.execute(
        update(EpisodeSummary).where(EpisodeSummary.id == episode_id, *conditions).values(**written)
    )
    if not result.rowcount:  # type: ignore[attr-defined]
        return False
    if embedded.vectors is not None:
        window_keywords.index_windows(words, session, episode_id, embedded.texts)
    return True


# -- worker memory.passages ---------------------------------------------------------------------
class PassagesWorker(Worker):
    """Runs on `threads` threads: each takes a batch none of the others holds (`_held`), so
    the threads of one process never embed the same episode; other processes are kept apart
    by `spread` and the conditional write."""

    name = "memory.passages"

    def __init__(self, services: Container) -> None:
        self.services = services
        self.db: Database = services.db
        self._lock = threading.Lock()
        self._held: set[int] = set()

    @property
    def threads(self) -> int:
        return int(self.settings.passages_threads or usable_cores())

    @property
    def settings(self) -> Any:
        return self.services.settings.memory.episodes_summarise

    @property
    def enabled(self) -> bool:
        return bool(self.settings.enabled and self.settings.passages)

    @property
    def interval_seconds(self) -> float:
        return float(self.settings.interval_seconds)

    def backlog(self) -> int:
        e = EpisodeSummary
        model_id = self.services.embedder.get().model_id
        with self.db.read() as session:
            return int(
                session.scalar(
                    select(func.count())
                    .select_from(e)
                    .where(e.turn_vectors.is_(None), e.summary != "", e.model == model_id)
                )
                or 0
            )

    def _take(self, model_id: str, limit: int) -> list[int]:
        """A batch of episodes waiting for their vectors that no other thread holds, held for
        this one until it lets them go."""
        e = EpisodeSummary
        with self._lock, self.db.read() as session:
            head = session.scalars(
                select(e.id)
                .where(e.turn_vectors.is_(None), e.summary != "", e.model == model_id)
                .where(e.id.not_in(sorted(self._held)))
                .order_by(e.id)
                .limit(limit * SPREAD)
            ).all()
            chosen = spread(head, limit)
            self._held.update(chosen)
        return chosen

    def step(self) -> int:
        embedder = self.services.embedder.get()
        chosen = self._take(embedder.model_id, int(self.settings.passages_batch_size))
        if not chosen:
            return 0
        try:
            e = EpisodeSummary
            query = (
                select(e.id, e.passage_vectors.is_(None).label("no_windows"), AuditLog.payload)
                .join(AuditLog, AuditLog.id == e.audit_log_id)
                .where(e.id.in_(chosen))
                .order_by(e.id)
            )
            with self.db.read() as session:
                rows = list(session.execute(query).all())
            return self._embed(embedder, rows)
        finally:
            with self._lock:
                self._held.difference_update(chosen)

    def _embed(self, embedder: Embedder, rows: Sequence[Any]) -> int:
        if not rows:
            return 0
        embedded = embed_windows(
            embedder, [r.payload for r in rows], [bool(r.no_windows) for r in rows]
        )
        e = EpisodeSummary
        with self.db.write() as session:
            for row, windows in zip(rows, embedded, strict=True):
                still = [e.turn_vectors.is_(None), e.model == embedder.model_id]
                if windows.vectors is not None:
                    still.append(e.passage_vectors.is_(None))
                store_windows(self.services.episodes.backend, session, row.id, windows, still)
        return len(rows)


# -- caesar episodes reembed --------------------------------------------------------------------
@dataclass
class ReembedReport:
    stale: int = 0  # found at the start
    done: int = 0  # re-embedded (an episode whose summary changed meanwhile is left as it is)
    model_changed: int = 0  # of `done`: were embedded by another model


def stale_episode_ids(session: Session, model_id: str) -> list[int]:
    """Episodes with a summary that are of another model or have no windows. (One with windows
    and no turn vectors is the `memory.passages` worker's: it embeds the turns alone.)"""
    e = EpisodeSummary
    query = (
        select(e.id)
        .where(e.summary != "")
        .where(or_(e.model != model_id, e.passage_vectors.is_(None)))
        .order_by(e.id)
    )
    return list(session.scalars(query))


def reembed(
    db: Database,
    embedder: Embedder,
    words: FullTextSearch,
    *,
    batch_size: int = 64,
    progress: Callable[[int, int], None] | None = None,
) -> ReembedReport:
    """Re-embed every stale episode, its windows' words indexed by `words` (the engine's
    full text); `progress(handled, total)` after each batch."""
    model_id = embedder.model_id
    with db.read() as session:
        ids = stale_episode_ids(session, model_id)
    report = ReembedReport(stale=len(ids))
    for start in range(0, len(ids), batch_size):
        with db.read() as session:
            rows = session.execute(
                select(
                    EpisodeSummary.id,
                    EpisodeSummary.summary,
                    EpisodeSummary.model,
                    AuditLog.payload,
                )
                .join(AuditLog, AuditLog.id == EpisodeSummary.audit_log_id)
                .where(EpisodeSummary.id.in_(ids[start : start + batch_size]))
                .order_by(EpisodeSummary.id)  # rows are locked in id order (record_recalls)
            ).all()
        if rows:  # none: all deleted meanwhile (retention)
            vectors = embedder.embed_batch([r.summary for r in rows])
            embedded = embed_windows(embedder, [r.payload for r in rows])
            with db.write() as session:
                for row, vector, windows in zip(rows, vectors, embedded, strict=True):
                    if store_windows(  # not written: edited meanwhile, kept as it is
                        words,
                        session,
                        row.id,
                        windows,
                        (EpisodeSummary.summary == row.summary,),
                        **embedding_values(vector),
                        model=model_id,
                    ):
                        report.done += 1
                        report.model_changed += row.model != model_id
        if progress is not None:
            progress(min(start + batch_size, len(ids)), report.stale)
    return report
