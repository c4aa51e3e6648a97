"""The MCP server (issue #14), driven by the official `mcp` SDK's own client over both
transports: `caesar mcp` as a stdio subprocess, and streamable HTTP against a live `caesar
serve` (tests/live_server.py) behind the API token."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import crashkit
import httpx2
import pytest
from conftest import OWNER, PROVIDER_KEY, TEST_TOKEN
from live_server import live_server
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from memory_helpers import events
from sqlalchemy import func, select

from caesar import audit, people
from caesar.clock import utcnow
from caesar.config import Settings
from caesar.db.models import AuditLog, Conversation, Fact
from caesar.mcp_server import build
from caesar.memory import conversations
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up

CAESAR = str(Path(sys.executable).parent / "caesar")
READ_ONLY = {"recall", "search", "list_facts", "list_memories", "list_conversations"}
TOOLS = READ_ONLY | {
    "remember",
    "set_fact",
    "delete_fact",
    "remember_about_me",
    "forget_memory",
    "forget_conversation",
    "save_conversation",
}
KAYAK = [
    {"role": "user", "content": "I bought a red kayak and paddle on Lake Tahoe at dawn."},
    {"role": "assistant", "content": "Lovely. Dawn on Tahoe is calm; wear a bright vest."},
    {"role": "user", "content": "Which vest colour would you pick?"},
    {"role": "assistant", "content": "Fluorescent orange: boats see it from far away."},
]


def _offline(make_services: Any, tmp_path: Path, **extra: Any) -> tuple[Any, dict[str, Any]]:
    """Services on a fresh database with the offline memory routes (no LLM), and the same
    settings as a plain dict for a subprocess."""
    settings = crashkit.settings_dict(
        tmp_path / "home",
        f"sqlite:///{tmp_path / 'caesar.db'}",
        "http://127.0.0.1:9/v1",
        PROVIDER_KEY,
        **extra,
    )
    settings["gateway"]["routes"].update(
        memory_extract="offline:patterns", memory_summarise="offline:textrank"
    )
    return make_services(settings=Settings(**settings)), settings


def _learn(services: Any) -> None:
    for name in ("memory.extract", "memory.summarise", "memory.passages"):
        run_until_caught_up(services.workers[name])


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)  # type: ignore[no-any-return]


@asynccontextmanager
async def _http(url: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(f"{url}/mcp", http_client=http)
        async with Client(transport, read_timeout_seconds=30) as client:
            yield client


@pytest.fixture
def stdio(make_services: Any, tmp_path: Path) -> Iterator[tuple[Any, StdioServerParameters]]:
    services, settings = _offline(make_services, tmp_path)
    params = StdioServerParameters(
        command=CAESAR, args=["mcp", "--no-workers"], env=crashkit.settings_env(settings)
    )
    yield services, params


def test_stdio_tools_remember_recall_and_a_saved_conversation(stdio):
    services, params = stdio

    async def session() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert set(listed) == TOOLS
            for name, tool in listed.items():
                assert tool.description and tool.annotations is not None
                assert tool.annotations.read_only_hint is (name in READ_ONLY), name
            assert listed["forget_conversation"].annotations.destructive_hint is True

            kept = _data(await client.call_tool("remember", {"key": "dog_name", "text": "Biscuit"}))
            note = _data(
                await client.call_tool("remember", {"text": "I am allergic to penicillin"})
            )
            assert kept["key"] == "dog_name" and note["key"].startswith("note_i_am_allergic")
            recalled = _data(await client.call_tool("recall", {"text": "what is my dog called?"}))
            assert {"key": "dog_name", "value": "Biscuit"} in recalled["facts"]
            facts = (await client.read_resource("caesar://facts")).contents[0].text
            assert "dog_name: Biscuit" in facts and "penicillin" in facts

            saved = _data(
                await client.call_tool(
                    "save_conversation",
                    {"messages": KAYAK, "happened_at": "2026-11-20T08:00:00Z"},
                )
            )
            again = _data(
                await client.call_tool(
                    "save_conversation",
                    {"messages": KAYAK, "happened_at": "2026-11-20T08:00:00Z"},
                )
            )
            assert saved["conversation_id"] and not saved["already_saved"]
            await anyio.to_thread.run_sync(_learn, services)  # the workers, as `caesar worker`
            found = _data(
                await client.call_tool("recall", {"text": "What colour vest for my kayak?"})
            )
            [episode] = found["episodes"]
            assert episode["conversation_id"] == saved["conversation_id"]
            said = " ".join(t["text"] for e in episode["excerpts"] for t in e["turns"])
            assert "Fluorescent orange" in said
            recent = json.loads(
                (await client.read_resource("caesar://episodes/recent")).contents[0].text
            )
            assert [c["id"] for c in recent] == [saved["conversation_id"]]
            assert again == {**saved, "already_saved": True}

    anyio.run(session)
    rows = events(services, audit.MCP_TOOL_CALLED)
    assert {r.payload["tool"] for r in rows} >= {"remember", "recall", "save_conversation"}
    assert all(r.payload["source"] == "mcp" and r.payload["transport"] == "stdio" for r in rows)
    # argument names, never values: what a client sent is not in the log twice
    assert not any("Fluorescent" in str(r.payload) or "Biscuit" in str(r.payload) for r in rows)
    with services.db.read() as session_:
        assert session_.scalar(select(func.count()).select_from(Conversation)) == 1


def test_stdio_bad_input_is_a_tool_error_and_changes_nothing(stdio):
    services, params = stdio

    async def session() -> list[Any]:
        async with Client(params, read_timeout_seconds=60) as client:
            results = [
                await client.call_tool("no_such_tool", {}),
                await client.call_tool("recall", {"text": "kayak", "top_k": "many"}),
                await client.call_tool("recall", {"text": "x" * 20_001}),
                await client.call_tool("set_fact", {"key": "Ça va", "value": "bien"}),
                await client.call_tool("forget_conversation", {"conversation_id": 424242}),
                await client.call_tool("save_conversation", {"messages": [{"role": "user"}]}),
                await client.call_tool("delete_fact", {"key": "never_set"}),
            ]
            # and the server is still there
            results.append(await client.call_tool("list_facts", {}))
            return results

    *bad, fine = anyio.run(session)
    assert all(r.is_error for r in bad)
    messages = [r.content[0].text for r in bad]
    assert "Unknown tool: no_such_tool" in messages[0]
    assert "top_k" in messages[1] and "valid integer" in messages[1]
    assert "at most 20000 characters" in messages[2]
    assert "invalid fact key" in messages[3]
    assert "no conversation with id 424242" in messages[4]
    assert "messages" in messages[5]
    assert "no fact with key 'never_set'" in messages[6]
    assert _data(fine) == {"facts": []}
    with services.db.read() as session_:
        assert session_.scalar(select(func.count()).select_from(Fact)) == 0
        assert session_.scalar(select(func.count()).select_from(Conversation)) == 0
    refused = [r.payload for r in events(services, audit.MCP_TOOL_CALLED) if not r.payload["ok"]]
    assert {p["tool"] for p in refused} >= {"set_fact", "forget_conversation", "delete_fact"}


@pytest.fixture
def served(make_services: Any, tmp_path: Path) -> Iterator[tuple[Any, str]]:
    services, _ = _offline(make_services, tmp_path, api_token=TEST_TOKEN)
    with live_server(services) as url:
        yield services, url


def test_http_needs_the_token_and_shares_the_api_services(served):
    services, url = served

    async def refused(token: str | None) -> int:
        async with httpx2.AsyncClient(timeout=10) as http:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            response = await http.post(
                f"{url}/mcp",
                headers={**headers, "Accept": "application/json, text/event-stream"},
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            )
            return response.status_code

    async def session() -> tuple[dict[str, Any], dict[str, Any], set[str]]:
        async with _http(url, TEST_TOKEN) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            set_ = _data(
                await client.call_tool("set_fact", {"key": "home_city", "value": "Lisbon"})
            )
            listed = _data(await client.call_tool("list_facts", {}))
            return set_, listed, names

    assert anyio.run(refused, None) == 401
    assert anyio.run(refused, "wrong-token-0000000000") == 401
    set_, listed, names = anyio.run(session)
    assert names == TOOLS
    assert set_["key"] == "home_city"
    assert [f["key"] for f in listed["facts"]] == ["home_city"]
    # the same facts the HTTP API serves
    api = httpx2.get(f"{url}/v1/facts", headers={"Authorization": f"Bearer {TEST_TOKEN}"}).json()
    assert [f["key"] for f in api["facts"]] == ["home_city"]
    [edit] = events(services, audit.FACT_USER_EDITED)
    assert edit.payload["value"] == "Lisbon"
    calls = events(services, audit.MCP_TOOL_CALLED)
    assert {c.payload["transport"] for c in calls} == {"http"}
    assert TEST_TOKEN not in str([c.payload for c in calls])


def test_http_forget_through_mcp_is_the_forget_of_the_api(served):
    services, url = served

    async def session() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with _http(url, TEST_TOKEN) as client:
            saved = _data(await client.call_tool("save_conversation", {"messages": KAYAK}))
            await anyio.to_thread.run_sync(_learn, services)
            listed = _data(await client.call_tool("list_conversations", {"matching": "kayak"}))
            forgot = _data(
                await client.call_tool(
                    "forget_conversation", {"conversation_id": saved["conversation_id"]}
                )
            )
            after = _data(
                await client.call_tool("search", {"query": "kayak vest Tahoe", "top_k": 5})
            )
            return listed, forgot, after

    listed, forgot, after = anyio.run(session)
    assert [c["turns"] for c in listed["conversations"]] == [1]
    assert forgot["conversations"] == 1 and forgot["audit_id"]
    assert after["conversations"] == []
    [row] = events(services, audit.MEMORY_FORGOTTEN)
    assert row.id == forgot["audit_id"]


def test_http_each_persons_token_is_their_own_memory(served):
    """Two people over MCP/HTTP, the real SDK client: each token reaches its person's memory,
    the same fact key holds each one's value, and one's conversation is not found by the
    other (issue #23)."""
    services, url = served
    with services.db.write() as session:
        anna, token = people.add(session, services.audit, "Anna")
        anna_id = anna.id

    async def as_(who: str, key: str, value: str) -> tuple[dict[str, Any], dict[str, Any]]:
        async with _http(url, who) as client:
            await client.call_tool("set_fact", {"key": key, "value": value})
            saved = _data(await client.call_tool("save_conversation", {"messages": KAYAK}))
            return saved, _data(await client.call_tool("list_facts", {}))

    async def forget_as(who: str, conversation_id: int) -> Any:
        async with _http(url, who) as client:
            return await client.call_tool(
                "forget_conversation", {"conversation_id": conversation_id}
            )

    mine, my_facts = anyio.run(as_, TEST_TOKEN, "dog_name", "Biscuit")
    hers, her_facts = anyio.run(as_, token, "dog_name", "Rex")
    assert [(f["key"], f["value"]) for f in my_facts["facts"]] == [("dog_name", "Biscuit")]
    assert [(f["key"], f["value"]) for f in her_facts["facts"]] == [("dog_name", "Rex")]
    assert not hers["already_saved"]  # the same conversation, saved by another person
    refused = anyio.run(forget_as, token, mine["conversation_id"])
    assert refused.is_error and "no conversation" in refused.content[0].text
    with services.db.read() as session:
        kinds = session.execute(select(Conversation.person_id).order_by(Conversation.id)).scalars()
        assert list(kinds) == [OWNER, anna_id]
    with services.db.read() as session:
        calls = session.execute(
            select(AuditLog.person_id, AuditLog.payload).where(
                AuditLog.event_type == audit.MCP_TOOL_CALLED
            )
        ).all()
    assert {person for person, _payload in calls} == {OWNER, anna_id}
    assert token not in str([payload for _person, payload in calls])


def test_stdio_as_a_person(stdio, tmp_path):
    services, params = stdio
    with services.db.write() as session:
        anna_id = people.add(session, services.audit, "Anna")[0].id
    as_anna = StdioServerParameters(
        command=params.command, args=["--person", "Anna", *params.args], env=params.env
    )

    async def session() -> None:
        async with Client(as_anna, read_timeout_seconds=60) as client:
            await client.call_tool("remember", {"key": "dog_name", "text": "Rex"})

    anyio.run(session)
    assert services.facts.list_all(scope=Scope(OWNER)) == []
    assert [f.value for f in services.facts.list_all(scope=Scope(anna_id))] == ["Rex"]


# -- recall's dated memories (issue #45) ---------------------------------------------------------
PAINTED = [
    "I painted a sunset over the lake with my kids.",
    "I painted a portrait of my grandmother in oils.",
    "I painted the neighbour's spaniel in watercolour.",
    "I painted a mural of sunflowers on the garden shed.",
]
FILLER = [
    ("We had a long week at work and the deadlines kept moving around.", "That sounds tiring."),
    ("The weather was grey most days but Sunday was sunny and warm.", "Nice to get some sun."),
    ("My neighbour's car alarm went off twice at night again.", "That must be annoying."),
]


def test_recall_carries_the_things_said_and_forget_memory_takes_their_id(make_services):
    """Four conversations about painting, each among turns about other things, and a budget
    that shows one or two in depth: the tool's conversations carry the memory lines the
    prompt would (`said`), and `forget_memory` forgets one by its id."""
    services = make_services(
        memory={
            "facts_extract": {"enabled": True},
            "episodes_summarise": {"enabled": True},
            "episodes_recall": {"prompt_chars": 1100, "said_share": 0.5},
        },
        gateway={
            "routes": {"memory_extract": "offline:patterns", "memory_summarise": "offline:textrank"}
        },
    )
    for weeks, painted in zip((4, 3, 2, 1), PAINTED, strict=True):
        messages: list[dict[str, str]] = []
        for user, reply in FILLER:
            messages += [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
        messages.append({"role": "user", "content": painted})
        with services.db.write() as session:
            conversations.add_finished(
                Scope(OWNER, session),
                services.audit,
                {"messages": messages, "reply": "What a lovely thing to paint."},
                utcnow() - timedelta(weeks=weeks),
            )
    _learn(services)

    async def session() -> dict[str, Any]:
        async with Client(build(services, transport="stdio", scope=Scope(OWNER))) as client:
            found = _data(await client.call_tool("recall", {"text": "What have I painted?"}))
            lines = [m for e in found["episodes"] for m in e["said"]]
            assert lines, found
            forgot = _data(await client.call_tool("forget_memory", {"memory_id": lines[0]["id"]}))
            return {"found": found, "lines": lines, "forgot": forgot}

    out = anyio.run(session)
    assert all(isinstance(e["said"], list) for e in out["found"]["episodes"])
    for line in out["lines"]:
        assert {"id", "text", "speaker", "said_at", "turn"} <= set(line)
    said_anywhere = " ".join(m["text"] for m in out["lines"])
    assert any(
        subject in said_anywhere for subject in ("sunset", "grandmother", "spaniel", "sunflowers")
    )
    first = out["lines"][0]["id"]
    assert out["forgot"] == {"forgotten": first}
    assert all(m.id != first for m in services.dated.list(scope=Scope(OWNER)))
