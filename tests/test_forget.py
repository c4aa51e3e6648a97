"""Forget (issue #13): after a forget, no table, vector index or full-text index holds a trace
of the conversation — its words are in no column of any table (on SQLite not in the file
either) and no query recalls it — on SQLite and on PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from conftest import OWNER
from fastapi.testclient import TestClient
from memory_helpers import events
from sqlalchemy import select
from typer.testing import CliRunner

from caesar import audit
from caesar.api import create_app
from caesar.db.models import AuditLog, Conversation, EpisodeSummary, Fact
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up

SECRET = "zorblaxian"  # in no dictionary: any trace of it is a trace of the conversation
WORKERS = ("memory.extract", "memory.summarise", "memory.passages", "semantic.index")


@pytest.fixture
def learning(make_services, db_url):
    return make_services(
        database_url=db_url,
        gateway={
            "routes": {"memory_extract": "offline:patterns", "memory_summarise": "offline:textrank"}
        },
        memory={"episodes_summarise": {"enabled": True}, "facts_extract": {"enabled": True}},
        semantic={"index_enabled": True},
    )


def _learn(services: Any) -> None:
    for name in WORKERS:
        run_until_caught_up(services.workers[name])


def traces(services: Any, word: str) -> list[str]:
    """Every table.column (FTS shadow tables included) holding `word`, in any form."""
    found = []
    engine = services.db.engine
    needle, raw = word.casefold(), word.casefold().encode()
    with engine.connect() as connection:
        for table in sa.inspect(engine).get_table_names():
            if engine.dialect.name == "postgresql":
                rows = connection.exec_driver_sql(f'SELECT t::text FROM "{table}" AS t').all()
                if any(needle in r[0].casefold() or raw.hex() in r[0] for r in rows):
                    found.append(table)
                continue
            for row in connection.exec_driver_sql(f'SELECT * FROM "{table}"').all():
                for value in row:
                    if isinstance(value, bytes) and raw in value.lower():
                        found.append(table)
                    elif isinstance(value, str) and needle in value.casefold():
                        found.append(table)
    return sorted(set(found))


def file_traces(services: Any, word: str) -> list[str]:
    """SQLite: the database file and its WAL, byte for byte."""
    path = Path(services.db.engine.url.database)
    raw = word.casefold().encode()
    return [
        p.name
        for p in (path, path.with_name(path.name + "-wal"))
        if p.exists() and raw in p.read_bytes().lower()
    ]


def test_a_forgotten_conversation_leaves_no_trace(learning, llm):
    services = learning
    llm.reply = lambda body, protocol: "Noted."
    told = f"My dog's name is {SECRET.title()} and he loves the beach at dawn."
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        forgotten = client.post("/v1/chat", json={"message": told}).json()
        history = [{"role": "user", "content": told}, {"role": "assistant", "content": "Noted."}]
        client.post("/v1/chat", json={"message": "He is a spaniel.", "history": history})
        kept = client.post(
            "/v1/chat", json={"message": "I paddle my red kayak on weekends."}
        ).json()
        _learn(services)
        # A later turn recalls it: its recalled row quotes the conversation's excerpts.
        client.post("/v1/chat", json={"message": "Where does my dog love to go at dawn?"})
        with services.db.read() as session:
            [conversation] = session.scalars(
                select(Conversation).where(Conversation.key == forgotten["conversation_id"])
            )
        recalled = events(services, audit.EPISODE_RECALLED)
        assert any(SECRET in str(r.payload).casefold() for r in recalled)
        assert services.facts.get("dog_name", scope=Scope(OWNER)).value.casefold() == SECRET
        assert "facts" in traces(services, SECRET) and "episode_summaries" in traces(
            services, SECRET
        )
        assert services.episodes.preview(
            f"{SECRET} beach", similarity_threshold=None, scope=Scope(OWNER)
        )

        response = client.delete(f"/v1/conversations/{conversation.id}")
        assert response.status_code == 200, response.text
        again = client.delete(f"/v1/conversations/{conversation.id}")

    result = response.json()
    assert result["conversations"] == 1 and result["chat_rows"] == 2
    assert result["episodes"] == 1 and result["facts"] == 1 and result["derived_audit_rows"] > 0
    assert again.status_code == 404
    assert traces(services, SECRET) == []
    if services.db.is_sqlite:
        assert file_traces(services, SECRET) == []
    # No query brings it back: auto-recall, the preview, the semantic index, the facts.
    hits = services.episodes.preview(
        f"{SECRET} dog beach dawn", similarity_threshold=None, scope=Scope(OWNER)
    )
    assert all(SECRET not in h.summary.casefold() for h in hits)
    assert all(
        SECRET not in c.text.casefold()
        for c in services.semantic.recall(SECRET, 10, scope=Scope(OWNER))
    )
    with services.db.read() as session:
        assert session.scalar(select(Fact).where(Fact.key == "dog_name")) is None
        kept_episode = session.scalars(
            select(EpisodeSummary)
            .join(Conversation, Conversation.id == EpisodeSummary.conversation_id)
            .where(Conversation.key == kept["conversation_id"])
        ).one()
    assert "kayak" in kept_episode.summary.casefold()  # the other conversation is untouched
    [row] = events(services, audit.MEMORY_FORGOTTEN)
    assert row.payload["conversation_ids"] == [conversation.id]
    assert row.payload["request"] == {"by_id": 1, "before": None, "matching": None}


def test_forget_by_filter_dry_run_and_bad_input(learning, llm):
    services = learning
    llm.reply = lambda body, protocol: "Noted."
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        for said in ("I grow tomatoes.", f"My {SECRET} tomatoes are ripe.", "I own a kayak."):
            client.post("/v1/chat", json={"message": said})
        dry = client.post(
            "/v1/conversations/forget", json={"matching": SECRET.upper(), "dry_run": True}
        ).json()
        listed = client.get("/v1/conversations", params={"matching": SECRET}).json()
        nothing = client.post("/v1/conversations/forget", json={})
        unknown = client.post("/v1/conversations/forget", json={"conversation_ids": [999]})
        done = client.post("/v1/conversations/forget", json={"matching": SECRET}).json()
        before = client.post(
            "/v1/conversations/forget", json={"before": "2999-01-01T00:00:00Z", "matching": "kayak"}
        ).json()
        left = client.get("/v1/conversations").json()["conversations"]
    assert dry["conversations"] == 1 and dry["dry_run"] and dry["audit_id"] is None
    assert [c["turns"] for c in listed["conversations"]] == [1]
    assert nothing.status_code == 400 and "say what to forget" in nothing.text
    assert unknown.status_code == 404
    assert done["conversations"] == 1 and before["conversations"] == 1
    assert len(left) == 1
    rows = events(services, audit.MEMORY_FORGOTTEN)
    assert [r.payload["request"]["matching"] for r in rows] == ["a search", "a search"]
    assert SECRET not in str([r.payload for r in rows]).casefold()
    assert traces(services, SECRET) == []


def test_deleting_a_fact_offers_to_forget_its_conversations(learning, llm):
    services = learning
    llm.reply = lambda body, protocol: "Noted."
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        client.post("/v1/chat", json={"message": f"My dog's name is {SECRET.title()}."})
        _learn(services)
        offered = client.delete("/v1/facts/dog_name").json()
        assert offered["learned_from"] and "forgotten" not in offered
        services.facts.set_by_operator("dog_name", "Rex", scope=Scope(OWNER))
        both = client.delete("/v1/facts/dog_name", params={"forget_sources": True}).json()
    # the operator's own value has no conversation behind it; the chat was already offered
    assert both["learned_from"] == offered["learned_from"]
    assert both["forgotten"]["conversations"] == 1
    with services.db.read() as session:
        assert session.scalar(select(sa.func.count()).select_from(Conversation)) == 0
    # the operator's first delete recorded the value; it was learned from the forgotten chat
    assert both["forgotten"]["scrubbed_audit_rows"] == 1
    assert traces(services, SECRET) == []
    [first_delete, second_delete] = events(services, audit.FACT_USER_DELETED)
    assert first_delete.payload["value"] == "[forgotten]"
    assert second_delete.payload["value"] == "Rex"  # the operator's own value stays


def test_the_cli_forgets_by_id_and_asks_first(learning, llm, monkeypatch):
    from caesar.cli.main import app

    services = learning
    llm.reply = lambda body, protocol: "Noted."
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        client.post("/v1/chat", json={"message": f"My {SECRET} plan."})
    with services.db.read() as session:
        [conversation_id] = session.scalars(select(Conversation.id))
        row_ids = list(session.scalars(select(AuditLog.id)))
    monkeypatch.setenv("CAESAR_DATABASE_URL", services.settings.sqlalchemy_url)
    monkeypatch.setenv("CAESAR_HOME", str(services.settings.home))
    runner = CliRunner()
    listed = runner.invoke(app, ["conversations", "list"])
    assert listed.exit_code == 0 and SECRET in listed.stdout
    declined = runner.invoke(app, ["forget", str(conversation_id)], input="n\n")
    assert declined.exit_code == 1 and row_ids
    forgot = runner.invoke(app, ["forget", str(conversation_id), "--yes"])
    assert forgot.exit_code == 0, forgot.stdout
    assert "forgot 1 conversation" in forgot.stdout
    missing = runner.invoke(app, ["forget", "424242", "--yes"])
    assert missing.exit_code != 0 and "no conversation with id 424242" in missing.output


def test_a_forget_waits_for_what_a_worker_is_writing_from_the_chat(learning, monkeypatch):
    # The extract worker has learned a fact from the chat and is in its write transaction
    # (held just after it checked its chats are there) when the operator forgets the
    # conversation. The forget must wait and take the fact with it. Before, on PostgreSQL, the
    # forget read the facts first and the worker then committed, so the fact outlived its chat
    # (its source set to NULL), or the two deadlocked.
    import threading

    from memory_helpers import add_chat

    from caesar import workers
    from caesar.memory.forget import ForgetRequest, forget

    services = learning
    chat = add_chat(services, f"My dog is called {SECRET.title()}.", "Noted.")
    with services.db.read() as session:
        conversation = session.get(AuditLog, chat).subject_id
    checked, release = threading.Event(), threading.Event()
    real_check = workers.rows_still_there

    def check_then_hold(session, rows):
        there = real_check(session, rows)
        checked.set()
        assert release.wait(30)
        return there

    monkeypatch.setattr(workers, "rows_still_there", check_then_hold)
    learned = threading.Thread(target=services.workers["memory.extract"].step)
    learned.start()
    assert checked.wait(30)
    results: list[Any] = []
    forgetting = threading.Thread(
        target=lambda: results.append(
            forget(services, ForgetRequest(conversation_ids=[conversation], person=OWNER))
        )
    )
    forgetting.start()
    forgetting.join(0.5)
    assert forgetting.is_alive()  # the forget waits for the worker's transaction
    release.set()
    learned.join(30)
    forgetting.join(30)
    assert not learned.is_alive() and not forgetting.is_alive()
    [result] = results
    assert result.chat_rows == 1 and result.facts == 1  # the worker's fact, taken with it
    with services.db.read() as session:
        assert session.scalars(select(Fact).where(Fact.key == "dog_name")).all() == []
    assert traces(services, SECRET) == []
    assert events(services, "worker.crashed") == []


def test_a_turn_arriving_while_its_conversation_is_forgotten_starts_a_new_one(learning, llm):
    # The forget (its deletes, by hand) holds the append lock when a turn in the conversation
    # comes to be written: the turn must wait and then find the conversation gone, not join
    # the deleted row (before, it looked the conversation up first and then waited).
    import threading

    from sqlalchemy import delete

    from caesar.brain import Brain

    services = learning
    llm.reply = lambda body, protocol: "Sure."
    Brain(services).turn("Plan a trip to Lisbon with me.", conversation="trip", scope=Scope(OWNER))
    with services.db.read() as session:
        [old] = session.scalars(select(Conversation).where(Conversation.key == "trip"))
    turns: list[int] = []
    with services.db.write() as session:
        audit.serialise_appends(session)  # what a forget takes first
        session.execute(delete(AuditLog).where(AuditLog.subject_id == old.id))
        session.execute(delete(Conversation).where(Conversation.id == old.id))
        arriving = threading.Thread(
            target=lambda: turns.append(
                Brain(services)
                .turn("And a day in Sintra?", conversation="trip", scope=Scope(OWNER))
                .audit_id
            )
        )
        arriving.start()
        arriving.join(1.0)
        assert arriving.is_alive()  # the turn waits for the forget
    arriving.join(60)
    assert not arriving.is_alive()
    with services.db.read() as session:
        row = session.get(AuditLog, turns[0])
        [new] = session.scalars(select(Conversation).where(Conversation.key == "trip"))
    assert row is not None and row.subject_id == new.id != old.id
    assert new.tip_audit_id == row.id


def test_a_trivial_chats_empty_episode_is_counted_nowhere(learning, tmp_path):
    """A trivial chat leaves an episode row with no summary; the episodes list never showed
    it, so forget, the export and the backup do not count it either (issue #49)."""
    from memory_helpers import add_chat

    from caesar.db.backup import backup_sqlite
    from caesar.export import Export
    from caesar.memory.forget import ForgetRequest, forget

    add_chat(learning, "hi", "hello")
    add_chat(learning, "My dog Biscuit loves long walks in the park near the river.", "Lovely!")
    _learn(learning)
    with learning.db.read() as session:
        summaries = sorted(session.scalars(select(EpisodeSummary.summary)).all())
        conversations = [c.id for c in session.scalars(select(Conversation))]
    assert summaries[0] == "" and len(summaries) == 2  # the trivial chat's row is there
    with TestClient(create_app(learning.settings, learning, run_workers=False)) as client:
        listed = client.get("/v1/episodes").json()["episodes"]
    with Export(learning.db, scope=Scope(OWNER)) as export:
        lines = [r for r in export.records() if r["type"] == "episode"]
        assert export.counts.episodes == len(lines) == len(listed) == 1
    if learning.db.is_sqlite:
        assert backup_sqlite(learning.db, tmp_path / "copy.db").episodes == 1
    going = forget(learning, ForgetRequest(conversations, person=OWNER), dry_run=True)
    assert going.episodes == 1 and going.chat_rows == 2
