"""What the person told caesar about themselves (standing statements, issue #46, item 6: the
person sees and corrects them) on every surface: the API (/v1/memories), `caesar memories`, the
MCP tools and the dashboard's facts page. Real SQLite, the real embedder; two people, each
with memories of their own, the other's ids not found."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import OWNER, TEST_TOKEN
from fastapi.testclient import TestClient
from mcp import Client
from memory_helpers import add_chat, events, write_config
from typer.testing import CliRunner

from caesar import audit, people
from caesar.api import create_app
from caesar.cli.main import app as cli_app
from caesar.clock import utcnow
from caesar.mcp_server import build
from caesar.memory.scope import Scope
from caesar.memory.standing import kinds
from caesar.memory.standing.offline import Statement

A = {"Authorization": f"Bearer {TEST_TOKEN}"}
GLUTEN = "I keep a gluten-free diet"
XSS = "<script>x</script>"


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


def _memories(h: Household, headers: dict[str, str], **params: Any) -> list[dict[str, Any]]:
    response = h.client.get("/v1/memories", params=params, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["memories"]  # type: ignore[no-any-return]


def _learned(services: Any, text: str, kind: str, slot: str) -> tuple[int, int]:
    """A statement learned from a chat of the owner's, as the memory.extract worker writes
    one: (its chat row, the statement's id)."""
    chat = add_chat(services, text, "Noted.")
    with services.db.write() as session:
        services.standing.learn(
            Scope(OWNER, session),
            services.audit,
            [(Statement(kind, slot, text, about=text.split()[-1]), None)],
            source_audit_id=chat,
            said_at=utcnow(),
        )
    [memory] = [m for m in services.standing.list(scope=Scope(OWNER)) if m.text == text]
    return chat, memory.id


# -- the API ------------------------------------------------------------------------------------
def test_api_add_list_search_edit_delete_round_trip(home):
    c = home.client
    added = c.post(
        "/v1/memories",
        json={"text": f"  {GLUTEN} ", "kind": "constraint", "slot": "diet"},
        headers=A,
    )
    assert added.status_code == 201, added.text
    memory = added.json()["memory"]
    assert memory["text"] == GLUTEN and (memory["kind"], memory["slot"]) == ("constraint", "diet")
    assert memory["confidence"] == 1.0 and memory["source_audit_id"] is None
    # no slot: the kind's general one
    metric = c.post(
        "/v1/memories", json={"text": "Always use metric units", "kind": "instruction"}, headers=A
    ).json()["memory"]
    assert metric["slot"] == "answers"

    assert [m["id"] for m in _memories(home, A)] == [metric["id"], memory["id"]]
    assert [m["id"] for m in _memories(home, A, kind="constraint")] == [memory["id"]]
    assert _memories(home, A, kind="profile") == []
    assert [m["id"] for m in _memories(home, A, q="GLUTEN")] == [memory["id"]]
    assert _memories(home, A, q="gluten", kind="instruction") == []

    edited = c.put(
        f"/v1/memories/{memory['id']}",
        json={"text": "I keep a gluten-free diet, strictly"},
        headers=A,
    )
    assert edited.status_code == 200, edited.text
    assert edited.json()["memory"]["text"].endswith("strictly")
    assert edited.json()["memory"]["edit_count"] == 1
    # the vector follows the words (the store embeds nothing itself)
    with home.services.db.read() as session:
        current = {m.id: m for m in home.services.standing.current(Scope(OWNER, session))}
    assert current[memory["id"]].vector is not None and current[metric["id"]].vector is not None

    assert c.delete(f"/v1/memories/{memory['id']}", headers=A).status_code == 204
    assert [m["id"] for m in _memories(home, A, history="true")] == [metric["id"]]
    again = c.delete(f"/v1/memories/{memory['id']}", headers=A)
    assert again.status_code == 404 and "no memory with id" in again.json()["error"]["message"]
    said = {e.event_type for e in events(home.services, audit.MEMORY_USER_ADDED)}
    said |= {e.event_type for e in events(home.services, audit.MEMORY_USER_DELETED)}
    assert said == {audit.MEMORY_USER_ADDED, audit.MEMORY_USER_DELETED}


def test_api_another_persons_memory_is_not_found_and_not_listed(home):
    c = home.client
    mine = c.post(
        "/v1/memories", json={"text": GLUTEN, "kind": "constraint", "slot": "diet"}, headers=A
    ).json()["memory"]
    theirs = c.post(
        "/v1/memories",
        json={"text": "My cat is called Mog", "kind": "profile", "slot": "pet"},
        headers=home.b,
    ).json()["memory"]
    assert [m["id"] for m in _memories(home, home.b)] == [theirs["id"]]
    assert _memories(home, home.b, q="gluten") == []
    assert _memories(home, home.b, history="true", kind="constraint") == []
    path = f"/v1/memories/{mine['id']}"
    put = c.put(path, json={"text": "I eat everything"}, headers=home.b)
    assert put.status_code == 404 and GLUTEN not in put.text
    assert c.delete(path, headers=home.b).status_code == 404
    # A's is as it was
    [kept] = _memories(home, A)
    assert kept["text"] == GLUTEN and kept["edit_count"] == 0


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"text": GLUTEN, "kind": "habit"}, 400, "unknown kind 'habit'"),
        ({"text": GLUTEN, "kind": "constraint", "slot": "mood"}, 400, "unknown slot 'mood'"),
        ({"text": "   ", "kind": "constraint"}, 400, "must not be empty"),
        ({"text": "", "kind": "constraint"}, 422, "text"),
        ({"text": "a\x00b", "kind": "profile"}, 400, "control characters"),
        ({"text": GLUTEN}, 422, "kind"),
        ({"text": GLUTEN, "kind": "profile", "extra": 1}, 422, "extra"),
    ],
)
def test_api_bad_input_is_a_clear_4xx_and_keeps_nothing(home, body, status, words):
    response = home.client.post("/v1/memories", json=body, headers=A)
    assert response.status_code == status, response.text
    assert words in response.json()["error"]["message"]
    assert _memories(home, A) == []


def test_api_bad_queries_and_edits(home):
    c = home.client
    bad_kind = c.get("/v1/memories", params={"kind": "habit"}, headers=A)
    assert bad_kind.status_code == 400 and "use one of instruction" in bad_kind.text
    both = c.get("/v1/memories", params={"q": "diet", "history": "true"}, headers=A)
    assert both.status_code == 400
    assert c.get("/v1/memories", params={"q": " "}, headers=A).status_code == 400
    assert c.put("/v1/memories/0", json={"text": "x"}, headers=A).status_code == 422
    assert c.put(f"/v1/memories/{2**63}", json={"text": "x"}, headers=A).status_code == 422
    memory = c.post("/v1/memories", json={"text": GLUTEN, "kind": "constraint"}, headers=A).json()
    blank = c.put(f"/v1/memories/{memory['memory']['id']}", json={"text": " "}, headers=A)
    assert blank.status_code == 400 and "must not be empty" in blank.text
    assert c.get("/v1/memories", headers={}).status_code == 401


# -- the command line ---------------------------------------------------------------------------
@pytest.fixture
def cli(home: Household, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Household:
    config = write_config(tmp_path / "caesar.toml", home.services.settings)
    monkeypatch.setenv("CAESAR_CONFIG", str(config))
    return home


def run(*args: str) -> Any:
    return CliRunner().invoke(cli_app, list(args))


def test_cli_add_list_search_edit_forget(cli, monkeypatch):
    from caesar.cli import common

    added = run("memories", "add", GLUTEN, "--kind", "constraint", "--slot", "diet")
    assert added.exit_code == 0, added.output
    [memory] = cli.services.standing.list(scope=Scope(OWNER))
    assert f"added #{memory.id} (constraint, diet)" in added.output
    long = "When I ask for a recipe, " + "always give the weights in grams and not cups " * 3
    assert run("memories", "add", long, "--kind", "instruction").exit_code == 0

    listed = run("memories", "list", "--json")
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert [r["kind"] for r in rows] == ["instruction", "constraint"]
    assert rows[1] == {**rows[1], "id": memory.id, "text": GLUTEN, "slot": "diet"}
    only = json.loads(run("memories", "list", "--kind", "constraint", "--json").stdout)
    assert [r["id"] for r in only] == [memory.id]
    found = json.loads(run("memories", "search", "gluten", "--json").stdout)
    assert [r["id"] for r in found] == [memory.id]

    # the table: readable at 80 columns, the text cut to fit
    monkeypatch.setattr(common.console, "width", 80)
    table = run("memories", "list")
    assert table.exit_code == 0, table.output
    assert max(len(line) for line in table.output.splitlines()) <= 80
    assert str(memory.id) in table.output and "constraint" in table.output

    edited = run("memories", "edit", str(memory.id), "I keep a gluten-free diet, strictly")
    assert edited.exit_code == 0 and "strictly" in edited.output
    assert cli.services.standing.get(memory.id, scope=Scope(OWNER)).edit_count == 1

    forgot = run("memories", "forget", str(memory.id))
    assert forgot.exit_code == 0 and f"forgot #{memory.id}" in forgot.output
    assert [m.kind for m in cli.services.standing.list(scope=Scope(OWNER))] == ["instruction"]
    history = json.loads(run("memories", "list", "--history", "--json").stdout)
    assert [r["kind"] for r in history] == ["instruction"]


def test_cli_errors_exit_non_zero_and_another_persons_id_is_not_found(cli):
    mine = run("memories", "add", GLUTEN, "--kind", "constraint")
    assert mine.exit_code == 0, mine.output
    [memory] = cli.services.standing.list(scope=Scope(OWNER))
    for args, words in [
        (("memories", "forget", "424242"), "no memory with id 424242"),
        (("memories", "list", "--kind", "habit"), "unknown kind 'habit'"),
        (("memories", "add", "x", "--kind", "habit"), "unknown kind 'habit'"),
        (("memories", "add", "x", "--kind", "profile", "--slot", "mood"), "unknown slot 'mood'"),
        (("memories", "edit", str(memory.id), "  "), "must not be empty"),
        (("--person", "B", "memories", "forget", str(memory.id)), "no memory with id"),
        (("--person", "B", "memories", "edit", str(memory.id), "x"), "no memory with id"),
        (("--person", "Nobody", "memories", "list"), "Nobody"),
    ]:
        result = run(*args)
        assert result.exit_code == 1, (args, result.output)
        assert words in result.output, (args, result.output)
    assert json.loads(run("--person", "B", "memories", "list", "--json").stdout) == []
    assert GLUTEN not in run("--person", "B", "memories", "search", "gluten").output
    assert cli.services.standing.get(memory.id, scope=Scope(OWNER)).text == GLUTEN


# -- MCP ---------------------------------------------------------------------------------------
def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)  # type: ignore[no-any-return]


def test_mcp_remember_list_recall_and_forget_memories(home):
    services = home.services
    chat, learned = _learned(services, "I am allergic to peanuts", "constraint", "allergy")

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(build(services, transport="stdio", scope=Scope(OWNER))) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            out["tools"] = tools
            out["kept"] = _data(
                await client.call_tool(
                    "remember_about_me", {"text": "Always use metric units", "kind": "instruction"}
                )
            )
            out["listed"] = _data(await client.call_tool("list_memories", {}))
            out["profile"] = _data(await client.call_tool("list_memories", {"kind": "profile"}))
            out["recalled"] = _data(
                await client.call_tool("recall", {"text": "Suggest a snack for the trip"})
            )
            out["bad_kind"] = await client.call_tool(
                "remember_about_me", {"text": "x", "kind": "habit"}
            )
            out["forgot"] = _data(await client.call_tool("forget_memory", {"memory_id": learned}))
            out["again"] = await client.call_tool("forget_memory", {"memory_id": learned})
            out["after"] = _data(await client.call_tool("list_memories", {}))
        async with Client(build(services, transport="stdio", scope=Scope(home.b_id))) as as_b:
            out["b_list"] = _data(await as_b.call_tool("list_memories", {}))
            out["b_forget"] = await as_b.call_tool(
                "forget_memory", {"memory_id": out["kept"]["memory"]["id"]}
            )
        return out

    out = anyio.run(session)
    tools = out["tools"]
    assert {"list_memories", "forget_memory", "remember_about_me"} <= set(tools)
    assert tools["list_memories"].annotations.read_only_hint is True
    assert tools["forget_memory"].annotations.destructive_hint is True
    schema = tools["remember_about_me"].input_schema["properties"]["kind"]
    assert set(schema["enum"]) == set(kinds.KINDS)

    kept = out["kept"]["memory"]
    assert (kept["kind"], kept["slot"], kept["text"]) == (
        "instruction",
        "answers",
        "Always use metric units",
    )
    assert [m["id"] for m in out["listed"]["memories"]] == [kept["id"], learned]
    assert out["listed"]["memories"][1]["source_audit_id"] == chat
    assert out["profile"] == {"memories": []}
    recalled = {m["id"]: m for m in out["recalled"]["memories"]}
    assert set(recalled) == {kept["id"], learned}
    assert recalled[learned]["kind"] == "constraint" and recalled[learned]["said_at"]
    assert set(recalled[learned]) == {"id", "kind", "slot", "text", "said_at"}
    assert out["bad_kind"].is_error
    assert out["forgot"] == {"forgotten": learned}
    assert out["again"].is_error and "no memory with id" in out["again"].content[0].text
    assert [m["id"] for m in out["after"]["memories"]] == [kept["id"]]
    # B: none of A's, and A's id is not found
    assert out["b_list"] == {"memories": []}
    assert out["b_forget"].is_error and "no memory with id" in out["b_forget"].content[0].text
    assert [m.id for m in services.standing.list(scope=Scope(OWNER))] == [kept["id"]]

    rows = events(services, audit.MCP_TOOL_CALLED)
    by_tool = {r.payload["tool"]: r.payload for r in rows}
    assert {"remember_about_me", "list_memories", "forget_memory", "recall"} <= set(by_tool)
    assert by_tool["remember_about_me"]["memory_id"] == kept["id"]
    assert by_tool["recall"]["memories"] and by_tool["forget_memory"]["ok"] is False  # the last
    # argument names, never values
    assert not any("metric" in str(r.payload) or "peanut" in str(r.payload) for r in rows)


# -- the dashboard ------------------------------------------------------------------------------
def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "no CSRF token in the page"
    return match.group(1)


def _login(c: TestClient, token: str = TEST_TOKEN) -> None:
    response = c.post("/dashboard/login", data={"token": token}, follow_redirects=False)
    assert response.status_code == 303, response.text


def _section(html: str) -> str:
    return html[html.index('<section id="memories"') :]


def test_dashboard_shows_memories_escaped_grouped_with_their_conversation(home):
    services, c = home.services, home.client
    chat, learned = _learned(services, "My daughter Lily is seven", "profile", "family")
    xss = services.standing.add(services.audit, XSS, kind="preference", scope=Scope(OWNER))
    services.standing.add(
        services.audit, "Answer briefly", kind="instruction", slot="length", scope=Scope(OWNER)
    )
    _login(c)
    html = c.get("/dashboard/facts").text
    section = _section(html)
    assert "What you told caesar about yourself" in section
    assert XSS not in html and "&lt;script&gt;x&lt;/script&gt;" in section
    # grouped by kind, in this order
    titles = re.findall(r"<h3>([^<]+)</h3>", section)
    assert titles == ["Instructions", "Preferences and constraints", "Profile"]
    assert section.index("Answer briefly") < section.index("&lt;script&gt;") < section.index("Lily")
    # the conversation it was said in
    with services.db.read() as session:
        conversation = audit.subjects(Scope(OWNER, session), [chat])[chat]
    row = re.search(rf'<tr class="memory" data-id="{learned}".*?</tr>', section, re.S)
    assert row and f'href="/dashboard/chat/{conversation}"' in row.group(0)
    mine = re.search(rf'<tr class="memory" data-id="{xss.id}".*?</tr>', section, re.S)
    assert mine and "added by you" in mine.group(0)
    assert f'action="/dashboard/memories/{xss.id}/forget"' in section


def test_dashboard_forms_need_the_csrf_token_and_correct_add_and_forget(home):
    services, c = home.services, home.client
    memory = services.standing.add(
        services.audit, GLUTEN, kind="constraint", slot="diet", scope=Scope(OWNER)
    )
    _login(c)
    token = _csrf(c.get("/dashboard/facts").text)
    forget = f"/dashboard/memories/{memory.id}/forget"
    for data in ({}, {"csrf": "0" * 64}):
        refused = c.post(forget, data=data, follow_redirects=False)
        assert refused.status_code == 403, refused.text
    edit = f"/dashboard/memories/{memory.id}"
    assert c.post(edit, data={"text": "x"}, follow_redirects=False).status_code == 403
    assert services.standing.get(memory.id, scope=Scope(OWNER)).text == GLUTEN

    saved = c.post(
        edit, data={"text": "Strictly gluten-free", "csrf": token}, follow_redirects=False
    )
    assert saved.status_code == 303 and saved.headers["location"].endswith("memory=edited#memories")
    assert services.standing.get(memory.id, scope=Scope(OWNER)).text == "Strictly gluten-free"
    assert "Saved your correction." in c.get(saved.headers["location"]).text
    blank = c.post(edit, data={"text": " ", "csrf": token})
    assert blank.status_code == 400 and "must not be empty" in blank.text

    added = c.post(
        "/dashboard/memories",
        data={"text": "I have a cat called Mog", "kind": "profile", "csrf": token},
        follow_redirects=False,
    )
    assert added.status_code == 303
    bad = c.post("/dashboard/memories", data={"text": XSS, "kind": "habit", "csrf": token})
    assert bad.status_code == 400 and "unknown kind" in bad.text
    assert XSS not in bad.text and "&lt;script&gt;x&lt;/script&gt;" in bad.text  # kept, escaped
    assert [m.slot for m in services.standing.list(scope=Scope(OWNER))] == ["goal", "diet"]

    gone = c.post(forget, data={"csrf": token}, follow_redirects=False)
    assert gone.status_code == 303 and "memory=forgotten" in gone.headers["location"]
    assert [m.kind for m in services.standing.list(scope=Scope(OWNER))] == ["profile"]
    assert c.post(forget, data={"csrf": token}).status_code == 404


def test_dashboard_another_persons_memory_is_not_theirs(home):
    services = home.services
    memory = services.standing.add(services.audit, GLUTEN, kind="constraint", scope=Scope(OWNER))
    # B with their bearer token (no CSRF needed, as for the facts page)
    c = home.client
    page = c.get("/dashboard/facts", headers=home.b)
    assert page.status_code == 200 and GLUTEN not in page.text
    for path in (f"/dashboard/memories/{memory.id}/forget", f"/dashboard/memories/{memory.id}"):
        refused = c.post(path, data={"text": "mine now"}, headers=home.b)
        assert refused.status_code == 404, (path, refused.text)
    assert services.standing.get(memory.id, scope=Scope(OWNER)).text == GLUTEN


def test_cli_said_lists_the_dated_memories_oldest_first(cli, monkeypatch):
    from datetime import datetime

    from memory_helpers import add_chat

    from caesar.cli import common
    from caesar.db.models import AuditLog
    from caesar.memory.dated.offline import CAESAR, PERSON, DatedMemory

    services = cli.services
    said = [
        (datetime(2026, 10, 3, 9), "The person ran their first half marathon in Porto."),
        (datetime(2026, 11, 20, 18), "The person adopted a grey cat named Luna."),
    ]
    chats = []
    for when, text in said:
        chat = add_chat(services, "(the chat)", "ok", when)
        chats.append(chat)
        with services.db.write() as session:
            conversation = session.get(AuditLog, chat).subject_id
            services.dated.learn(
                Scope(OWNER, session),
                services.audit,
                [DatedMemory(PERSON, text, 0), DatedMemory(CAESAR, "caesar suggested a vet.", 1)]
                if "cat" in text
                else [DatedMemory(PERSON, text, 0, when.replace(hour=0))],
                [None, None] if "cat" in text else [None],
                source_audit_id=chat,
                conversation_id=conversation,
                said_at=when,
            )

    listed = run("memories", "said", "--json")
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert [(r["speaker"], r["text"][:20]) for r in rows] == [
        ("person", "The person ran their"),
        ("person", "The person adopted a"),
        ("caesar", "caesar suggested a v"),
    ]
    assert rows[0]["refers_start"] == "2026-10-03T00:00:00" and rows[0]["turn"] == 0
    one = json.loads(
        run("memories", "said", "--conversation", str(rows[2]["conversation_id"]), "--json").stdout
    )
    assert [r["id"] for r in one] == [rows[1]["id"], rows[2]["id"]]
    assert json.loads(run("memories", "said", "--limit", "1", "--json").stdout)[0] == rows[0]

    monkeypatch.setattr(common.console, "width", 80)
    table = run("memories", "said")
    assert table.exit_code == 0, table.output
    assert max(len(line) for line in table.output.splitlines()) <= 80
    assert "2026-10-03" in table.output and "caesar" in table.output

    theirs = run("--person", "B", "memories", "said")
    assert theirs.exit_code == 0 and "nothing yet" in theirs.output
    bad = run("memories", "said", "--limit", "0")
    assert bad.exit_code != 0
