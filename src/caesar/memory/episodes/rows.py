"""How an episode row is made: its summary, its embedding (the ADR's JSON list and the float32
copy the in-process index loads, always written together) and its windows' vectors. Written by
the summariser (summarise.py), re-embedding (reembed.py) and the importer.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np

from caesar.db.models import EpisodeSummary
from caesar.memory.engine.vector_math import to_f32_bytes
from caesar.memory.scope import Scope


def embedding_values(vector: np.ndarray | None) -> dict[str, object]:
    """An episode's embedding columns: the ADR's JSON list (the record) and its float32 copy
    (what the in-process index loads), always written together — by episode_row and by
    re-embedding (memory/episodes/reembed.py)."""
    vector = np.zeros(0, dtype=np.float32) if vector is None else np.asarray(vector, np.float32)
    return {
        "embedding": [float(x) for x in vector],
        "embedding_f32": to_f32_bytes(vector) if vector.size else None,
    }


def episode_row(
    *,
    audit_log_id: int,
    summary: str,
    vector: np.ndarray | None,
    model: str,
    created_at: datetime,
    recall_count: int = 0,
    passages: bytes | None = None,
    scope: Scope,
) -> EpisodeSummary:
    """The one way an episode row is made (see embedding_values), `person`'s as the chat it
    was written from is; `passages` are the
    conversation's packed window vectors (memory/passages.py), if embedded."""
    person = scope.person
    return EpisodeSummary(
        audit_log_id=audit_log_id,
        summary=summary,
        **embedding_values(vector),
        model=model,
        created_at=created_at,
        recall_count=recall_count,
        passage_vectors=passages,
        person_id=person,
    )
