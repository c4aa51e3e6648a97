"""Keyword relevance of a conversation's best window (memory/engine/window_keywords.py): indexed once
by whoever writes the window vectors, scored for recall's candidates, fused with the
episode-level keyword relevance — on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from conftest import OWNER
from sqlalchemy import select, text, update
from test_passages import NOW

from caesar.clock import utcnow
from caesar.db import Database, migrate
from caesar.db.models import AuditLog, EpisodeSummary
from caesar.memory import conversations, passages
from caesar.memory.engine import window_keywords
from caesar.memory.engine.person_tables import PersonTables
from caesar.memory.episodes import reembed
from caesar.memory.episodes.rows import episode_row
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up
from tests.memory_helpers import engine_scope

FILLER = [
    "How was your week?",
    "Busy, lots of meetings at work.",
    "Did you sleep better?",
    "A little, the new pillow helps.",
    "Any plans for dinner?",
    "Probably pasta again.",
]
# "kayak" and "lake" once each, nine turns apart: no window holds both.
SPREAD = ["I bought a kayak.", "It is red.", *FILLER, "The lake froze.", "Ice is thin."]
# Each once, in one turn: the same window holds both.
TOGETHER = [*FILLER[:4], "We took the kayak out on the lake.", *FILLER[4:], "Sounds fun.", "Yes."]


def _chat(svc, turns: list[str], days_ago: float) -> int:
    roles = (["user", "assistant"] * len(turns))[: len(turns) - 1]
    with svc.db.write() as session:
        return conversations.add_finished(
            engine_scope(session, OWNER),
            svc.audit,
            {
                "messages": [
                    {"role": r, "content": c} for r, c in zip(roles, turns[:-1], strict=True)
                ],
                "reply": turns[-1],
            },
            NOW - timedelta(days=days_ago),
        )


def _episode_of(svc, chat_id: int) -> int:
    with svc.db.read() as session:
        return session.scalar(
            select(EpisodeSummary.id).where(EpisodeSummary.audit_log_id == chat_id)
        )


def _window_rows(db: Database, episode_id: int) -> int:
    with db.read() as session:
        if db.engine.dialect.name == "sqlite":
            span = window_keywords.rowids(episode_id)
            table = PersonTables(OWNER).windows  # every episode here is the owner's
            sql = f"SELECT count(*) FROM {table} WHERE rowid BETWEEN {span[0]} AND {span[-1]}"
        else:
            sql = f"SELECT count(*) FROM episode_window_fts WHERE episode_id = {episode_id}"
        return int(session.execute(text(sql)).scalar() or 0)


def _services(make_services, llm, db_url, *chats: list[str], **overrides):
    svc = make_services(
        database_url=db_url, memory={"episodes_summarise": {"enabled": True}}, **overrides
    )
    ids = [_chat(svc, turns, days_ago=3 + i) for i, turns in enumerate(chats)]
    llm.replies.extend(["The operator chatted about the week."] * len(chats))
    run_until_caught_up(svc.workers["memory.summarise"])
    run_until_caught_up(svc.workers["memory.passages"])
    return svc, [_episode_of(svc, i) for i in ids]


def test_windows_are_indexed_once_with_their_vectors(make_services, llm, db_url):
    svc, [spread] = _services(make_services, llm, db_url, SPREAD)
    expected = len(passages.windows([{"role": "user", "content": t} for t in SPREAD]))
    assert expected == len(SPREAD) - 2
    assert _window_rows(svc.db, spread) == expected
    with svc.db.write() as session:  # a second writer (or a re-embed) adds nothing
        assert (
            window_keywords.index_windows(svc.episodes.backend, session, spread, ["kayak lake"])
            == 0
        )
    # re-embedding the episode (its windows dropped, as for a model change) writes them again
    # without doubling the keyword rows
    with svc.db.write() as session:
        session.execute(
            update(EpisodeSummary).where(EpisodeSummary.id == spread).values(passage_vectors=None)
        )
    report = reembed.reembed(svc.db, svc.embedder.get(), svc.episodes.backend)
    assert report.done == 1
    assert _window_rows(svc.db, spread) == expected
    with svc.db.read() as session:
        scores = window_keywords.window_scores(
            engine_scope(session, OWNER), ["kayak"], [spread, spread + 1]
        )
    assert set(scores) == {spread} and scores[spread] > 0


def test_the_window_where_the_words_meet_outranks_words_spread_over_a_chat(
    make_services, llm, db_url
):
    """Two chats with the same words as often, and as long: episode-level BM25 barely tells
    them apart; the window level prefers the one where "kayak" and "lake" are in one exchange —
    and recall's keyword relevance, their mean, follows the window."""
    svc, [spread, together] = _services(make_services, llm, db_url, SPREAD, TOGETHER)
    hits = svc.episodes.preview(
        "kayak on the lake?", NOW, similarity_threshold=None, scope=Scope(OWNER)
    )
    by_id = {h.episode_id: h for h in hits}
    assert set(by_id) == {spread, together}
    # the episode-level share, recovered from the mean
    episode_level = {i: 2 * h.keyword - (h.window_keyword or 0.0) for i, h in by_id.items()}
    assert episode_level[spread] == pytest.approx(episode_level[together], abs=0.1)
    assert by_id[together].window_keyword == pytest.approx(1.0)  # every query word, best window
    assert 0 < by_id[spread].window_keyword < by_id[together].window_keyword
    assert by_id[together].keyword > by_id[spread].keyword
    assert by_id[together].as_json()["window_keyword"] == pytest.approx(1.0)
    # the dense (ADR) ranking has no keyword side at all
    dense = svc.episodes.preview(
        "kayak on the lake?", NOW, similarity_threshold=None, fusion="dense", scope=Scope(OWNER)
    )
    assert all(h.window_keyword is None and h.keyword == 0.0 for h in dense)


def test_an_episode_without_windows_keeps_its_episode_level_keyword(make_services, llm, db_url):
    svc, [spread] = _services(make_services, llm, db_url, SPREAD)
    svc_off = make_services(
        database_url=db_url,
        memory={"episodes_summarise": {"enabled": True, "passages": False}},
    )
    chat = _chat(svc_off, TOGETHER, days_ago=1)
    llm.replies.append("The operator chatted about the week.")
    run_until_caught_up(svc_off.workers["memory.summarise"])
    together = _episode_of(svc_off, chat)
    hits = {
        h.episode_id: h
        for h in svc.episodes.preview(
            "kayak on the lake?", NOW, similarity_threshold=None, scope=Scope(OWNER)
        )
    }
    assert hits[together].window_keyword is None and hits[together].passage is None
    assert hits[together].keyword > 0  # not halved for lacking windows
    assert hits[spread].window_keyword is not None


def test_retention_removes_a_swept_chats_window_words(make_services, llm, db_url):
    """A swept chat leaves nothing of its text behind: on PostgreSQL the window rows cascade;
    SQLite's contentless index gets its rows deleted from the chat's own windows — and stays
    consistent for the episodes that remain."""
    svc, [spread, together] = _services(
        make_services, llm, db_url, SPREAD, TOGETHER, retention={"ttl_days": 90}
    )
    # NOW is months back, so both chats are past the 90-day TTL: SPREAD's is made recent
    with svc.db.write() as session:
        chat = select(EpisodeSummary.audit_log_id).where(EpisodeSummary.id == spread)
        session.execute(
            update(AuditLog)
            .where(AuditLog.id == chat.scalar_subquery())
            .values(created_at=utcnow())
        )
    assert svc.workers["retention.sweep"].step() == 1
    assert _window_rows(svc.db, together) == 0
    assert _window_rows(svc.db, spread) == len(SPREAD) - 2
    if svc.db.engine.dialect.name == "sqlite":
        with svc.db.write() as session:  # FTS5 checks its index against the docsize table
            table = PersonTables(OWNER).windows
            session.execute(text(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')"))
    hits = svc.episodes.preview(
        "kayak on the lake?", NOW, similarity_threshold=None, scope=Scope(OWNER)
    )
    assert [h.episode_id for h in hits] == [spread]
    assert hits[0].window_keyword == pytest.approx(1.0)  # the best window left is its own


def test_the_migration_indexes_episodes_that_already_have_windows(db_url, shared_embedder):
    db = Database(db_url)
    migrate.upgrade(db, "0004")
    turns = [{"role": "user", "content": t} for t in TOGETHER]
    windows = passages.windows(turns)
    vector = shared_embedder.embed_batch(["The operator chatted about the week."])[0]
    with db.write() as session:
        for audit_id, blob in ((1, passages.pack(shared_embedder.embed_batch(windows))), (2, None)):
            # the tables as revision 0004 has them: no later column
            session.execute(
                sa.insert(AuditLog.__table__).values(
                    id=audit_id,
                    event_type="chat.completed",
                    payload={"messages": turns[:-1], "reply": TOGETHER[-1]},
                    created_at=NOW,
                )
            )
            row = episode_row(
                audit_log_id=audit_id,
                summary="The operator chatted about the week.",
                vector=vector,
                model=shared_embedder.model_id,
                created_at=NOW,
                passages=blob,
                scope=Scope(OWNER),
            )
            row.id = audit_id
            table = EpisodeSummary.__table__
            later = ("conversation_id", "person_id", "turn_vectors")
            old = {c.name: getattr(row, c.key) for c in table.columns if c.name not in later}
            session.execute(sa.insert(table).values(old))
    migrate.upgrade(db)
    assert _window_rows(db, 1) == len(windows)
    assert _window_rows(db, 2) == 0  # no window vectors yet: the passages worker will do both
    migrate.downgrade(db, "0004")
    migrate.upgrade(db)
    assert _window_rows(db, 1) == len(windows)
    db.dispose()


def test_the_keyword_side_is_the_mean_where_windows_are_indexed():
    assert window_keywords.fused_keyword(0.4, None) == 0.4
    assert window_keywords.fused_keyword(0.4, 0.8) == pytest.approx(0.6)
    assert window_keywords.fused_keyword(0.0, 0.0) == 0.0
