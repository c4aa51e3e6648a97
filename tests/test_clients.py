"""The clients people run (issue #26): Open WebUI's recorded requests replayed against a live
caesar, with its default native tool calling; background requests are answered and never
remembered; `X-OpenWebUI-Chat-Id` names the conversation."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_server import live_server
from memory_helpers import events
from sqlalchemy import inspect, select, text

from caesar import audit
from caesar.api.background import background_task
from caesar.db.models import Conversation, EpisodeSummary, Fact
from caesar.workers import run_until_caught_up

RECORDING = (
    Path(__file__).resolve().parents[2] / "shared/data/clients/openwebui-0.12.4-requests.jsonl"
)
TASK = "### Task"
# Open WebUI's built-in tools, as its default ("native") function calling sends them with
# every chat request; the recording was made with legacy calling, so it lacks them.
OPENWEBUI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_web",
            "description": "Search the public web for information.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_current_timestamp",
            "description": "Get the current Unix timestamp in seconds.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]
SENT_HEADERS = ("content-type", "user-agent", "x-openwebui-")


def recorded() -> list[dict[str, Any]]:
    return [json.loads(line) for line in RECORDING.read_text().splitlines() if line.strip()]


def is_task(request: dict[str, Any]) -> bool:
    messages = (request.get("body") or {}).get("messages") or []
    return bool(messages) and str(messages[-1]["content"]).startswith(TASK)


def model_reply(body: dict, protocol: str) -> str:
    """The provider's model: JSON for Open WebUI's tasks, a plain reply otherwise."""
    said = str(body["messages"][-1]["content"])
    if "title" in said[:80]:
        return '{"title": "Dog names"}'
    if "tags" in said[:80]:
        return '{"tags": ["Pets"]}'
    if said.startswith(TASK):
        return '{"follow_ups": ["What breed is Biscuit?"]}'
    return "Nice to meet you, Dana! Biscuit is a lovely name for a dog."


def replay(url: str, token: str | None = None) -> list[httpx.Response]:
    """Every recorded request, in order, with Open WebUI's headers; its chat turns carry the
    tools native mode sends."""
    out = []
    with httpx.Client(base_url=url, timeout=30) as client:
        for r in recorded():
            headers = {k: v for k, v in r["headers"].items() if k.lower().startswith(SENT_HEADERS)}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            body = r.get("body")
            if body is not None and not is_task(r):
                body = {**body, "tools": OPENWEBUI_TOOLS}
            response = client.request(r["method"], r["path"], headers=headers, json=body)
            if body is not None and body.get("stream"):
                response.read()
            out.append(response)
    return out


def learn(services: Any) -> None:
    for name in ("memory.extract", "memory.summarise", "memory.passages", "semantic.index"):
        run_until_caught_up(services.workers[name])


def every_stored_text(services: Any) -> str:
    """Every row of every table, as text: facts, episodes, windows, word indexes, chunks,
    recall rows and the audit log."""
    with services.db.read() as session:
        names = inspect(session.get_bind()).get_table_names()
        return "\n".join(
            str(tuple(row))
            for name in names
            for row in session.execute(text(f'SELECT * FROM "{name}"'))
        )


@pytest.fixture
def learning(make_services, db_url):
    def make(route: str = "local:test-model") -> Any:
        return make_services(
            database_url=db_url,
            gateway={
                "routes": {
                    "chat": route,
                    "memory_extract": "offline:patterns",
                    "memory_summarise": "offline:textrank",
                }
            },
            memory={"episodes_summarise": {"enabled": True}, "facts_extract": {"enabled": True}},
            semantic={"index_enabled": True},
        )

    return make


def test_open_webui_with_its_defaults_chats_and_only_its_users_turns_are_remembered(learning, llm):
    services = learning()
    llm.reply = model_reply
    with live_server(services) as url:
        responses = replay(url)
    assert [r.status_code for r in responses] == [200] * len(responses)
    tasks = [r for r in recorded() if is_task(r)]
    turns = [r for r in recorded() if r.get("body") and not is_task(r)]
    # the user's turns had Open WebUI's tools passed to the model
    sent = [
        q["json"]
        for q in llm.requests
        if not str(q["json"]["messages"][-1]["content"]).startswith(TASK)
    ]
    assert len(sent) == len(turns) and all(q["tools"] == OPENWEBUI_TOOLS for q in sent)
    # a background request's prompt holds no memory: only what Open WebUI sent
    for q in llm.requests:
        said = q["json"]["messages"]
        if str(said[-1]["content"]).startswith(TASK):
            assert said[0]["role"] == "user" and "caesar" not in json.dumps(said)
            assert q["json"]["max_tokens"] <= 200  # the task kind's short limit
    background = events(services, audit.CHAT_BACKGROUND)
    assert sorted(b.payload["task"] for b in background) == sorted(
        background_task(r["body"]["messages"][-1]["content"], None, ["### Task:"]).kind  # type: ignore[union-attr]
        for r in tasks
    )
    assert len(events(services, audit.CHAT_COMPLETED)) == len(turns)

    learn(services)
    with services.db.read() as session:
        keys = set(session.scalars(select(Conversation.key)))
        episodes = session.scalars(select(EpisodeSummary.summary)).all()
        facts = {f.key: f.value for f in session.scalars(select(Fact))}
    chat_ids = {r["headers"]["X-OpenWebUI-Chat-Id"] for r in turns}
    assert keys == chat_ids  # Open WebUI's chat id named each conversation
    assert len(episodes) == 2
    assert facts.get("dog_name") == "Biscuit"  # learned from the user's own turn
    assert TASK not in every_stored_text(services)

    # and what is recalled into a later turn is the user's, never a background request's
    llm.replies.append("Biscuit.")
    with live_server(services) as url:
        page = httpx.get(f"{url}/dashboard/audit", params={"event_type": audit.CHAT_BACKGROUND})
        assert page.status_code == 200 and "chat.background" in page.text
        assert "### Task" not in page.text and "Task:" not in page.text
        httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": "caesar", "messages": [{"role": "user", "content": "my dog Biscuit"}]},
            timeout=30,
        )
    assert TASK not in llm.requests[-1]["json"]["messages"][0]["content"]
    assert "Biscuit" in llm.requests[-1]["json"]["messages"][0]["content"]


def test_a_provider_without_tools_answers_and_says_what_it_ignored(make_services, llm, tmp_path):
    """The embedded model's chat template has no tools (llama.cpp says so): Open WebUI's tools
    are dropped, with a header and a log line, not a 400."""
    services = make_services(
        gateway={
            "providers": {"embedded": {"kind": "gguf", "max_tokens": 8}},
            "routes": {"chat": "embedded:smollm2"},
        }
    )
    with live_server(services) as url:
        response = httpx.post(
            f"{url}/v1/chat/completions",
            json={
                "model": "caesar",
                "messages": [{"role": "user", "content": "Hi! My dog is called Biscuit."}],
                "tools": OPENWEBUI_TOOLS,
                "tool_choice": "auto",
                "response_format": {"type": "text"},
            },
            timeout=60,
        )
    assert response.status_code == 200, response.text
    assert response.headers["x-caesar-ignored"] == "tools, tool_choice"
    assert response.json()["choices"][0]["message"]["content"]
    assert llm.requests == []


def test_each_ignored_parameter_is_logged_once_per_token_not_per_request(make_services, caplog):
    """Open WebUI sends its tools with every request: the log names each parameter the
    embedded model cannot take once for each token, at the default level (issue #49)."""
    from caesar.api import routes_chat
    from caesar.people import add

    services = make_services(
        api_token="owner-token-0123456789abcdef",
        gateway={
            "providers": {"embedded": {"kind": "gguf", "max_tokens": 4}},
            "routes": {"chat": "embedded:smollm2"},
        },
    )
    with services.db.write() as session:
        _ben, ben_token = add(session, services.audit, "Ben")
    routes_chat._SAID_IGNORED.clear()
    body = {
        "model": "caesar",
        "messages": [{"role": "user", "content": "Hi!"}],
        "tools": OPENWEBUI_TOOLS,
    }
    caplog.set_level(logging.WARNING, logger="caesar.api.routes_chat")
    with live_server(services) as url:
        for token in ("owner-token-0123456789abcdef", "owner-token-0123456789abcdef", ben_token):
            response = httpx.post(
                f"{url}/v1/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {token}"},
                timeout=60,
            )
            assert response.status_code == 200 and response.headers["x-caesar-ignored"] == "tools"
    said = [r.getMessage() for r in caplog.records if "cannot take" in r.getMessage()]
    assert len(said) == 2 and all("'tools'" in line for line in said)  # the owner's, Ben's
    assert not any(ben_token in line or "owner-token" in line for line in said)


def test_background_markers_are_configurable(make_services, llm):
    services = make_services(clients={"background_markers": ["Summarise this chat:"]})
    llm.replies += ["A chat about dogs.", "Hello!"]
    with live_server(services) as url:
        for said in ("Summarise this chat: my dog Biscuit", "### Task: not a marker here"):
            httpx.post(
                f"{url}/v1/chat/completions",
                json={"model": "caesar", "messages": [{"role": "user", "content": said}]},
                timeout=30,
            )
    [background] = events(services, audit.CHAT_BACKGROUND)
    assert background.payload["task"] == "task"
    [turn] = events(services, audit.CHAT_COMPLETED)
    assert turn.payload["messages"][-1]["content"] == "### Task: not a marker here"


def test_a_failed_background_request_leaves_a_row_and_a_clear_status(services, llm):
    llm.fail_next("status", status=500, count=5)
    with live_server(services) as url:
        response = httpx.post(
            f"{url}/v1/chat/completions",
            json={
                "model": "caesar",
                "messages": [{"role": "user", "content": "### Task:\nGenerate a concise title"}],
            },
            timeout=30,
        )
    assert response.status_code in (502, 503)
    [row] = events(services, audit.CHAT_BACKGROUND)
    assert row.payload["task"] == "title" and row.payload["status"] == response.status_code
    assert events(services, audit.CHAT_FAILED) == []


def _owui_reads(content: str) -> dict[str, Any]:
    """What Open WebUI takes from a task's reply: the JSON between the first { and the last }."""
    return dict(json.loads(content[content.index("{") : content.rindex("}") + 1]))


def test_with_the_embedded_model_its_background_tasks_are_answered_offline(make_services, llm):
    """The embedded 135M model answered titles with the template's placeholder (issue #49):
    with it on the chat route, a client's title, tags and follow-ups are answered without it,
    in the JSON Open WebUI reads, naming what the chat is about."""
    services = make_services(
        gateway={
            "providers": {"embedded": {"kind": "gguf", "max_tokens": 8}},
            "routes": {"chat": "embedded:smollm2"},
        }
    )
    assert services.settings.gateway.routes["chat_background"] == "offline:tasks"
    tasks = [r for r in recorded() if is_task(r)]
    read: dict[str, list[dict[str, Any]]] = {}
    with live_server(services) as url, httpx.Client(base_url=url, timeout=30) as client:
        for r in tasks:
            headers = {k: v for k, v in r["headers"].items() if k.lower().startswith(SENT_HEADERS)}
            response = client.post(r["path"], headers=headers, json=r["body"])
            assert response.status_code == 200, response.text
            content = response.json()["choices"][0]["message"]["content"]
            said = str(r["body"]["messages"][-1]["content"])
            kind = background_task(said, None, [TASK]).kind  # type: ignore[union-attr]
            read.setdefault(kind, []).append(_owui_reads(content))
        streamed = client.post(
            "/v1/chat/completions",
            json={**tasks[0]["body"], "stream": True},
            headers={"content-type": "application/json"},
        )
    assert set(read) == {"title", "tags", "follow_ups"}
    first_message = "Hi! My name is Dana and my dog is called Biscuit."
    for title in (t["title"] for t in read["title"]):
        assert title and "concise title" not in title.lower() and title != first_message
    assert "Biscuit" in read["title"][0]["title"]  # the subject, not "Stock Trends"
    for tags in (t["tags"] for t in read["tags"]):
        assert tags and all(isinstance(t, str) and not t.startswith("tag") for t in tags)
    answered = [t["follow_ups"] for t in read["follow_ups"]]
    assert all(isinstance(f, list) for f in answered) and any(answered)
    assert streamed.status_code == 200 and "title" in streamed.text
    rows = events(services, audit.CHAT_BACKGROUND)
    assert len(rows) == len(tasks) + 1 and {r.payload["provider"] for r in rows} == {"offline"}
    assert events(services, audit.CHAT_COMPLETED) == [] and llm.requests == []


@pytest.mark.parametrize("background", [None, "offline:tasks"])
def test_a_task_the_offline_answers_cannot_give_goes_to_the_chat_model(
    make_services, llm, background
):
    """An image prompt is not a title: it goes to the chat model, whether `chat_background`
    is that model (an LLM on the chat route, as every task did before issue #49) or routed
    offline, which cannot write one."""
    routes = {"chat_background": background} if background else {}
    services = make_services(gateway={"routes": routes})
    assert services.settings.gateway.routes["chat_background"] == (
        background or services.settings.gateway.routes["chat"]
    )
    llm.replies.append("A watercolour of a beagle.")
    with live_server(services) as url:
        response = httpx.post(
            f"{url}/v1/chat/completions",
            json={
                "model": "caesar",
                "messages": [
                    {
                        "role": "user",
                        "content": "### Task:\nGenerate a detailed prompt for an image generation task",
                    }
                ],
            },
            timeout=30,
        )
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "A watercolour of a beagle."
    [row] = events(services, audit.CHAT_BACKGROUND)
    assert row.payload["task"] == "image_prompt" and row.payload["provider"] != "offline"
