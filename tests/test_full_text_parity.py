"""The two engines' full text score alike (issue #24: PostgreSQL's dev figures within 0.005 of
SQLite's): the same episodes and windows, indexed by each engine's backend, give the same
matches and the same BM25 — FTS5's `bm25()` on SQLite, migration 0015's words and
`postgres._bm25` / `window_bm25` on PostgreSQL. One person, every candidate asked: there
the statistics each engine counts (FTS5 the table's, PostgreSQL the person's and the
candidates') are the same rows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from caesar.db import Database, migrate
from caesar.db.models import EpisodeSummary
from caesar.memory import passages
from caesar.memory.engine.backend import FullTextSearch, backend_for
from caesar.memory.engine.vectors import CurrentModelIndex
from caesar.memory.recall.keywords import query_terms
from caesar.memory.scope import Scope
from caesar.memory.transcript import conversation_turns

WHEN = datetime(2026, 12, 1, 12, 0)
CHATS = [
    (
        "museum day",
        [
            "We went to the natural-history museum on Sunday, the dinosaur hall again.",
            "Did the kids like it?",
            "They loved it. Maya wants to be a palaeontologist now, she's 7.",
            "That's lovely! Museums are great for curious kids.",
        ],
    ),
    (
        "café and running",
        [
            "I ran 10k before breakfast, then coffee at the café near the station.",
            "How did the run feel?",
            "Legs were heavy; I don't think I slept enough. Running at 6am is hard.",
            "Sleep matters for recovery; try an earlier night before long runs.",
        ],
    ),
    (
        "garden",
        [
            "The tomatoes are finally ripening, and the basil is everywhere.",
            "Any trouble with pests?",
            "Slugs ate the lettuce. Other than that the garden's fine.",
            "Beer traps work well against slugs, or copper tape around the beds.",
            "I'll try the copper tape because beer seems wasteful.",
            "Good choice; copper tape lasts all season.",
        ],
    ),
    (
        "museum plans",
        [
            "Is the science museum open on Mondays?",
            "Most museums close on Mondays; check their site first.",
            "Then Tuesday it is, with Maya and her friend.",
        ],
    ),
]
QUESTIONS = [
    "What did Maya want to be after the museum?",
    "How far did I run before breakfast at the cafe?",
    "What works against slugs in the garden?",
    "Which museums are open on Mondays?",
    "Why was running at 6am hard?",
]


def _payload(turns: list[str]) -> dict[str, object]:
    roles = ["user", "assistant"] * len(turns)
    *asked, reply = turns
    return {
        "messages": [{"role": r, "content": t} for r, t in zip(roles, asked, strict=False)],
        "reply": reply,
    }


@pytest.fixture
def engines(tmp_path: Path, pg_url: str) -> Iterator[tuple[Database, Database]]:
    """The same history on SQLite and on PostgreSQL, windows indexed by each backend."""
    dbs = (Database(f"sqlite:///{tmp_path / 'caesar.db'}"), Database(pg_url))
    for db in dbs:
        migrate.upgrade(db)
        with db.engine.begin() as c:
            owner = int(c.scalar(sa.text("SELECT id FROM people WHERE is_owner")))
            for n, (summary, turns) in enumerate(CHATS, start=1):
                c.execute(
                    sa.text(
                        "INSERT INTO audit_log (id, event_type, created_at, payload, subject_id, "
                        "person_id) VALUES (:n, 'chat.completed', :t, :p, :n, :who)"
                    ),
                    {"n": n, "t": WHEN, "p": json.dumps(_payload(turns)), "who": owner},
                )
                c.execute(
                    sa.text(
                        "INSERT INTO episode_summaries (id, audit_log_id, summary, embedding, "
                        "model, created_at, person_id) "
                        "VALUES (:n, :n, :s, '[0.6, 0.8]', 'm', :t, :who)"
                    ),
                    {"n": n, "s": summary, "t": WHEN, "who": owner},
                )
        with db.write() as session:
            for n, (_summary, turns) in enumerate(CHATS, start=1):
                windows = passages.windows(conversation_turns(_payload(turns)))
                _words(db).add_windows(session, n, windows)
    yield dbs
    for db in dbs:
        db.dispose()


def _words(db: Database) -> FullTextSearch:
    """The full-text half of the engine's backend, as recall is handed it."""
    indexes = CurrentModelIndex(EpisodeSummary, lambda: "m")
    return backend_for(db, indexes, "in_process")


def _scores(db: Database, question: str) -> tuple[dict[int, float], dict[int, dict[int, float]]]:
    terms = query_terms(question)
    ids = list(range(1, len(CHATS) + 1))
    with db.read() as session:
        owner = int(session.scalar(sa.text("SELECT id FROM people WHERE is_owner")))
        text = _words(db)
        episodes = text.keyword_scores(Scope(owner, session), terms, limit=10)
        windows = text.window_scores(Scope(owner, session), terms, ids)
    return episodes, windows


@pytest.mark.parametrize("question", QUESTIONS)
def test_both_engines_give_the_same_bm25_to_episodes_and_windows(engines, question):
    sqlite, postgres = (_scores(db, question) for db in engines)
    (lite_episodes, lite_windows), (pg_episodes, pg_windows) = sqlite, postgres
    assert lite_episodes and lite_windows, "a question with no match proves nothing"
    assert set(pg_episodes) == set(lite_episodes)
    for n, score in lite_episodes.items():
        assert pg_episodes[n] == pytest.approx(score, rel=1e-4), (n, pg_episodes, lite_episodes)
    assert {n: set(w) for n, w in pg_windows.items()} == {
        n: set(w) for n, w in lite_windows.items()
    }
    for n, windows in lite_windows.items():
        for k, score in windows.items():
            assert pg_windows[n][k] == pytest.approx(score, rel=1e-4), (n, k)
