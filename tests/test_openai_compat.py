"""POST /v1/chat/completions with the real `openai` SDK as the client, against caesar served
by a real uvicorn (tests/live_server.py), whose own provider is the local wire server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from conftest import OWNER, TEST_TOKEN
from live_server import live_server

from caesar.memory.scope import Scope


@pytest.fixture
def caesar_url(services: Any) -> Iterator[str]:
    with live_server(services) as url:
        yield url


def sdk(url: str, api_key: str = "unused") -> openai.OpenAI:
    # No retries: caesar's 503s are retryable, and the test wants to see the first answer.
    return openai.OpenAI(base_url=f"{url}/v1", api_key=api_key, max_retries=0, timeout=10)


def events(services: Any, event_type: str) -> list[Any]:
    from caesar import audit

    with services.db.read() as session:
        return list(audit.list_events(Scope(OWNER, session), event_type=event_type))


def test_completion(caesar_url, services, llm):
    llm.replies.append("caesar answers here")
    response = sdk(caesar_url).chat.completions.create(
        model="caesar",
        messages=[
            {"role": "system", "content": "Answer in English."},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "noted"},
            {"role": "user", "content": "second"},
        ],
    )
    assert response.choices[0].message.content == "caesar answers here"
    assert response.choices[0].message.role == "assistant"
    assert response.choices[0].finish_reason == "stop"
    assert response.model == "test-model"
    assert response.usage is not None and response.usage.completion_tokens == 3
    [row] = events(services, "chat.completed")
    assert response.id == f"chatcmpl-caesar-{row.id}"
    assert row.payload["reply"] == "caesar answers here"
    assert row.payload["messages"][-1] == {"role": "user", "content": "second"}
    # caesar's own system prompt first, then the client's turns, in order
    sent = llm.requests[-1]["json"]["messages"]
    assert sent[0]["role"] == "system" and "caesar" in sent[0]["content"]
    assert [m["content"] for m in sent[1:]] == ["Answer in English.", "first", "noted", "second"]


def test_content_parts_are_accepted(caesar_url, llm):
    response = sdk(caesar_url).chat.completions.create(
        model="caesar",
        messages=[{"role": "user", "content": [{"type": "text", "text": "in parts"}]}],
    )
    assert response.choices[0].message.content == "ok: in parts"


def test_stream(caesar_url, services, llm):
    llm.replies.append("a streamed reply in several pieces")
    stream = sdk(caesar_url).chat.completions.create(
        model="caesar", messages=[{"role": "user", "content": "stream please"}], stream=True
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "a streamed reply in several pieces"
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 1
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6
    [row] = events(services, "chat.completed")
    assert row.payload["reply"] == text
    # every chunk of one stream shares its id, and the next stream has another (issue #15)
    assert len({c.id for c in chunks}) == 1
    llm.replies.append("again")
    again = list(
        sdk(caesar_url).chat.completions.create(
            model="caesar", messages=[{"role": "user", "content": "once more"}], stream=True
        )
    )
    assert again[0].id != chunks[0].id


def test_a_clients_automatic_retries_are_marked_as_retries(caesar_url, services, llm):
    """Issue #15: the SDK retries a 503 twice, and each retry wrote another plain chat.failed."""
    llm.fail_next("status", count=3, status=500)
    client = openai.OpenAI(base_url=f"{caesar_url}/v1", api_key="unused", max_retries=2)
    with pytest.raises(openai.APIStatusError):
        client.chat.completions.create(model="caesar", messages=[{"role": "user", "content": "hi"}])
    failed = events(services, "chat.failed")
    assert [f.payload.get("client_retry") for f in failed] == [None, 1, 2]


def test_unsupported_parameters_are_refused_not_dropped(caesar_url, llm):
    with pytest.raises(openai.BadRequestError) as info:
        sdk(caesar_url).chat.completions.create(
            model="caesar", messages=[{"role": "user", "content": "hi"}], logprobs=True
        )
    assert "unsupported parameter(s): logprobs" in str(info.value)
    llm.replies.append("fine")
    # harmless ones pass, honoured ones reach the provider
    reply = sdk(caesar_url).chat.completions.create(
        model="caesar",
        messages=[{"role": "user", "content": "hi"}],
        user="me",
        temperature=0.1,
        stop="END",
    )
    assert reply.choices[0].message.content == "fine"
    sent = llm.requests[-1]["json"]
    assert (sent["temperature"], sent["stop"]) == (0.1, ["END"])


def test_models_lists_caesar(caesar_url):
    models = sdk(caesar_url).models.list()
    assert [m.id for m in models.data] == ["caesar"]


@pytest.mark.parametrize(
    ("fault", "options", "status"),
    [
        ("status", {"status": 500}, 503),
        ("status", {"status": 400}, 502),
        ("malformed", {}, 502),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_provider_failure_is_an_api_status_error(
    caesar_url, services, llm, fault, options, status, stream
):
    llm.fail_next(fault, **options)
    with pytest.raises(openai.APIStatusError) as info:
        result = sdk(caesar_url).chat.completions.create(
            model="caesar", messages=[{"role": "user", "content": "hi"}], stream=stream
        )
        if stream:
            list(result)  # type: ignore[arg-type]
    assert info.value.status_code == status
    body = info.value.body
    assert isinstance(body, dict) and body["provider"] == "local"  # the SDK unwraps "error"
    [row] = events(services, "chat.failed")
    assert row.payload["status"] == status


def test_timeout_is_504(make_services, llm):
    services = make_services(gateway={"providers": {"local": {"timeout_seconds": 0.3}}})
    llm.fail_next("delay", seconds=5)
    with live_server(services) as url, pytest.raises(openai.APIStatusError) as info:
        sdk(url).chat.completions.create(model="c", messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 504


def test_stream_breaking_mid_way_is_reported_in_band(caesar_url, services, llm):
    llm.replies.append("this reply will not arrive whole")
    llm.fail_next("broken_stream", chunks=3)
    stream = sdk(caesar_url).chat.completions.create(
        model="caesar", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    with pytest.raises(openai.APIError, match="provider 'local'"):
        list(stream)
    [row] = events(services, "chat.failed")
    assert row.payload["error_type"] == "ProviderUnavailable"
    assert events(services, "chat.completed") == []


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "assistant", "content": "I spoke last"}],
        [{"role": "user", "content": "   "}],
        [{"role": "user", "content": None}],
    ],
)
def test_bad_conversation_is_400(caesar_url, llm, messages):
    with pytest.raises(openai.BadRequestError, match="non-empty user message"):
        sdk(caesar_url).chat.completions.create(model="caesar", messages=messages)
    assert llm.requests == []


def test_empty_messages_is_422(caesar_url):
    with pytest.raises(openai.UnprocessableEntityError, match="messages"):
        sdk(caesar_url).chat.completions.create(model="caesar", messages=[])


def test_token_is_the_sdk_api_key(make_services, llm):
    services = make_services(api_token=TEST_TOKEN)
    with live_server(services) as url:
        ok = sdk(url, api_key=TEST_TOKEN).chat.completions.create(
            model="caesar", messages=[{"role": "user", "content": "hi"}]
        )
        assert ok.choices[0].message.content == "ok: hi"
        with pytest.raises(openai.AuthenticationError):
            sdk(url, api_key="wrong-token-0123456789").chat.completions.create(
                model="caesar", messages=[{"role": "user", "content": "hi"}]
            )


def test_client_leaving_mid_stream_still_leaves_an_audit_row(caesar_url, services, llm):
    import gc

    import httpx

    llm.replies.append("one two three four five six seven eight")
    llm.fail_next("delay", seconds=1.0, mid_stream=True, chunks=2)
    body = {"model": "caesar", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with httpx.stream("POST", f"{caesar_url}/v1/chat/completions", json=body, timeout=10) as r:
        for line in r.iter_lines():
            if '"content": "one' in line:
                break  # hang up after the first words
    deadline = time.monotonic() + 15
    rows: list[Any] = []
    while time.monotonic() < deadline and not rows:
        gc.collect()
        rows = events(services, "chat.failed")
        time.sleep(0.2)
    [row] = rows
    assert "client disconnected" in row.payload["error"]
    assert row.payload["partial_reply"].startswith("one")
    assert events(services, "chat.completed") == []
