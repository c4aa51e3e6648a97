"""Worker `memory.upgrade`: old rows brought up to date in the background, once (issue #16).

Episodes and semantic chunks written by the ADR's schema, or by a caesar before the float32
copy, hold their embedding as JSON only. The in-process vector index can load them (it decodes
the JSON), but it does so on every start, and JSON decoding is the slow part of loading 100k
rows. This worker writes the float32 copy of each such row from its JSON, a batch per step,
with a log line saying how far it got; the row's vector is unchanged, so nothing is re-ranked
and no model runs. Episodes without windows are the `memory.passages` worker's queue (its
own), and the keyword indexes are filled by their migrations (0002, 0005) before `caesar
serve` starts. Run by `caesar serve`'s worker process (niced, worker_process.py), so a turn is
not slowed meanwhile.

Idempotent: a row gets its copy once (`WHERE embedding_f32 IS NULL`); the in-memory position
only saves rescanning rows already done.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import func, select, update

from caesar.db.models import EpisodeSummary, SemanticChunk
from caesar.memory.engine.vectors import to_f32_bytes
from caesar.workers import Worker

if TYPE_CHECKING:
    from caesar.container import Container

log = logging.getLogger(__name__)

BATCH = 500
MODELS = (EpisodeSummary, SemanticChunk)


def _waiting(model: Any) -> list[Any]:
    """Rows still without their copy (a trivial episode has no vector to copy)."""
    where = [model.embedding_f32.is_(None)]
    if model is EpisodeSummary:
        where.append(model.summary != "")
    return where


class UpgradeWorker(Worker):
    name = "memory.upgrade"

    def __init__(self, services: Container) -> None:
        self.services = services
        self.db = services.db
        self._after: dict[str, int] = {m.__tablename__: 0 for m in MODELS}
        self.done = 0

    @property
    def enabled(self) -> bool:
        return bool(self.services.settings.semantic.enabled)

    @property
    def interval_seconds(self) -> float:
        return 300.0  # old rows only appear with an upgrade: looking rarely is enough

    def backlog(self) -> int:
        with self.db.read() as session:
            return sum(
                int(session.scalar(select(func.count()).select_from(m).where(*_waiting(m))) or 0)
                for m in MODELS
            )

    def step(self) -> int:
        for model in MODELS:
            handled = self._batch(model)
            if handled:
                return handled
        return 0

    def _batch(self, model: Any) -> int:
        table = model.__tablename__
        with self.db.read() as session:
            rows = session.execute(
                select(model.id, model.embedding)
                .where(model.id > self._after[table], *_waiting(model))
                .order_by(model.id)
                .limit(BATCH)
            ).all()
        if not rows:
            return 0
        copies = [
            (int(i), to_f32_bytes(np.asarray(vector, np.float32)))
            for i, vector in rows
            if vector  # an empty JSON list (a trivial episode) has nothing to copy
        ]
        with self.db.write() as session:
            for row_id, blob in copies:
                session.execute(
                    update(model)
                    .where(model.id == row_id, model.embedding_f32.is_(None))
                    .values(embedding_f32=blob)
                )
        self._after[table] = int(rows[-1][0])
        self.done += len(copies)
        log.info("%s: %d rows of %s given their float32 copy so far", self.name, self.done, table)
        return len(rows)
