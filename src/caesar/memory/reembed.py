"""`caesar episodes reembed`: bring stored episodes up to the current embedder.

Two kinds of episode are stale: those embedded by another model (after `embedder` settings
changed — recall only compares vectors of the current model, so they are never recalled) and
those without conversation windows (summarised before migration 0004, or by a worker that
failed to embed them). Each is re-embedded from its stored summary and its source chat — the
summary itself is kept, no LLM is called — in batches, one write transaction per batch, so an
interrupted run loses nothing and the next run continues with what is left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from caesar.db.engine import Database
from caesar.db.models import AuditLog, EpisodeSummary
from caesar.embeddings import Embedder
from caesar.memory.summarise import Outcome, embed_summaries_and_passages
from caesar.memory.vector_math import to_f32_bytes


@dataclass
class ReembedReport:
    stale: int = 0  # found at the start
    done: int = 0  # re-embedded (an episode whose summary changed meanwhile is left as it is)
    model_changed: int = 0  # of `done`: were embedded by another model


def stale_episode_ids(session: Session, model_id: str) -> list[int]:
    """Episodes with a summary that are of another model or have no windows."""
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
    *,
    batch_size: int = 64,
    progress: Callable[[int, int], None] | None = None,
) -> ReembedReport:
    """Re-embed every stale episode; `progress(handled, total)` after each batch."""
    model_id = embedder.model_id
    with db.read() as session:
        ids = stale_episode_ids(session, model_id)
    report = ReembedReport(stale=len(ids))
    for start in range(0, len(ids), batch_size):
        with db.read() as session:
            rows = session.execute(
                select(EpisodeSummary.id, EpisodeSummary.summary, EpisodeSummary.model, AuditLog)
                .join(AuditLog, AuditLog.id == EpisodeSummary.audit_log_id)
                .where(EpisodeSummary.id.in_(ids[start : start + batch_size]))
            ).all()
            session.expunge_all()
        outcomes = [Outcome(row.AuditLog, summary=row.summary) for row in rows]
        embed_summaries_and_passages(embedder, outcomes)
        with db.write() as session:
            for row, outcome in zip(rows, outcomes, strict=True):
                assert outcome.vector is not None  # every outcome here has a summary
                result = session.execute(
                    update(EpisodeSummary)
                    .where(EpisodeSummary.id == row.id, EpisodeSummary.summary == row.summary)
                    .values(
                        embedding=[float(x) for x in outcome.vector],
                        embedding_f32=to_f32_bytes(outcome.vector),
                        passage_vectors=outcome.passages,
                        model=model_id,
                    )
                )
                if result.rowcount:  # type: ignore[attr-defined]  # 0: edited meanwhile, kept
                    report.done += 1
                    report.model_changed += row.model != model_id
        if progress is not None:
            progress(min(start + batch_size, len(ids)), report.stale)
    return report
