"""`caesar episodes reembed` (memory/episodes/reembed.py): episodes of another model or without
conversation windows are re-embedded from their summary and chat; nothing else changes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import OWNER
from memory_helpers import add_chat, days_ago
from sqlalchemy import select, update

from caesar.db.models import EpisodeSummary
from caesar.memory import passages
from caesar.memory.engine.vectors import from_row
from caesar.memory.episodes.reembed import reembed, stale_episode_ids
from caesar.memory.episodes.rows import episode_row
from caesar.memory.scope import Scope


def _episode(svc, user, reply, summary, *, model, with_passages):
    embedder = svc.embedder.get()
    audit_id = add_chat(svc, user, reply, days_ago(2))
    vector = (
        np.zeros(384, np.float32)
        if model != embedder.model_id
        else embedder.embed_batch([summary])[0]
    )
    window = passages.windows(
        [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
    )
    blob = passages.pack(embedder.embed_batch(window)) if with_passages else None
    with svc.db.write() as session:
        row = episode_row(
            audit_log_id=audit_id,
            summary=summary,
            vector=vector,
            model=model,
            created_at=days_ago(2),
            recall_count=3,
            passages=blob,
            scope=Scope(OWNER),
        )
        session.add(row)
        session.flush()
        return row.id


def _rows(svc):
    with svc.db.read() as session:
        return {r.id: r for r in session.scalars(select(EpisodeSummary))}


def test_reembed_fixes_old_model_and_missing_windows_only(make_services, db_url):
    svc = make_services(database_url=db_url)
    model = svc.embedder.get().model_id
    old = _episode(
        svc,
        "Plan a trip to Lisbon",
        "Try Alfama.",
        "Trip to Lisbon planned.",
        model="old-model",
        with_passages=False,
    )
    bare = _episode(
        svc,
        "My cat is Miso",
        "Cute name!",
        "The operator's cat is Miso.",
        model=model,
        with_passages=False,
    )
    fine = _episode(
        svc,
        "I run on Sundays",
        "Nice habit.",
        "The operator runs on Sundays.",
        model=model,
        with_passages=True,
    )
    with svc.db.read() as session:
        assert stale_episode_ids(session, model) == [old, bare]
    before = _rows(svc)
    seen = []
    report = reembed(
        svc.db,
        svc.embedder.get(),
        svc.episodes.backend,
        batch_size=1,
        progress=lambda d, t: seen.append((d, t)),
    )
    assert (report.stale, report.done, report.model_changed) == (2, 2, 1)
    assert seen == [(1, 2), (2, 2)]
    after = _rows(svc)
    embedder = svc.embedder.get()
    for episode_id in (old, bare):
        row = after[episode_id]
        assert row.model == model
        assert row.summary == before[episode_id].summary and row.recall_count == 3
        expected = embedder.embed_batch([row.summary])[0]
        assert float(from_row(row.embedding_f32, None) @ expected) == pytest.approx(1.0, abs=1e-5)
        assert np.allclose(row.embedding, from_row(row.embedding_f32, None), atol=1e-7)
        assert passages.unpack(row.passage_vectors, 384).shape == (1, 384)
        assert passages.unpack(row.turn_vectors, 384).shape == (2, 384)
    assert after[fine].passage_vectors == before[fine].passage_vectors
    assert after[fine].turn_vectors is None  # the passages worker's: its turns alone
    with svc.db.read() as session:
        assert stale_episode_ids(session, model) == []
    assert (
        reembed(svc.db, embedder, svc.episodes.backend).done == 0
    )  # a second run has nothing left to do


def test_trivial_episodes_are_not_reembedded(services):
    svc = services
    audit_id = add_chat(svc, "what time is it?", "3pm")
    with svc.db.write() as session:
        session.add(
            episode_row(
                audit_log_id=audit_id,
                summary="",
                vector=None,
                model="old-model",
                created_at=days_ago(1),
                scope=Scope(OWNER),
            )
        )
    assert reembed(svc.db, svc.embedder.get(), svc.episodes.backend).stale == 0


def test_a_summary_changed_during_the_run_is_left_alone(services):
    """The write is conditional on the summary read: an edit in between wins."""
    svc = services
    model = svc.embedder.get().model_id
    episode = _episode(
        svc, "Plan a trip", "Sure.", "Trip planned.", model=model, with_passages=False
    )

    class EditingEmbedder:
        model_id = model

        def embed_batch(self, texts):
            with svc.db.write() as session:
                session.execute(update(EpisodeSummary).values(summary="Edited meanwhile."))
            return svc.embedder.get().embed_batch(texts)

    assert reembed(svc.db, EditingEmbedder(), svc.episodes.backend).done == 0
    row = _rows(svc)[episode]
    assert row.summary == "Edited meanwhile." and row.passage_vectors is None
