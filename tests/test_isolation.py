"""The isolation matrix (issue #23), first version: two people with overlapping fact keys and
near-identical conversations, and every route of the app called as the second with the
first's data in reach. For each route, person B never receives A's words, A's ids are 404 to
B, and what B forgets or deletes leaves A untouched (checked once all routes have run). The
prompt B's chat turns send holds nothing of A's.

The tables are the test: `MATRIX` has one entry per (method, path) of the app, and a route the
app has that the table lacks fails the test (so does an entry for a route that is gone);
`MCP_TOOLS` and `MCP_RESOURCES` do the same for what the MCP server lists, called over HTTP
with B's token and over stdio as `caesar --person B mcp`, through the real SDK client. The
command line and export are test_isolation_cli.py's matrix. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import OWNER, TEST_TOKEN
from fastapi.testclient import TestClient
from test_auth import _endpoints

from caesar.api import create_app
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up
from tests.memory_helpers import learning_household

# A's words: none may reach B (the facts' values and what A said).
A_SAYS = "My dog Marmaduke and I flew to Zanzibar last spring for the spice market."
B_SAYS = "My dog Rex and I flew to Reykjavik last spring for the hot springs."
A_WORDS = ("Marmaduke", "Zanzibar", "spice")


@dataclass
class World:
    services: Any
    client: TestClient
    llm: Any
    b: str  # B's token
    b_id: int
    a_conversation: int
    a_chat: int  # A's chat row (audit id)
    a_episode: int
    a_memory: int  # what A told caesar about themselves (a standing statement)

    def as_b(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.b}"}

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.client.request(
            method, path, headers=self.as_b(), follow_redirects=False, **kwargs
        )
        leaked = [w for w in A_WORDS if w in response.text]
        assert not leaked, (method, path, leaked)
        return response


@contextmanager
def built_world(make_services: Any, db_url: str, llm: Any) -> Iterator[World]:
    """A (the owner, the test token) and B, each with a chat learned from and facts under the
    same key; the app's test client, its workers run until caught up."""
    services, b_id, token = learning_household(make_services, db_url, "B")
    a = {"Authorization": f"Bearer {TEST_TOKEN}"}
    b = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(services.settings, services, run_workers=False)) as client:
        client.put("/v1/facts/dog_name", json={"value": "Marmaduke"}, headers=a)
        client.put("/v1/facts/trip", json={"value": "Zanzibar"}, headers=a)
        client.put("/v1/facts/dog_name", json={"value": "Rex"}, headers=b)
        client.post("/v1/chat", json={"message": A_SAYS, "conversation_id": "trip"}, headers=a)
        client.post("/v1/chat", json={"message": B_SAYS, "conversation_id": "trip"}, headers=b)
        for name in ("memory.extract", "memory.summarise", "memory.passages", "semantic.index"):
            if name in services.workers:
                run_until_caught_up(services.workers[name])
        [conversation] = client.get("/v1/conversations", headers=a).json()["conversations"]
        [episode] = client.get("/v1/episodes", headers=a).json()["episodes"]
        memory = client.post(
            "/v1/memories",
            json={"text": "My dog Marmaduke eats only fish", "kind": "profile", "slot": "pet"},
            headers=a,
        ).json()["memory"]
        yield World(
            services,
            client,
            llm,
            token,
            b_id,
            conversation["id"],
            episode["audit_log_id"],
            episode["id"],
            memory["id"],
        )


@pytest.fixture
def world(make_services: Any, db_url: str, llm: Any) -> Iterator[World]:
    with built_world(make_services, db_url, llm) as built:
        yield built


def _prompt_holds_nothing_of_a(w: World) -> None:
    sent = str(w.llm.requests[-1]["json"])
    assert not [word for word in A_WORDS if word in sent], sent


# -- the checks, one per route --------------------------------------------------------------
def chat(w: World, *_route: str) -> None:
    reply = w.call("POST", "/v1/chat", json={"message": "Where did I fly with my dog?"})
    assert reply.status_code == 200
    _prompt_holds_nothing_of_a(w)
    named = w.call("POST", "/v1/chat", json={"message": "And then?", "conversation_id": "trip"})
    assert named.status_code == 200  # B's own "trip", never A's
    _prompt_holds_nothing_of_a(w)


def chat_completions(w: World, *_route: str) -> None:
    body = {"model": "caesar", "messages": [{"role": "user", "content": "What is my dog called?"}]}
    assert w.call("POST", "/v1/chat/completions", json=body).status_code == 200
    _prompt_holds_nothing_of_a(w)


def no_memory(status: int) -> Callable[[World, str, str], None]:
    """A route that serves nothing of anyone's memory: B gets `status`, and none of A's words
    (checked by `call`)."""

    def check(w: World, method: str, path: str) -> None:
        assert w.call(method, path).status_code == status

    return check


def audit_listing(w: World, *_route: str) -> None:
    events = w.call("GET", "/v1/audit", params={"limit": 1000}).json()["events"]
    assert events and all(e["id"] != w.a_chat for e in events)


def facts_listing(w: World, *_route: str) -> None:
    facts = w.call("GET", "/v1/facts").json()["facts"]
    assert {f["key"]: f["value"] for f in facts}["dog_name"] == "Rex"


def fact_put(w: World, *_route: str) -> None:
    assert w.call("PUT", "/v1/facts/dog_name", json={"value": "Rex"}).status_code == 200


def fact_history(w: World, *_route: str) -> None:
    assert w.call("GET", "/v1/facts/trip/history").status_code == 404  # A's key only


def fact_delete(w: World, *_route: str) -> None:
    assert w.call("DELETE", "/v1/facts/trip").status_code == 404


def memories_listing(w: World, *_route: str) -> None:
    listed = w.call("GET", "/v1/memories", params={"history": "true"}).json()["memories"]
    assert all(m["id"] != w.a_memory for m in listed)
    assert w.call("GET", "/v1/memories", params={"q": "Marmaduke"}).json()["memories"] == []


def memory_add(w: World, *_route: str) -> None:
    said = {"text": "My dog Rex eats anything", "kind": "profile", "slot": "pet"}
    assert w.call("POST", "/v1/memories", json=said).status_code == 201


def memory_put(w: World, *_route: str) -> None:
    said = {"text": "My dog Rex eats anything"}
    assert w.call("PUT", f"/v1/memories/{w.a_memory}", json=said).status_code == 404


def memory_delete(w: World, *_route: str) -> None:
    assert w.call("DELETE", f"/v1/memories/{w.a_memory}").status_code == 404


def _a_said(w: World) -> int:
    """One of A's dated memories (issue #45): what A's chat said of Zanzibar."""
    found = w.services.dated.search("Zanzibar", scope=Scope(OWNER))
    assert found
    return found[0].id


def said_listing(w: World, *_route: str) -> None:
    listed = w.call("GET", "/v1/memories/said").json()["memories"]
    assert any("Reykjavik" in m["text"] for m in listed)  # B's own; none of A's (`call`)
    assert w.call("GET", "/v1/memories/said", params={"q": "Zanzibar"}).json()["memories"] == []
    theirs = {"conversation_id": w.a_conversation}
    assert w.call("GET", "/v1/memories/said", params=theirs).json()["memories"] == []


def said_patch(w: World, *_route: str) -> None:
    said = {"text": "My dog Rex flew to Reykjavik"}
    assert w.call("PATCH", f"/v1/memories/said/{_a_said(w)}", json=said).status_code == 404


def said_delete(w: World, *_route: str) -> None:
    assert w.call("DELETE", f"/v1/memories/said/{_a_said(w)}").status_code == 404


def recall(w: World, *_route: str) -> None:
    found = w.call("POST", "/v1/memory/recall", json={"query": "flying with my dog"}).json()
    assert all(e["episode_id"] != w.a_episode for e in found["episodes"])


def semantic_recall(w: World, *_route: str) -> None:
    found = w.call("POST", "/v1/memory/semantic_recall", json={"query": "spice market"}).json()
    assert all(c["audit_log_id"] != w.a_chat for c in found["chunks"])


def episodes_listing(w: World, *_route: str) -> None:
    listed = w.call("GET", "/v1/episodes").json()["episodes"]
    assert listed and all(e["id"] != w.a_episode for e in listed)


def conversations_listing(w: World, *_route: str) -> None:
    listed = w.call("GET", "/v1/conversations").json()["conversations"]
    assert listed and all(c["id"] != w.a_conversation for c in listed)


def conversation_get(w: World, *_route: str) -> None:
    assert w.call("GET", f"/v1/conversations/{w.a_conversation}").status_code == 404


def conversation_delete(w: World, *_route: str) -> None:
    assert w.call("DELETE", f"/v1/conversations/{w.a_conversation}").status_code == 404


def conversations_forget(w: World, *_route: str) -> None:
    by_id = {"conversation_ids": [w.a_conversation]}
    assert w.call("POST", "/v1/conversations/forget", json=by_id).status_code == 404
    by_text = w.call(
        "POST", "/v1/conversations/forget", json={"matching": "spice", "dry_run": True}
    ).json()
    assert by_text["conversation_ids"] == []


def dashboard_facts(w: World, *_route: str) -> None:
    assert w.call("GET", "/dashboard/facts").status_code == 200


def dashboard_fact_save(w: World, *_route: str) -> None:
    saved = w.call("POST", "/dashboard/facts", data={"key": "dog_name", "value": "Rex"})
    assert saved.status_code == 303


def dashboard_fact_delete(w: World, *_route: str) -> None:
    assert w.call("POST", "/dashboard/facts/trip/delete").status_code == 404


def dashboard_forget_sources(w: World, *_route: str) -> None:
    ids = {"conversation_ids": str(w.a_conversation)}
    assert w.call("POST", "/dashboard/facts/forget-sources", data=ids).status_code == 404


def dashboard_memory_add(w: World, *_route: str) -> None:
    said = {"text": "I live in Reykjavik", "kind": "profile"}
    assert w.call("POST", "/dashboard/memories", data=said).status_code == 303


def dashboard_memory_edit(w: World, *_route: str) -> None:
    said = {"text": "I live in Reykjavik"}
    assert w.call("POST", f"/dashboard/memories/{w.a_memory}", data=said).status_code == 404


def dashboard_memory_forget(w: World, *_route: str) -> None:
    assert w.call("POST", f"/dashboard/memories/{w.a_memory}/forget").status_code == 404


def dashboard_said_edit(w: World, *_route: str) -> None:
    said = {"text": "I live in Reykjavik"}
    assert w.call("POST", f"/dashboard/memories/said/{_a_said(w)}", data=said).status_code == 404


def dashboard_said_forget(w: World, *_route: str) -> None:
    assert w.call("POST", f"/dashboard/memories/said/{_a_said(w)}/forget").status_code == 404


def dashboard_audit(w: World, *_route: str) -> None:
    assert w.call("GET", "/dashboard/audit").status_code == 200


def dashboard_audit_row(w: World, *_route: str) -> None:
    assert w.call("GET", f"/dashboard/audit/{w.a_chat}").status_code == 404


def dashboard_episodes(w: World, *_route: str) -> None:
    assert w.call("GET", "/dashboard/episodes").status_code == 200


def dashboard_episodes_forget(w: World, *_route: str) -> None:
    data = {"conversation_id": str(w.a_conversation)}
    assert w.call("POST", "/dashboard/episodes/forget", data=data).status_code == 404


def dashboard_chat(w: World, *_route: str) -> None:
    assert w.call("GET", "/dashboard/chat").status_code == 200


def dashboard_chat_conversation(w: World, *_route: str) -> None:
    assert w.call("GET", f"/dashboard/chat/{w.a_conversation}").status_code == 404


def dashboard_turn_memory(w: World, *_route: str) -> None:
    assert w.call("GET", f"/dashboard/chat/turns/{w.a_chat}/memory").status_code == 404


def dashboard_send(w: World, *_route: str) -> None:
    into_a = {"message": "hello", "conversation_id": str(w.a_conversation)}
    assert w.call("POST", "/dashboard/chat/send", data=into_a).status_code == 404
    assert w.call("POST", "/dashboard/chat/send", data={"message": "hello"}).status_code == 303
    _prompt_holds_nothing_of_a(w)


def dashboard_import(w: World, *_route: str) -> None:
    # an import of A's, named with A's words: B's page does not list it
    from caesar import import_learning
    from caesar.importer import ImportReport

    report = ImportReport(format="chatgpt", imported=1)
    import_learning.record(w.services, Scope(OWNER), report, "Zanzibar spice market.json")
    page = w.call("GET", "/dashboard/import")
    assert page.status_code == 200 and "No imports yet." in page.text


def dashboard_import_upload(w: World, *_route: str) -> None:
    import json
    import time

    from sqlalchemy import select

    from caesar.db.models import AuditLog

    said = [{"role": "user", "content": B_SAYS}, {"role": "assistant", "content": "ok"}]
    line = json.dumps({"created_at": "2026-01-10T09:30:00Z", "messages": said}) + "\n"
    upload = {"file": ("mine.jsonl", line.encode(), "application/jsonl")}
    assert w.call("POST", "/dashboard/import", files=upload).status_code == 303
    deadline = time.monotonic() + 30
    while 'http-equiv="refresh"' in w.call("GET", "/dashboard/import").text:
        assert time.monotonic() < deadline, "the import did not end"
        time.sleep(0.05)
    with w.services.db.read() as session:
        imported = session.scalars(
            select(AuditLog.person_id).where(AuditLog.subject_key.startswith("import:"))
        ).all()
    assert list(imported) == [w.b_id]  # into B's memory, none of A's touched


def mcp(w: World, *_route: str) -> None:
    # one route; its tools as two people: test_mcp.py::test_http_each_persons_token_is_their_own_memory
    assert w.call("GET", "/mcp").status_code < 500


MATRIX: dict[tuple[str, str], Callable[[World, str, str], None]] = {
    ("GET", "/openapi.json"): no_memory(200),
    ("POST", "/v1/chat"): chat,
    ("POST", "/v1/chat/completions"): chat_completions,
    ("GET", "/v1/models"): no_memory(200),
    ("GET", "/v1/audit"): audit_listing,
    ("GET", "/v1/facts"): facts_listing,
    ("PUT", "/v1/facts/{key}"): fact_put,
    ("GET", "/v1/facts/{key}/history"): fact_history,
    ("DELETE", "/v1/facts/{key}"): fact_delete,
    ("GET", "/v1/memories"): memories_listing,
    ("POST", "/v1/memories"): memory_add,
    ("PUT", "/v1/memories/{memory_id}"): memory_put,
    ("DELETE", "/v1/memories/{memory_id}"): memory_delete,
    ("GET", "/v1/memories/said"): said_listing,
    ("PATCH", "/v1/memories/said/{memory_id}"): said_patch,
    ("DELETE", "/v1/memories/said/{memory_id}"): said_delete,
    ("POST", "/v1/memory/recall"): recall,
    ("POST", "/v1/memory/semantic_recall"): semantic_recall,
    ("GET", "/v1/episodes"): episodes_listing,
    ("GET", "/v1/conversations"): conversations_listing,
    ("GET", "/v1/conversations/{conversation_id}"): conversation_get,
    ("DELETE", "/v1/conversations/{conversation_id}"): conversation_delete,
    ("POST", "/v1/conversations/forget"): conversations_forget,
    ("GET", "/dashboard"): no_memory(303),
    ("POST", "/dashboard/logout"): no_memory(303),
    ("GET", "/dashboard/facts"): dashboard_facts,
    ("POST", "/dashboard/facts"): dashboard_fact_save,
    ("POST", "/dashboard/facts/{key}/delete"): dashboard_fact_delete,
    ("POST", "/dashboard/facts/forget-sources"): dashboard_forget_sources,
    ("POST", "/dashboard/memories"): dashboard_memory_add,
    ("POST", "/dashboard/memories/{memory_id}"): dashboard_memory_edit,
    ("POST", "/dashboard/memories/{memory_id}/forget"): dashboard_memory_forget,
    ("POST", "/dashboard/memories/said/{memory_id}"): dashboard_said_edit,
    ("POST", "/dashboard/memories/said/{memory_id}/forget"): dashboard_said_forget,
    ("GET", "/dashboard/audit"): dashboard_audit,
    ("GET", "/dashboard/audit/{audit_id}"): dashboard_audit_row,
    ("GET", "/dashboard/episodes"): dashboard_episodes,
    ("POST", "/dashboard/episodes/forget"): dashboard_episodes_forget,
    ("GET", "/dashboard/chat"): dashboard_chat,
    ("GET", "/dashboard/chat/{conversation_id}"): dashboard_chat_conversation,
    ("GET", "/dashboard/chat/turns/{audit_id}/memory"): dashboard_turn_memory,
    ("POST", "/dashboard/chat/send"): dashboard_send,
    ("GET", "/dashboard/import"): dashboard_import,
    ("POST", "/dashboard/import"): dashboard_import_upload,
    ("GET", "/mcp"): mcp,
}


def test_every_route_as_the_other_person_leaks_nothing_and_changes_nothing_of_theirs(world):
    routes = set(_endpoints(world.client.app))
    assert routes == set(MATRIX), {
        "routes the matrix lacks": sorted(routes - set(MATRIX)),
        "entries for routes that are gone": sorted(set(MATRIX) - routes),
    }
    for (method, path), check in MATRIX.items():
        check(world, method, path)
    # A's memory, after everything B did
    a = {"Authorization": f"Bearer {TEST_TOKEN}"}
    facts = world.client.get("/v1/facts", headers=a).json()["facts"]
    kept_facts = {f["key"]: f["value"] for f in facts}
    assert kept_facts["dog_name"] == "Marmaduke" and kept_facts["trip"] == "Zanzibar"
    [kept] = world.client.get("/v1/conversations", headers=a).json()["conversations"]
    assert kept["id"] == world.a_conversation
    [episode] = world.client.get("/v1/episodes", headers=a).json()["episodes"]
    assert episode["id"] == world.a_episode
    [memory] = world.client.get("/v1/memories", headers=a).json()["memories"]
    assert memory["id"] == world.a_memory and "Marmaduke" in memory["text"]
    said = world.client.get("/v1/memories/said", headers=a).json()["memories"]
    assert said and any("Zanzibar" in m["text"] for m in said)
    assert all(m["edit_count"] == 0 for m in said)
    recalled = world.services.episodes.preview("Zanzibar spice market", scope=Scope(OWNER))
    assert [e.episode_id for e in recalled][:1] == [world.a_episode]


# -- MCP: every tool and resource as the other person ------------------------------------------
def _mcp_text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


MCP_TOOLS: dict[str, Callable[[World], dict[str, Any]]] = {
    "recall": lambda w: {"text": "where did I fly with my dog?"},
    "search": lambda w: {"query": "spice market Zanzibar"},
    "remember": lambda w: {"key": "dog_name", "text": "Rex"},
    "list_facts": lambda w: {},
    "set_fact": lambda w: {"key": "dog_name", "value": "Rex"},
    "delete_fact": lambda w: {"key": "trip"},  # A's key alone: not found for B
    "list_memories": lambda w: {},
    "remember_about_me": lambda w: {"text": "My dog Rex eats anything", "kind": "profile"},
    "forget_memory": lambda w: {"memory_id": w.a_memory},  # A's: not found
    "list_conversations": lambda w: {"matching": "spring"},
    "forget_conversation": lambda w: {"conversation_id": w.a_conversation},  # A's: not found
    "save_conversation": lambda w: {
        "messages": [
            {"role": "user", "content": B_SAYS},
            {"role": "assistant", "content": "ok"},
        ]
    },
}
# the tools that must refuse B (A's objects): the others answer with B's memory
MCP_REFUSED = {"delete_fact", "forget_conversation", "forget_memory"}
MCP_RESOURCES = {"caesar://facts", "caesar://episodes/recent"}


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_every_mcp_tool_and_resource_as_the_other_person(world, transport, tmp_path):
    """MCP as B through the real SDK client, over HTTP with B's token and over stdio as
    `caesar --person B mcp`: every tool and resource the server lists is in the tables above (a
    new one fails this), none answers with A's words, and A's objects are not found."""
    import anyio
    import httpx2
    from live_server import live_server
    from mcp import Client, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from memory_helpers import write_config

    async def as_b(client: Client) -> tuple[set[str], set[str]]:
        tools = {t.name for t in (await client.list_tools()).tools}
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        for name, arguments in MCP_TOOLS.items():
            result = await client.call_tool(name, arguments(world))
            said = _mcp_text(result)
            assert not [w for w in A_WORDS if w in said], (name, said)
            assert result.is_error is (name in MCP_REFUSED), (name, said)
        for uri in sorted(MCP_RESOURCES):
            text = str((await client.read_resource(uri)).contents[0].text)
            assert not [w for w in A_WORDS if w in text], (uri, text)
        return tools, resources

    async def over_http(url: str) -> tuple[set[str], set[str]]:
        headers = {"Authorization": f"Bearer {world.b}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            transport = streamable_http_client(f"{url}/mcp", http_client=http)
            async with Client(transport, read_timeout_seconds=30) as client:
                return await as_b(client)

    async def over_stdio(params: StdioServerParameters) -> tuple[set[str], set[str]]:
        async with Client(params, read_timeout_seconds=60) as client:
            return await as_b(client)

    if transport == "http":
        with live_server(world.services) as url:
            tools, resources = anyio.run(over_http, url)
    else:
        config = write_config(tmp_path / "caesar.toml", world.services.settings)
        params = StdioServerParameters(
            command=str(Path(sys.executable).parent / "caesar"),
            args=["--person", "B", "mcp", "--no-workers"],
            env={**os.environ, "CAESAR_CONFIG": str(config), "HF_HUB_OFFLINE": "1"},
        )
        tools, resources = anyio.run(over_stdio, params)
    assert tools == set(MCP_TOOLS), tools ^ set(MCP_TOOLS)
    assert resources == MCP_RESOURCES, resources ^ MCP_RESOURCES
    a = {"Authorization": f"Bearer {TEST_TOKEN}"}
    facts = world.client.get("/v1/facts", headers=a).json()["facts"]
    assert {f["key"]: f["value"] for f in facts}["trip"] == "Zanzibar"
    [memory] = world.client.get("/v1/memories", headers=a).json()["memories"]
    assert memory["id"] == world.a_memory
    [kept] = world.client.get("/v1/conversations", headers=a).json()["conversations"]
    assert kept["id"] == world.a_conversation


def test_a_chat_not_summarised_yet_is_recalled_by_time_for_its_own_person_only(world):
    # Before the summariser reaches it (it waits for quiet), a chat is recalled by its date
    # from the conversations table and its latest row (memory/conversations.py): that path
    # is scoped by person as the episodes' is.
    a = {"Authorization": f"Bearer {TEST_TOKEN}"}
    world.llm.replies.append("The spice market opens at nine.")
    fresh = world.client.post(
        "/v1/chat",
        json={"message": "Back from Zanzibar: Marmaduke loved the spice market."},
        headers=a,
    )
    assert fresh.status_code == 200, fresh.text
    today = {"message": "What did we talk about today?"}
    for_b = world.call("POST", "/v1/chat", json=today)
    assert fresh.json()["audit_id"] not in for_b.json()["recalled"]
    _prompt_holds_nothing_of_a(world)
    preview = world.call("POST", "/v1/memory/recall", json={"query": today["message"]}).json()
    assert all(e["audit_log_id"] != fresh.json()["audit_id"] for e in preview["episodes"])
    # A's own turn brings it: the check above could fail
    for_a = world.client.post("/v1/chat", json=today, headers=a)
    assert fresh.json()["audit_id"] in for_a.json()["recalled"]
    assert "Marmaduke loved the spice market" in str(world.llm.requests[-1]["json"])
