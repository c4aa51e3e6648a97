"""A client's tools pass through caesar (issue #26): through the gateway to the real openai and
anthropic SDKs (against the local wire server), translated both ways for Anthropic; and
through caesar's OpenAI endpoint to the real `openai` SDK's own tool loop."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from conftest import OWNER, PROVIDER_KEY
from live_server import live_server
from memory_helpers import events
from sqlalchemy import select

from caesar import audit
from caesar.config import GatewaySettings
from caesar.db.models import EpisodeSummary, Fact
from caesar.gateway import Gateway
from caesar.gateway.anthropic_provider import split_system
from caesar.gateway.base import Generation, ToolUse, join_tool_calls
from caesar.memory.scope import Scope
from caesar.workers import run_until_caught_up

PROTOCOLS = ["openai", "anthropic"]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
CALL = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lisbon"}}]}
ASKED = [{"role": "user", "content": "What is the weather in Lisbon?"}]


def gateway_for(llm: Any, protocol: str) -> Gateway:
    spec = {
        "kind": protocol,
        "base_url": llm.base_url if protocol == "openai" else llm.anthropic_base_url,
        "api_key": PROVIDER_KEY,
        "max_retries": 0,
        "timeout_seconds": 5,
    }
    return Gateway(GatewaySettings(providers={"p": spec}, routes={"chat": "p:model-x"}))


def with_tools(**more: Any) -> Generation:
    return Generation(tools=ToolUse(tools=(WEATHER,), **more))


# -- the gateway --------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_tool_call_comes_back_in_openais_shape(llm, protocol):
    llm.replies.append(CALL)
    done = gateway_for(llm, protocol).complete(ASKED, task="chat", generation=with_tools())
    assert done.finish_reason == "tool_calls"
    [call] = done.tool_calls or []
    assert call["type"] == "function" and call["id"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Lisbon"}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_streamed_tool_call_joins_into_the_same_call(llm, protocol):
    llm.replies.append(CALL)
    chunks = list(gateway_for(llm, protocol).stream(ASKED, task="chat", generation=with_tools()))
    pieces = [p for c in chunks for p in c.tool_calls or []]
    assert len(pieces) > 1  # really streamed: the arguments arrive in pieces
    [call] = join_tool_calls(pieces)
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Lisbon"}
    assert chunks[-1].finish_reason == "tool_calls" and chunks[-1].usage is not None


def test_openai_gets_the_tools_as_sent(llm):
    llm.replies.append("sunny")
    gateway = gateway_for(llm, "openai")
    schema = {"type": "json_object"}
    generation = with_tools(
        tool_choice="required", parallel_tool_calls=False, response_format=schema
    )
    gateway.complete(ASKED, task="chat", generation=generation)
    sent = llm.requests[-1]["json"]
    assert sent["tools"] == [WEATHER]
    assert sent["tool_choice"] == "required" and sent["parallel_tool_calls"] is False
    assert sent["response_format"] == schema


def test_anthropic_gets_the_tools_in_its_own_words(llm):
    llm.replies.append("sunny")
    choice = {"type": "function", "function": {"name": "get_weather"}}
    generation = with_tools(tool_choice=choice, parallel_tool_calls=False)
    gateway_for(llm, "anthropic").complete(ASKED, task="chat", generation=generation)
    sent = llm.requests[-1]["json"]
    assert sent["tools"] == [
        {
            "name": "get_weather",
            "description": "The weather in a city now",
            "input_schema": WEATHER["function"]["parameters"],
        }
    ]
    assert sent["tool_choice"] == {
        "type": "tool",
        "name": "get_weather",
        "disable_parallel_tool_use": True,
    }


def test_a_tool_loop_in_the_history_becomes_anthropic_blocks():
    loop = [
        {"role": "system", "content": "memory"},
        {"role": "user", "content": "Weather in Lisbon and Porto?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Porto"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny, 24 C"},
        {"role": "tool", "tool_call_id": "c2", "content": "cloudy, 19 C"},
    ]
    system, turns = split_system(loop)  # type: ignore[arg-type]
    assert system == "memory"
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert [b["input"] for b in turns[1]["content"]] == [{"city": "Lisbon"}, {"city": "Porto"}]
    # both results in one user turn, each naming its call
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "sunny, 24 C"},
        {"type": "tool_result", "tool_use_id": "c2", "content": "cloudy, 19 C"},
    ]


# -- caesar's OpenAI endpoint -------------------------------------------------------------------
def weather_then_answer(body: dict, protocol: str) -> str | dict:
    """The provider's model: calls the tool until it has the result, then answers from it."""
    results = [m for m in body["messages"] if m.get("role") == "tool"]
    for m in body["messages"]:  # Anthropic carries results as tool_result blocks
        if isinstance(m.get("content"), list):
            results += [b for b in m["content"] if b.get("type") == "tool_result"]
    if not results:
        return CALL
    return f"It is {results[-1]['content']} in Lisbon today, so bring sunglasses."


def sdk(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=20)


def run_tool_loop(client: openai.OpenAI, question: str, stream: bool) -> tuple[str, list[Any]]:
    """The openai SDK's tool loop, as an agent runs it: call, run the tool, send the result."""
    messages: list[Any] = [{"role": "user", "content": question}]
    for _ in range(4):
        if stream:
            with client.chat.completions.stream(
                model="caesar", messages=messages, tools=[WEATHER]
            ) as events_:
                for _event in events_:
                    pass
                done = events_.get_final_completion()
        else:
            done = client.chat.completions.create(
                model="caesar", messages=messages, tools=[WEATHER]
            )
        choice = done.choices[0]
        if choice.finish_reason != "tool_calls":
            return choice.message.content or "", messages
        messages.append(choice.message.model_dump(exclude_none=True))
        for call in choice.message.tool_calls or []:
            city = json.loads(call.function.arguments)["city"]
            assert city == "Lisbon"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 24 C"})
    raise AssertionError("the tool loop did not finish")


@pytest.fixture
def learning(make_services, db_url):
    return lambda route: make_services(
        database_url=db_url,
        gateway={
            "routes": {
                "chat": route,
                "memory_extract": "offline:patterns",
                "memory_summarise": "offline:textrank",
            }
        },
        memory={"episodes_summarise": {"enabled": True}, "facts_extract": {"enabled": True}},
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("route", ["local:test-model", "claude:claude-x"])
def test_an_agents_tool_loop_completes_and_memory_holds_the_final_exchange(
    learning, llm, route, stream
):
    services = learning(route)
    services.facts.set_by_operator("city", "Lisbon", scope=Scope(OWNER))
    llm.reply = weather_then_answer
    with live_server(services) as url:
        reply, _ = run_tool_loop(sdk(url), "What is the weather where I live?", stream)
    assert reply == "It is sunny, 24 C in Lisbon today, so bring sunglasses."
    # memory went in once per round, the same both times
    prompts = [r["json"].get("system") or r["json"]["messages"][0]["content"] for r in llm.requests]
    assert len(prompts) == 2 and prompts[0] == prompts[1] and "Lisbon" in prompts[0]
    [round1] = events(services, audit.CHAT_TOOL_CALLS)
    assert [c["name"] for c in round1.payload["tool_calls"]] == ["get_weather"]
    [turn] = events(services, audit.CHAT_COMPLETED)
    assert turn.payload["messages"] == [
        {"role": "user", "content": "What is the weather where I live?"}
    ]
    assert turn.payload["reply"] == reply
    assert turn.payload["memory"]["tool_round"] is True
    assert [m["role"] for m in turn.payload["tool_exchange"]] == ["assistant", "tool"]
    for name in ("memory.extract", "memory.summarise"):
        run_until_caught_up(services.workers[name])
    with services.db.read() as session:
        [summary] = session.scalars(select(EpisodeSummary.summary)).all()
        facts = {f.key: f.value for f in session.scalars(select(Fact))}
    assert "sunglasses" in summary  # the exchange with its final reply
    assert "24 C" not in json.dumps(facts)  # a tool's result is no fact about the operator


def test_the_next_turn_after_a_tool_loop_continues_its_conversation(learning, llm):
    services = learning("local:test-model")
    llm.reply = weather_then_answer
    with live_server(services) as url:
        client = sdk(url)
        reply, messages = run_tool_loop(client, "What is the weather in Lisbon?", stream=False)
        llm.reply = lambda body, protocol: "Yes, all afternoon."
        messages += [
            {"role": "assistant", "content": reply},
            {"role": "user", "content": "Will it stay sunny?"},
        ]
        client.chat.completions.create(model="caesar", messages=messages, tools=[WEATHER])
    # the client resent the whole loop; the next turn still found its conversation
    turns = events(services, audit.CHAT_COMPLETED)
    assert len(turns) == 2 and turns[0].subject_id == turns[1].subject_id
    assert turns[1].payload["messages"][-3:] == [
        {"role": "user", "content": "What is the weather in Lisbon?"},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "Will it stay sunny?"},
    ]
    # the second turn's model saw the first loop's calls and results
    sent = llm.requests[-1]["json"]["messages"]
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "tool", "assistant", "user"]


def test_a_recall_is_counted_once_per_turn_not_per_tool_round(learning, llm):
    from memory_helpers import add_episode, days_ago

    services = learning("local:test-model")
    add_episode(services, "The operator asked about the weather in Lisbon for a trip", days_ago(3))
    llm.reply = weather_then_answer
    with live_server(services) as url:
        run_tool_loop(sdk(url), "What is the weather in Lisbon for my trip?", stream=False)
    recalled = events(services, audit.EPISODE_RECALLED)
    [round1] = events(services, audit.CHAT_TOOL_CALLS)
    turn = events(services, audit.CHAT_COMPLETED)[-1]  # the first is the episode's own chat
    assert recalled and {r.payload["turn_audit_id"] for r in recalled} == {round1.id}
    # the final round names the same episodes: the same memory, not counted again
    assert (
        turn.payload["memory"]["episodes_recalled"] == round1.payload["memory"]["episodes_recalled"]
    )


def test_a_tool_call_streams_through_caesar_in_openais_shape(services, llm):
    llm.replies.append(CALL)
    with live_server(services) as url:
        stream = sdk(url).chat.completions.create(
            model="caesar", messages=ASKED, tools=[WEATHER], stream=True
        )
        chunks = list(stream)
    pieces = [
        p.model_dump(exclude_none=True)
        for c in chunks
        for choice in c.choices
        for p in choice.delta.tool_calls or []
    ]
    [call] = join_tool_calls(pieces)
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Lisbon"}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"


def test_parameters_nothing_can_honour_still_get_a_400(services, llm):
    with live_server(services) as url:
        client = sdk(url)
        with pytest.raises(openai.BadRequestError, match="n must be 1"):
            client.chat.completions.create(model="caesar", messages=ASKED, n=2)
        with pytest.raises(openai.BadRequestError, match="logprobs"):
            client.chat.completions.create(model="caesar", messages=ASKED, logprobs=True)
    assert llm.requests == []


def test_a_history_ending_in_an_assistant_turn_is_refused(services, llm):
    with live_server(services) as url:
        with pytest.raises(openai.BadRequestError, match="tool result"):
            sdk(url).chat.completions.create(
                model="caesar", messages=[*ASKED, {"role": "assistant", "content": "hm"}]
            )
