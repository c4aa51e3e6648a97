"""The dated memories of what was said (issue #45) seen and corrected by the person on every
surface: the store (`DatedStore.get/search/edit/delete`), `caesar memories search --said / edit
/ forget`, the API (/v1/memories/said) and the dashboard's facts page. Real SQLite, the real
embedder; two people, each with memories of their own, the other's ids not found; a said
memory is never a standing statement's id, nor the other way round."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import OWNER, TEST_TOKEN
from fastapi.testclient import TestClient
from memory_helpers import count, events, write_config
from sqlalchemy import select
from typer.testing import CliRunner

from caesar import audit, people
from caesar.api import create_app
from caesar.cli.main import app as cli_app
from caesar.clock import utcnow
from caesar.db.models import AuditLog, Memory
from caesar.embeddings import normalise
from caesar.errors import InputError, NotFound
from caesar.memory import conversations
from caesar.memory.dated.offline import CAESAR, PERSON, DatedMemory
from caesar.memory.forget import ForgetRequest, forget
from caesar.memory.scope import Scope

A = {"Authorization": f"Bearer {TEST_TOKEN}"}
XSS = "<script>x</script>"
OCTOBER = datetime(2026, 10, 3, 9)
NOVEMBER = datetime(2026, 11, 20, 18)
MARATHON = "The person ran their first half marathon in Porto."
LUNA = "The person adopted a grey cat named Luna."
VET = "caesar suggested a vet near the river for Luna."


class Household:
    def __init__(self, services: Any, client: TestClient, b_token: str, b_id: int) -> None:
        self.services = services
        self.client = client
        self.b = {"Authorization": f"Bearer {b_token}"}
        self.b_id = b_id


@pytest.fixture
def home(make_services: Any) -> Iterator[Household]:
    """The owner (A, the test token) and B, on a token-guarded app."""
    services = make_services(api_token=TEST_TOKEN)
    with services.db.write() as session:
        b, token = people.add(session, services.audit, "B")
        b_id = b.id
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        yield Household(services, client, token, b_id)


def said(
    services: Any, when: datetime, memories: list[DatedMemory], person: int = OWNER
) -> tuple[int, int]:
    """A chat of `person`'s at `when` and its dated memories, embedded, as the memory.extract
    worker writes them: (its chat row, its conversation)."""
    with services.db.write() as session:
        chat = conversations.add_finished(
            Scope(person, session),
            services.audit,
            {"messages": [{"role": "user", "content": "(the chat)"}], "reply": "ok"},
            when,
        )
        conversation = session.get(AuditLog, chat).subject_id
        services.dated.learn(
            Scope(person, session),
            services.audit,
            memories,
            services.dated.vectors([m.text for m in memories]),
            source_audit_id=chat,
            conversation_id=conversation,
            said_at=when,
        )
    return chat, conversation


@pytest.fixture
def history(home: Household) -> dict[str, Any]:
    """A's marathon (October) and cat (November, with caesar's reply), B's own memory."""
    services = home.services
    run_chat, run_conversation = said(
        services, OCTOBER, [DatedMemory(PERSON, MARATHON, 0, OCTOBER.replace(hour=0))]
    )
    cat_chat, cat_conversation = said(
        services, NOVEMBER, [DatedMemory(PERSON, LUNA, 0), DatedMemory(CAESAR, VET, 1)]
    )
    said(services, NOVEMBER, [DatedMemory(PERSON, "The person sold a red bike.", 0)], home.b_id)
    ids = {m.text: m.id for m in services.dated.list(scope=Scope(OWNER))}
    return {
        "run": ids[MARATHON],
        "luna": ids[LUNA],
        "vet": ids[VET],
        "run_chat": run_chat,
        "run_conversation": run_conversation,
        "cat_conversation": cat_conversation,
        "cat_chat": cat_chat,
    }


def _vector(services: Any, memory_id: int) -> tuple[np.ndarray | None, str | None]:
    with services.db.read() as session:
        row = session.get(Memory, memory_id)
        blob = None if row.vector is None else np.frombuffer(row.vector, np.float32)
        return blob, row.model


# -- the store ----------------------------------------------------------------------------------
def test_store_gets_and_searches_the_persons_own_newest_first(home, history):
    dated, me, b = home.services.dated, Scope(OWNER), Scope(home.b_id)
    run = dated.get(history["run"], scope=me)
    assert (run.text, run.speaker, run.said_at, run.edit_count) == (MARATHON, PERSON, OCTOBER, 0)
    assert run.refers_start == datetime(2026, 10, 3) and run.updated_at == OCTOBER

    assert [m.id for m in dated.search("LUNA", scope=me)] == [history["vet"], history["luna"]]
    assert [m.id for m in dated.search("the person", scope=me)] == [history["luna"], history["run"]]
    assert [m.id for m in dated.search("the person", scope=me, limit=1)] == [history["luna"]]
    only = dated.search("the", scope=me, conversation_id=history["run_conversation"])
    assert [m.id for m in only] == [history["run"]]
    assert dated.search("100%", scope=me) == []  # a wildcard is a character
    for blank in ("", "   ", "a\x00b"):
        with pytest.raises(InputError):
            dated.search(blank, scope=me)
    newest = dated.list(scope=me, limit=2, newest_first=True)
    assert [m.id for m in newest] == [history["vet"], history["luna"]]

    # B: their own, none of A's, and A's ids not found
    assert [m.text for m in dated.search("the person", scope=b)] == ["The person sold a red bike."]
    assert dated.search("Luna", scope=b) == []
    with pytest.raises(NotFound, match="no said memory with id"):
        dated.get(history["run"], scope=b)
    assert not dated.owns(history["run"], scope=b) and dated.owns(history["run"], scope=me)


def test_store_edit_cleans_embeds_counts_and_audits(home, history):
    services, me = home.services, Scope(OWNER)
    before, _model = _vector(services, history["run"])
    edited = services.dated.edit(
        services.audit, history["run"], "  The person ran a  full marathon in Porto. ", scope=me
    )
    assert edited.text == "The person ran a full marathon in Porto."
    assert edited.edit_count == 1 and edited.updated_at > OCTOBER
    assert (edited.said_at, edited.speaker, edited.turn) == (OCTOBER, PERSON, 0)
    assert edited.conversation_id == history["run_conversation"]
    assert edited.refers_start == datetime(2026, 10, 3)
    assert edited.source_audit_id == history["run_chat"]
    # a new row (the vector indexes learn of rows by id), in the old one's place
    assert edited.id > history["vet"]
    with pytest.raises(NotFound):
        services.dated.get(history["run"], scope=me)
    assert [m.id for m in services.dated.list(scope=me)] == [
        edited.id,
        history["luna"],
        history["vet"],
    ]
    vector, model = _vector(services, edited.id)
    fresh = normalise(services.embedder.get().embed_batch([edited.text]))[0]
    assert model == services.embedder.get().model_id
    assert float(vector @ fresh) > 0.999 and float(vector @ before) < 0.999
    (row,) = events(services, audit.MEMORY_USER_EDITED)
    assert row.subject_id == history["run_chat"] and row.person_id == OWNER
    assert row.payload == {
        "memory_id": edited.id,
        "replaces": history["run"],
        "kind": "said",
        "text": edited.text,
    }

    for bad in (" ", "x" * 501, "a\x07b"):
        with pytest.raises(InputError):
            services.dated.edit(services.audit, edited.id, bad, scope=me)
    with pytest.raises(NotFound):
        services.dated.edit(services.audit, edited.id, "mine now", scope=Scope(home.b_id))
    assert services.dated.get(edited.id, scope=me).text == edited.text

    # edited again: counted again; one edit row, the latest words'
    again = services.dated.edit(services.audit, edited.id, "The person ran 42 km.", scope=me)
    assert again.edit_count == 2
    (row,) = events(services, audit.MEMORY_USER_EDITED)
    assert row.payload["memory_id"] == again.id and row.payload["replaces"] == edited.id


def test_store_delete_leaves_no_row_and_no_words_in_the_audit(home, history):
    services, me = home.services, Scope(OWNER)
    cat = services.dated.edit(
        services.audit, history["luna"], "The person adopted a cat.", scope=me
    )
    with pytest.raises(NotFound):
        services.dated.delete(services.audit, cat.id, scope=Scope(home.b_id))

    services.dated.delete(services.audit, cat.id, scope=me)
    assert count(services, Memory, Memory.id.in_((cat.id, history["luna"]))) == 0
    assert events(services, audit.MEMORY_USER_EDITED) == []  # the row quoting it went with it
    (gone,) = events(services, audit.MEMORY_USER_DELETED)
    assert gone.payload == {"memory_id": cat.id, "kind": "said"}
    with services.db.read() as session:
        payloads = [json.dumps(p) for p in session.scalars(select(AuditLog.payload))]
    assert not any("adopted" in p for p in payloads)
    with pytest.raises(NotFound):
        services.dated.delete(services.audit, cat.id, scope=me)
    assert [m.id for m in services.dated.list(scope=me)] == [history["run"], history["vet"]]


def test_a_said_memory_is_no_statement_and_a_statement_no_said_memory(home, history):
    services, me = home.services, Scope(OWNER)
    statement = services.standing.add(
        services.audit, "Answer briefly", kind="instruction", scope=me
    )
    with pytest.raises(NotFound):
        services.standing.get(history["run"], scope=me)
    with pytest.raises(NotFound):
        services.standing.edit(services.audit, history["run"], "x", scope=me)
    with pytest.raises(NotFound):
        services.standing.delete(services.audit, history["run"], scope=me)
    with pytest.raises(NotFound):
        services.dated.get(statement.id, scope=me)
    with pytest.raises(NotFound):
        services.dated.delete(services.audit, statement.id, scope=me)
    assert not services.dated.owns(statement.id, scope=me)
    assert [m.id for m in services.standing.list(scope=me)] == [statement.id]
    assert len(services.dated.list(scope=me)) == 3


def test_forgetting_the_conversation_leaves_nothing_of_an_edited_memory(home, history):
    services, me = home.services, Scope(OWNER)
    services.dated.edit(services.audit, history["luna"], "The person adopted Luna.", scope=me)
    result = forget(
        services, ForgetRequest(conversation_ids=[history["cat_conversation"]], person=OWNER)
    )
    assert result.memories == 2
    assert [m.id for m in services.dated.list(scope=me)] == [history["run"]]
    with services.db.read() as session:
        payloads = [json.dumps(p) for p in session.scalars(select(AuditLog.payload))]
    assert not any("Luna" in p for p in payloads)  # the edit's row went with the chat
    assert events(services, audit.MEMORY_USER_EDITED) == []


def _in_index(services: Any, person: int, ids: list[int]) -> set[int]:
    """Those of `ids` the process's index of `person`'s memories' vectors holds, loaded by a
    search as a turn's recall loads it."""
    query = services.dated.vectors(["a cat named Luna"])[0]
    with services.db.read() as session:
        services.episodes.said.search(Scope(person, session), query, 10)
        return set(services.episodes.said.cosines(Scope(person, session), ids, query))


def test_forgetting_a_conversation_drops_its_memories_from_the_vector_index(home, history):
    services = home.services
    cat = [history["luna"], history["vet"]]
    assert _in_index(services, OWNER, [*cat, history["run"]]) == {*cat, history["run"]}
    forget(services, ForgetRequest(conversation_ids=[history["cat_conversation"]], person=OWNER))
    # at once, not when a search finds the rows gone
    with services.db.read() as session:
        query = services.dated.vectors(["a cat named Luna"])[0]
        left = services.episodes.said.cosines(Scope(OWNER, session), [*cat, history["run"]], query)
    assert set(left) == {history["run"]}


def test_the_retention_sweep_drops_its_memories_from_the_vector_index(make_services):
    from caesar.retention import RetentionWorker

    services = make_services(retention={"ttl_days": 90})
    said(services, datetime(2020, 1, 1), [DatedMemory(PERSON, LUNA, 0)])
    said(services, utcnow(), [DatedMemory(PERSON, VET, 0)])
    ids = [m.id for m in services.dated.list(scope=Scope(OWNER))]
    assert _in_index(services, OWNER, ids) == set(ids)
    RetentionWorker(services).step()
    assert [m.text for m in services.dated.list(scope=Scope(OWNER))] == [VET]
    with services.db.read() as session:
        query = services.dated.vectors(["a cat named Luna"])[0]
        left = services.episodes.said.cosines(Scope(OWNER, session), ids, query)
    assert set(left) == {ids[1]}


# -- the command line ---------------------------------------------------------------------------
@pytest.fixture
def cli(home: Household, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Household:
    config = write_config(tmp_path / "caesar.toml", home.services.settings)
    monkeypatch.setenv("CAESAR_CONFIG", str(config))
    return home


def run(*args: str) -> Any:
    return CliRunner().invoke(cli_app, list(args))


def test_cli_search_said_edit_and_forget(cli, history, monkeypatch):
    from caesar.cli import common

    found = run("memories", "search", "luna", "--said", "--json")
    assert found.exit_code == 0, found.output
    rows = json.loads(found.stdout)
    assert [(r["id"], r["speaker"]) for r in rows] == [
        (history["vet"], "caesar"),
        (history["luna"], "person"),
    ]
    assert rows[1]["conversation_id"] == history["cat_conversation"] and rows[1]["turn"] == 0
    # without --said: the standing statements, which say nothing of Luna
    assert json.loads(run("memories", "search", "luna", "--json").stdout) == []
    assert "nothing found" in run("memories", "search", "zebra", "--said").output

    monkeypatch.setattr(common.console, "width", 80)
    table = run("memories", "search", "the person", "--said")
    assert table.exit_code == 0, table.output
    assert max(len(line) for line in table.output.splitlines()) <= 80
    assert "2026-10-03" in table.output and "2026-11-20" in table.output
    wide = run("memories", "search", "marathon", "--said", "--wide")
    assert f"#{history['run_chat']}" in wide.output and "refers to" in wide.output

    edited = run("memories", "edit", str(history["run"]), "The person ran a marathon in Porto.")
    assert edited.exit_code == 0, edited.output
    [new] = cli.services.dated.search("ran a marathon", scope=Scope(OWNER))
    assert new.edit_count == 1
    assert (
        f"edited said memory #{new.id} (was #{history['run']}): The person ran a marathon"
        in edited.output
    )

    forgot = run("memories", "forget", str(history["vet"]))
    assert forgot.exit_code == 0, forgot.output
    assert f"forgot said memory #{history['vet']} (caesar, 2026-11-20)" in forgot.output
    left = json.loads(run("memories", "said", "--json").stdout)
    assert [r["id"] for r in left] == [new.id, history["luna"]]

    # a statement's id still reaches the statement
    statement = cli.services.standing.add(
        cli.services.audit, "Answer briefly", kind="instruction", scope=Scope(OWNER)
    )
    again = run("memories", "edit", str(statement.id), "Answer very briefly")
    assert again.exit_code == 0 and f"edited #{statement.id}: Answer very briefly" in again.output


def test_cli_another_persons_said_memory_is_not_found(cli, history):
    for args in (
        ("--person", "B", "memories", "edit", str(history["run"]), "mine now"),
        ("--person", "B", "memories", "forget", str(history["run"])),
        ("memories", "edit", str(history["run"]), "   "),
    ):
        result = run(*args)
        assert result.exit_code == 1, (args, result.output)
        assert "no memory with id" in result.output or "must not be empty" in result.output
        assert MARATHON not in result.output
    theirs = json.loads(
        run("--person", "B", "memories", "search", "the", "--said", "--json").stdout
    )
    assert [r["text"] for r in theirs] == ["The person sold a red bike."]
    bad = run("memories", "search", "a\x01b", "--said")
    assert bad.exit_code == 1 and "control characters" in bad.output
    assert cli.services.dated.get(history["run"], scope=Scope(OWNER)).text == MARATHON


# -- the API ------------------------------------------------------------------------------------
def _said(h: Household, headers: dict[str, str], **params: Any) -> list[dict[str, Any]]:
    response = h.client.get("/v1/memories/said", params=params, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["memories"]  # type: ignore[no-any-return]


def test_api_lists_searches_edits_and_deletes(home, history):
    c = home.client
    listed = _said(home, A)
    assert [m["id"] for m in listed] == [history["vet"], history["luna"], history["run"]]
    assert listed[2] == {
        **listed[2],
        "text": MARATHON,
        "speaker": "person",
        "said_at": OCTOBER.isoformat(),
        "refers_start": "2026-10-03T00:00:00",
        "edit_count": 0,
        "source_audit_id": history["run_chat"],
    }
    assert [m["id"] for m in _said(home, A, limit=1)] == [history["vet"]]
    one = _said(home, A, conversation_id=history["cat_conversation"])
    assert [m["id"] for m in one] == [history["vet"], history["luna"]]
    assert [m["id"] for m in _said(home, A, q="PORTO")] == [history["run"]]
    assert _said(home, A, q="luna", conversation_id=history["run_conversation"]) == []

    path = f"/v1/memories/said/{history['luna']}"
    edited = c.patch(path, json={"text": "The person adopted a cat named Luna."}, headers=A)
    assert edited.status_code == 200, edited.text
    memory = edited.json()["memory"]
    assert memory["text"] == "The person adopted a cat named Luna." and memory["edit_count"] == 1
    assert memory["conversation_id"] == history["cat_conversation"] and memory["turn"] == 0
    assert _vector(home.services, memory["id"])[0] is not None
    assert c.patch(path, json={"text": "again"}, headers=A).status_code == 404  # replaced

    path = f"/v1/memories/said/{memory['id']}"
    assert c.delete(path, headers=A).status_code == 204
    again = c.delete(path, headers=A)
    assert again.status_code == 404 and "no said memory" in again.json()["error"]["message"]
    assert [m["id"] for m in _said(home, A)] == [history["vet"], history["run"]]


def test_api_another_persons_is_not_found_and_bad_input_is_a_clear_4xx(home, history):
    c = home.client
    assert [m["text"] for m in _said(home, home.b)] == ["The person sold a red bike."]
    assert _said(home, home.b, q="marathon") == []
    assert _said(home, home.b, conversation_id=history["run_conversation"]) == []
    path = f"/v1/memories/said/{history['run']}"
    put = c.patch(path, json={"text": "mine now"}, headers=home.b)
    assert put.status_code == 404 and MARATHON not in put.text
    assert c.delete(path, headers=home.b).status_code == 404
    # a said memory is not a statement, on either route
    assert c.put(f"/v1/memories/{history['run']}", json={"text": "x"}, headers=A).status_code == 404
    assert c.delete(f"/v1/memories/{history['run']}", headers=A).status_code == 404

    for params, status in (({"q": " "}, 400), ({"limit": 0}, 422), ({"conversation_id": 0}, 422)):
        response = c.get("/v1/memories/said", params=params, headers=A)
        assert response.status_code == status, (params, response.text)
    blank = c.patch(path, json={"text": "  "}, headers=A)
    assert blank.status_code == 400 and "must not be empty" in blank.text
    assert c.patch(path, json={"text": "x", "extra": 1}, headers=A).status_code == 422
    assert c.patch("/v1/memories/said/0", json={"text": "x"}, headers=A).status_code == 422
    assert c.get("/v1/memories/said", headers={}).status_code == 401
    [kept] = [m for m in _said(home, A) if m["id"] == history["run"]]
    assert kept["text"] == MARATHON and kept["edit_count"] == 0


# -- the dashboard ------------------------------------------------------------------------------
def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "no CSRF token in the page"
    return match.group(1)


def _login(c: TestClient) -> None:
    response = c.post("/dashboard/login", data={"token": TEST_TOKEN}, follow_redirects=False)
    assert response.status_code == 303, response.text


def _section(html: str) -> str:
    return html[html.index('<section id="said"') :]


def test_dashboard_lists_them_newest_first_escaped_with_their_conversation(home, history):
    services, c = home.services, home.client
    said(services, datetime(2026, 11, 25, 8), [DatedMemory(PERSON, f"The person wrote {XSS}.", 0)])
    _login(c)
    html = c.get("/dashboard/facts").text
    section = _section(html)
    assert "Things said in your conversations" in section
    assert XSS not in html and "&lt;script&gt;x&lt;/script&gt;" in section
    assert section.index("&lt;script&gt;") < section.index("Luna") < section.index("Porto")
    row = re.search(rf'<tr class="said" data-id="{history["vet"]}".*?</tr>', section, re.S)
    assert row and "caesar" in row.group(0) and "2026-11-20" in row.group(0)
    assert f'href="/dashboard/chat/{history["cat_conversation"]}"' in row.group(0)
    assert f'action="/dashboard/memories/said/{history["vet"]}/forget"' in row.group(0)
    mine = re.search(rf'<tr class="said" data-id="{history["run"]}".*?</tr>', section, re.S)
    assert mine and '<td class="speaker">you</td>' in mine.group(0)
    assert "The person sold a red bike" not in html  # B's


def test_dashboard_forms_need_the_csrf_token_and_edit_and_forget(home, history):
    services, c = home.services, home.client
    _login(c)
    token = _csrf(c.get("/dashboard/facts").text)
    edit = f"/dashboard/memories/said/{history['run']}"
    forget_it = f"/dashboard/memories/said/{history['luna']}/forget"
    for data in ({"text": "x"}, {"text": "x", "csrf": "0" * 64}):
        assert c.post(edit, data=data, follow_redirects=False).status_code == 403
        assert c.post(forget_it, data=data, follow_redirects=False).status_code == 403
    assert services.dated.get(history["run"], scope=Scope(OWNER)).text == MARATHON

    saved = c.post(
        edit, data={"text": "The person ran a marathon.", "csrf": token}, follow_redirects=False
    )
    assert saved.status_code == 303 and saved.headers["location"].endswith("said=edited#said")
    [new] = services.dated.search("ran a marathon", scope=Scope(OWNER))
    assert new.edit_count == 1
    assert "Saved your correction." in _section(c.get(saved.headers["location"]).text)
    blank = c.post(f"/dashboard/memories/said/{new.id}", data={"text": " ", "csrf": token})
    assert blank.status_code == 400 and "must not be empty" in _section(blank.text)

    gone = c.post(forget_it, data={"csrf": token}, follow_redirects=False)
    assert gone.status_code == 303 and "said=forgotten" in gone.headers["location"]
    assert [m.id for m in services.dated.list(scope=Scope(OWNER))] == [new.id, history["vet"]]
    assert c.post(forget_it, data={"csrf": token}).status_code == 404


def test_dashboard_another_persons_said_memory_is_not_theirs(home, history):
    services, c = home.services, home.client
    page = c.get("/dashboard/facts", headers=home.b)
    assert page.status_code == 200 and "Porto" not in page.text and "red bike" in page.text
    edit = f"/dashboard/memories/said/{history['run']}"
    for path in (edit, f"{edit}/forget"):
        refused = c.post(path, data={"text": "mine now"}, headers=home.b)
        assert refused.status_code == 404, (path, refused.text)
    assert services.dated.get(history["run"], scope=Scope(OWNER)).text == MARATHON
