"""Tests of FakeLLMServer, driven through the real ``openai`` and ``anthropic`` SDKs."""

from __future__ import annotations

import json

import anthropic
import httpx2
import openai
import pytest

from .llm_server import FakeLLMServer, fake_embedding

MSGS = [{"role": "user", "content": "hello there world"}]


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        yield s


def oai(server: FakeLLMServer, **kw) -> openai.OpenAI:
    kw.setdefault("max_retries", 0)
    kw.setdefault("timeout", 5)
    return openai.OpenAI(base_url=server.base_url, api_key="k", **kw)


def ant(server: FakeLLMServer, **kw) -> anthropic.Anthropic:
    kw.setdefault("max_retries", 0)
    kw.setdefault("timeout", 5)
    return anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="k", **kw)


def oai_chat(client: openai.OpenAI, **kw):
    return client.chat.completions.create(model="gpt-x", messages=MSGS, **kw)


def ant_msg(client: anthropic.Anthropic, **kw):
    kw.setdefault("max_tokens", 100)
    return client.messages.create(model="claude-x", messages=MSGS, **kw)


# --------------------------------------------------------------------------- happy paths


def test_lifecycle_and_urls():
    s = FakeLLMServer()
    try:
        assert s.base_url == f"http://127.0.0.1:{s.port}/v1"
        assert s.anthropic_base_url == f"http://127.0.0.1:{s.port}"
    finally:
        s.close()
    s.close()  # idempotent


def test_openai_non_stream(server):
    fmt = {"type": "json_object"}
    r = oai_chat(oai(server), response_format=fmt)
    assert r.object == "chat.completion"
    assert r.model == "gpt-x"
    assert r.id.startswith("chatcmpl-")
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == "ok: hello there world"
    assert r.choices[0].finish_reason == "stop"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (3, 4, 7)
    req = server.requests[-1]
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["authorization"] == "Bearer k"
    assert req["api_key"] == "k"
    assert req["protocol"] == "openai"
    assert req["json"]["response_format"] == fmt


def test_openai_stream_with_usage(server):
    server.reply = lambda body, protocol: "one two three four five six"
    chunks = list(oai_chat(oai(server), stream=True, stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three four five six"
    content_chunks = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content_chunks) >= 2
    finishes = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finishes == ["stop"]
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == 6
    assert chunks[-1].usage.prompt_tokens == 3


def test_openai_stream_without_usage(server):
    chunks = list(oai_chat(oai(server), stream=True))
    assert all(c.usage is None for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_openai_max_tokens_truncates(server):
    server.reply = lambda body, protocol: "a b c d e"
    r = oai_chat(oai(server), max_tokens=2)
    assert r.choices[0].message.content == "a b"
    assert r.choices[0].finish_reason == "length"


def test_embeddings_default_base64_and_float(server):
    client = oai(server)
    r = client.embeddings.create(model="emb", input=["alpha", "beta"])  # SDK asks for base64
    assert server.requests[-1]["json"]["encoding_format"] == "base64"
    assert [d.index for d in r.data] == [0, 1]
    assert r.data[0].embedding == fake_embedding("alpha", 8)
    assert r.data[1].embedding == fake_embedding("beta", 8)
    assert r.data[0].embedding != r.data[1].embedding
    assert r.model == "emb"
    assert r.usage.prompt_tokens == 2

    r2 = client.embeddings.create(model="emb", input="alpha", encoding_format="float")
    assert r2.data[0].embedding == fake_embedding("alpha", 8)

    server.embedding_dim = 4
    assert len(client.embeddings.create(model="emb", input="x").data[0].embedding) == 4
    assert (
        len(client.embeddings.create(model="emb", input="x", dimensions=3).data[0].embedding) == 3
    )


def test_models(server):
    assert [m.id for m in oai(server).models.list()] == ["gpt-fake", "claude-fake"]
    assert [m.id for m in ant(server).models.list()] == ["gpt-fake", "claude-fake"]


def test_anthropic_non_stream(server):
    m = ant_msg(ant(server), system="be nice")
    assert m.type == "message"
    assert m.role == "assistant"
    assert m.model == "claude-x"
    assert m.id.startswith("msg_")
    assert m.content[0].type == "text"
    assert m.content[0].text == "ok: hello there world"
    assert m.stop_reason == "end_turn"
    assert (m.usage.input_tokens, m.usage.output_tokens) == (5, 4)
    req = server.requests[-1]
    assert req["path"] == "/v1/messages"
    # NB: anthropic SDK 2.x sends api_key as "Authorization: Bearer", not "x-api-key".
    assert req["headers"].get("x-api-key") == "k" or req["headers"]["authorization"] == "Bearer k"
    assert "anthropic-version" in req["headers"]
    assert req["api_key"] == "k"
    assert req["protocol"] == "anthropic"


def test_anthropic_max_tokens(server):
    server.reply = lambda body, protocol: "a b c d e"
    m = ant_msg(ant(server), max_tokens=3)
    assert m.content[0].text == "a b c"
    assert m.stop_reason == "max_tokens"


def test_anthropic_stream_raw_events(server):
    server.reply = lambda body, protocol: "one two three four five six"
    events = list(ant_msg(ant(server), stream=True))
    types = [e.type for e in events]
    assert types[0] == "message_start"
    assert types[1] == "content_block_start"
    assert types[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    deltas = [e for e in events if e.type == "content_block_delta"]
    assert len(deltas) >= 2
    assert "".join(d.delta.text for d in deltas) == "one two three four five six"
    md = events[-2]
    assert md.delta.stop_reason == "end_turn"
    assert md.usage.output_tokens == 6
    assert events[0].message.usage.input_tokens == 3


def test_anthropic_stream_helper(server):
    with ant(server).messages.stream(model="claude-x", max_tokens=100, messages=MSGS) as st:
        text = "".join(st.text_stream)
        final = st.get_final_message()
    assert text == "ok: hello there world"
    assert final.content[0].text == text
    assert final.stop_reason == "end_turn"


def test_replies_queue_then_reply_callable(server):
    seen = []

    def reply(body, protocol):
        seen.append(protocol)
        return f"{protocol}!"

    server.reply = reply
    server.replies = ["first", "second"]
    client, aclient = oai(server), ant(server)
    assert oai_chat(client).choices[0].message.content == "first"
    assert ant_msg(aclient).content[0].text == "second"
    assert oai_chat(client).choices[0].message.content == "openai!"
    assert ant_msg(aclient).content[0].text == "anthropic!"
    assert seen == ["openai", "anthropic"]


def test_expected_api_key(server):
    server.expected_api_key = "right"
    with pytest.raises(openai.AuthenticationError):
        oai_chat(oai(server))
    with pytest.raises(anthropic.AuthenticationError) as ei:
        ant_msg(ant(server))
    assert ei.value.body["error"]["type"] == "authentication_error"


# --------------------------------------------------------------------------- status faults


@pytest.mark.parametrize(
    "status,exc",
    [
        (400, openai.BadRequestError),
        (404, openai.NotFoundError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
    ],
)
def test_openai_status_faults(server, status, exc):
    server.fail_next("status", status=status, retry_after=7)
    with pytest.raises(exc) as ei:
        oai_chat(oai(server))
    err = ei.value
    assert err.status_code == status
    assert err.response.headers["retry-after"] == "7"
    assert set(err.body) >= {"message", "type", "param", "code"}  # SDK unwraps {"error": {...}}
    assert json.loads(err.response.text)["error"]["message"] == err.body["message"]
    # fault is one-shot
    assert oai_chat(oai(server)).choices[0].message.content.startswith("ok:")


def test_openai_rate_limit_body_shape(server):
    server.fail_next("status", status=429)
    with pytest.raises(openai.RateLimitError) as ei:
        oai_chat(oai(server))
    assert ei.value.code == "rate_limit_exceeded"
    assert ei.value.type == "requests"


@pytest.mark.parametrize(
    "status,exc,etype",
    [
        (400, anthropic.BadRequestError, "invalid_request_error"),
        (429, anthropic.RateLimitError, "rate_limit_error"),
        (500, anthropic.InternalServerError, "api_error"),
        (529, anthropic.InternalServerError, "overloaded_error"),
    ],
)
def test_anthropic_status_faults(server, status, exc, etype):
    server.fail_next("status", status=status, retry_after=3)
    with pytest.raises(exc) as ei:
        ant_msg(ant(server))
    err = ei.value
    assert err.status_code == status
    assert err.response.headers["retry-after"] == "3"
    assert err.body["type"] == "error"
    assert err.body["error"]["type"] == etype


def test_status_fault_message_override(server):
    server.fail_next("status", status=400, message="bad thing", error_type="weird")
    with pytest.raises(anthropic.BadRequestError) as ei:
        ant_msg(ant(server))
    assert ei.value.body["error"] == {"type": "weird", "message": "bad thing"}


def test_fault_path_filter_and_count(server):
    server.fail_next("status", count=2, status=500, path="/v1/messages")
    client = oai(server)
    assert oai_chat(client).choices  # openai request doesn't consume it
    for _ in range(2):
        with pytest.raises(anthropic.InternalServerError):
            ant_msg(ant(server))
    assert ant_msg(ant(server)).content
    assert [r["fault"] for r in server.requests] == [None, "status", "status", None]
    with pytest.raises(ValueError):
        server.fail_next("nope")


# --------------------------------------------------------------------------- transport faults


def test_delay_times_out(server):
    server.fail_next("delay", seconds=2)
    server.fail_next("delay", seconds=2)
    with pytest.raises(openai.APITimeoutError):
        oai_chat(oai(server, timeout=0.3))
    with pytest.raises(anthropic.APITimeoutError):
        ant_msg(ant(server, timeout=0.3))
    # (a timeout error at all is the proof: without one, the 2 s delay ends in a reply; no
    # clock assertions, which failed under a loaded CI host)


def test_delay_shorter_than_timeout_succeeds(server):
    server.fail_next("delay", seconds=0.1)
    assert oai_chat(oai(server, timeout=2)).choices[0].message.content.startswith("ok:")


def test_delay_mid_stream_times_out_between_chunks(server):
    server.fail_next("delay", seconds=2, mid_stream=True)
    stream = oai_chat(oai(server, timeout=0.3), stream=True)  # headers arrive in time
    with pytest.raises(openai.APITimeoutError):
        list(stream)


def test_disconnect(server):
    server.fail_next("disconnect", count=2)
    with pytest.raises(openai.APIConnectionError) as ei:
        oai_chat(oai(server))
    assert not isinstance(ei.value, openai.APITimeoutError)
    with pytest.raises(anthropic.APIConnectionError):
        ant_msg(ant(server))


def test_malformed_json_surfaces_raw_decode_error(server):
    # Neither SDK wraps a bad 200 body: json.JSONDecodeError (a ValueError) escapes.
    server.fail_next("malformed", count=2)
    with pytest.raises(json.JSONDecodeError):
        oai_chat(oai(server))
    with pytest.raises(json.JSONDecodeError):
        ant_msg(ant(server))


def test_malformed_stream_event(server):
    server.fail_next("malformed", count=2)
    with pytest.raises(json.JSONDecodeError):
        list(oai_chat(oai(server), stream=True))
    with pytest.raises(json.JSONDecodeError):
        list(ant_msg(ant(server), stream=True))


def test_truncated_json(server):
    server.fail_next("truncated", count=2)
    with pytest.raises(json.JSONDecodeError):
        oai_chat(oai(server))
    with pytest.raises(json.JSONDecodeError):
        ant_msg(ant(server))
    assert server.requests[-1]["fault"] == "truncated"


def test_truncated_at_transport_level(server):
    server.fail_next("truncated", count=2, transport=True)
    with pytest.raises(openai.APIConnectionError):
        oai_chat(oai(server))
    with pytest.raises(anthropic.APIConnectionError):
        ant_msg(ant(server))


def test_broken_stream_openai(server):
    server.fail_next("broken_stream")
    stream = oai_chat(oai(server), stream=True)
    got = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in stream:
            got.append(chunk)
    assert len(got) == 2  # the couple of chunks before the hang-up were delivered


def test_broken_stream_anthropic_raises_a_transport_error(server):
    # The anthropic SDK up to 2.16 let a mid-stream transport error out raw (the httpx2
    # exception escaped from iteration); 2.17 wraps it as APIConnectionError, as openai does.
    # The gateway (caesar/gateway/errors.py) maps either to a provider error.
    raised = (httpx2.TransportError, anthropic.APIConnectionError)
    server.fail_next("broken_stream", count=2)
    with pytest.raises(raised) as caught:
        list(ant_msg(ant(server), stream=True))
    assert "incomplete chunked read" in str(caught.value)
    with pytest.raises(raised):
        with ant(server).messages.stream(model="claude-x", max_tokens=100, messages=MSGS) as st:
            "".join(st.text_stream)


def test_broken_stream_clean_close_is_silent(server):
    # A cleanly-ended HTTP body without [DONE]/message_stop raises nothing in either SDK;
    # callers must notice the missing finish_reason / stop_reason themselves.
    server.fail_next("broken_stream", clean=True, chunks=2)
    chunks = list(oai_chat(oai(server), stream=True))
    assert len(chunks) == 2
    assert all(c.choices[0].finish_reason is None for c in chunks)

    server.fail_next("broken_stream", clean=True, chunks=4)
    with ant(server).messages.stream(model="claude-x", max_tokens=100, messages=MSGS) as st:
        "".join(st.text_stream)
        final = st.get_final_message()
    assert final.stop_reason is None


def test_stream_error_event(server):
    server.fail_next("stream_error", count=2, message="boom")
    with pytest.raises(openai.APIError) as ei:
        list(oai_chat(oai(server), stream=True))
    assert not isinstance(ei.value, openai.APIStatusError)
    assert ei.value.message == "boom"
    with pytest.raises(anthropic.APIStatusError) as ei2:
        list(ant_msg(ant(server), stream=True))
    assert ei2.value.status_code == 200  # in-band error on a 200 stream
    assert ei2.value.body["error"]["type"] == "overloaded_error"


# --------------------------------------------------------------------------- retries


def test_openai_single_503_retried_transparently(server):
    server.fail_next("status", status=503, retry_after=0.05)
    r = oai_chat(oai(server, max_retries=2))
    assert r.choices[0].message.content == "ok: hello there world"
    assert len(server.requests) == 2
    assert [q["headers"]["x-stainless-retry-count"] for q in server.requests] == ["0", "1"]
    assert [q["fault"] for q in server.requests] == ["status", None]


def test_anthropic_single_503_retried_transparently(server):
    server.fail_next("status", status=503, retry_after_ms=50)
    m = ant_msg(ant(server, max_retries=2))
    assert m.content[0].text == "ok: hello there world"
    assert len(server.requests) == 2


def test_retries_exhausted(server):
    server.fail_next("status", count=3, status=429, retry_after=0.01)
    with pytest.raises(openai.RateLimitError):
        oai_chat(oai(server, max_retries=2))
    assert len(server.requests) == 3


def test_openai_huge_retry_after_disables_retry(server):
    # openai SDK: Retry-After > 120 s means "don't retry at all" (raises at once).
    server.fail_next("status", status=503, retry_after=600)
    with pytest.raises(openai.InternalServerError):
        oai_chat(oai(server, max_retries=2))
    assert len(server.requests) == 1  # not retried (a retry would have waited, then sent again)


def test_disconnect_is_retried(server):
    server.fail_next("disconnect")
    assert oai_chat(oai(server, max_retries=1)).choices  # retried after ~0.5 s backoff
    server.fail_next("status", status=400)  # 4xx is not retried
    with pytest.raises(openai.BadRequestError):
        oai_chat(oai(server, max_retries=2))
    assert len(server.requests) == 3
