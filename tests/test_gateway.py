"""The gateway through the real openai and anthropic SDKs against the local wire server
(tests/fakes/llm_server.py): answers, streams, and every failure as our ProviderError tree."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from conftest import PROVIDER_KEY

from caesar.config import GatewaySettings, GenerationSettings
from caesar.errors import (
    ConfigError,
    ProviderBadResponse,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
)
from caesar.gateway import Gateway
from caesar.gateway.anthropic_provider import split_system
from caesar.gateway.errors import redact, retry_after_seconds, translate

PROTOCOLS = ["openai", "anthropic"]
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "hello there"},
]


def gateway_for(llm: Any, protocol: str, **provider: Any) -> Gateway:
    """Every task routed to one provider of `protocol` on the fake server."""
    spec: dict[str, Any] = {
        "kind": protocol,
        "base_url": llm.base_url if protocol == "openai" else llm.anthropic_base_url,
        "api_key": PROVIDER_KEY,
        "max_retries": 0,
        "timeout_seconds": 5,
        **provider,
    }
    return Gateway(
        GatewaySettings(
            providers={"p": spec, "offline": {"kind": "offline"}},
            routes={
                "chat": "p:model-x",
                "memory_extract": "offline:patterns",
                "memory_summarise": "p:model-x",
            },
        )
    )


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- answers ----------------------------------------------------------------------------------
def test_openai_completion(llm):
    llm.replies.append("three word reply")
    completion = gateway_for(llm, "openai").complete(MESSAGES, task="chat")
    assert completion.text == "three word reply"
    assert (completion.provider, completion.model) == ("p", "model-x")
    assert completion.usage.completion_tokens == 3
    assert completion.usage.prompt_tokens == 5  # the fake counts words of every message
    request = llm.requests[-1]
    assert request["path"] == "/v1/chat/completions"
    assert request["json"]["messages"] == MESSAGES
    assert request["json"]["model"] == "model-x"
    assert request["headers"]["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert "response_format" not in request["json"]
    # every request carries a reply limit: the kind's default, 1024 (issue #15)
    assert request["json"]["max_tokens"] == 1024


def test_a_callers_max_tokens_never_exceeds_the_providers(llm):
    from caesar.gateway.base import Generation

    gateway = gateway_for(llm, "openai", max_tokens=200)
    for asked, sent in ((None, 200), (50, 50), (5000, 200)):
        llm.replies.append("ok")
        gateway.complete(MESSAGES, task="chat", generation=Generation(max_tokens=asked))
        assert llm.requests[-1]["json"]["max_tokens"] == sent
    llm.replies.append("ok")
    gateway_for(llm, "anthropic", max_tokens=300).complete(
        MESSAGES, task="chat", generation=Generation(max_tokens=900)
    )
    assert llm.requests[-1]["json"]["max_tokens"] == 300


def test_anthropic_completion_splits_the_system_prompt(llm):
    llm.replies.append("two words")
    completion = gateway_for(llm, "anthropic").complete(MESSAGES, task="chat")
    assert completion.text == "two words"
    assert (completion.provider, completion.model) == ("p", "model-x")
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (5, 2)
    request = llm.requests[-1]
    assert request["path"] == "/v1/messages"
    assert request["json"]["system"] == "You are terse."
    assert request["json"]["messages"] == [{"role": "user", "content": "hello there"}]
    assert request["json"]["max_tokens"] > 0
    # anthropic 2.x sends its key as a bearer token
    assert request["api_key"] == PROVIDER_KEY


def test_anthropic_without_system_prompt_sends_none(llm):
    gateway_for(llm, "anthropic").complete([{"role": "user", "content": "hi"}], task="chat")
    assert "system" not in llm.requests[-1]["json"]


def test_split_system_merges_and_orders_turns():
    system, turns = split_system(
        [
            {"role": "system", "content": "base"},
            {"role": "assistant", "content": "stray greeting"},
            {"role": "user", "content": "a"},
            {"role": "user", "content": "b"},
            {"role": "system", "content": "late rule"},
            {"role": "assistant", "content": "c"},
        ]
    )
    assert system == "base\n\nlate rule"
    assert turns == [{"role": "user", "content": "a\n\nb"}, {"role": "assistant", "content": "c"}]


def test_json_mode_sends_response_format_to_openai(llm):
    llm.replies.append('{"facts": []}')
    out = gateway_for(llm, "openai").complete(MESSAGES, task="memory_summarise", json_mode=True)
    assert out.text == '{"facts": []}'
    assert llm.requests[-1]["json"]["response_format"] == {"type": "json_object"}


def test_json_mode_is_not_sent_to_anthropic(llm):
    gateway_for(llm, "anthropic").complete(MESSAGES, task="memory_summarise", json_mode=True)
    assert "response_format" not in llm.requests[-1]["json"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_stream(llm, protocol):
    llm.replies.append("one two three four five six")
    chunks = list(gateway_for(llm, protocol).stream(MESSAGES, task="chat"))
    texts = [c.text for c in chunks if c.text]
    assert len(texts) > 1  # really streamed, in pieces
    assert "".join(texts) == "one two three four five six"
    assert chunks[-1].text == "" and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 6
    assert llm.requests[-1]["json"]["stream"] is True


def test_routing_reuses_one_provider_and_refuses_unknown_tasks(llm):
    gateway = gateway_for(llm, "openai")
    first, model = gateway.route("chat")
    again, _ = gateway.route("memory_summarise")
    assert first is again and model == "model-x"
    with pytest.raises(ConfigError, match="gateway.routes.proactive"):
        gateway.route("proactive")


def test_offline_provider_serves_memory_but_never_chats(llm):
    gateway = gateway_for(llm, "openai")
    provider, _ = gateway.route("memory_extract")
    assert provider.can_chat is False
    with pytest.raises(ProviderError, match="cannot"):
        provider.complete(MESSAGES, "x", task="chat")
    assert llm.requests == []  # no LLM involved


# -- failures ---------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("status", [500, 503])
def test_server_errors_are_unavailable(llm, protocol, status):
    llm.fail_next("status", status=status)
    with pytest.raises(ProviderUnavailable) as info:
        gateway_for(llm, protocol).complete(MESSAGES, task="chat")
    assert info.value.http_status == 503 and info.value.provider == "p"
    assert f"server error {status}" in str(info.value)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_single_5xx_is_retried_by_the_sdk(llm, protocol):
    llm.fail_next("status", status=503, retry_after_ms=1)
    out = gateway_for(llm, protocol, max_retries=1).complete(MESSAGES, task="chat")
    assert out.text == "ok: hello there"
    assert [r["fault"] for r in llm.requests] == ["status", None]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_429_with_retry_after_is_retried(llm, protocol):
    llm.fail_next("status", status=429, retry_after="0.05")
    out = gateway_for(llm, protocol, max_retries=2).complete(MESSAGES, task="chat")
    assert out.text == "ok: hello there"
    assert len(llm.requests) == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_429_after_retries_is_unavailable(llm, protocol):
    llm.fail_next("status", count=3, status=429, retry_after_ms=1)
    with pytest.raises(ProviderUnavailable, match="rate limited") as info:
        gateway_for(llm, protocol, max_retries=2).complete(MESSAGES, task="chat")
    assert info.value.http_status == 503
    assert len(llm.requests) == 3  # the first try and two retries


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    ("status", "words"), [(429, "rate limited (429)"), (503, "server error 503")]
)
def test_retry_after_over_the_cap_is_not_waited_for(llm, protocol, status, words):
    # Uncapped, openai would wait these 5 s (it honours up to 120 s) and anthropic any
    # amount; with a 1 s cap the gateway gives up at once and says how long was asked.
    llm.fail_next("status", status=status, retry_after=5)
    gateway = gateway_for(llm, protocol, max_retries=3, max_retry_wait_seconds=1)
    with pytest.raises(ProviderUnavailable) as info:
        gateway.complete(MESSAGES, task="chat")
    assert f"{words}; it asks to wait 5 s" in str(info.value)
    assert len(llm.requests) == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_retry_after_within_the_cap_is_honoured(llm, protocol):
    llm.fail_next("status", status=503, retry_after="0.05")
    gateway = gateway_for(llm, protocol, max_retries=1, max_retry_wait_seconds=1)
    assert gateway.complete(MESSAGES, task="chat").text == "ok: hello there"
    assert len(llm.requests) == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bad_request_is_a_plain_provider_error(llm, protocol):
    llm.fail_next("status", status=400, message="max_tokens: too large")
    with pytest.raises(ProviderError) as info:
        gateway_for(llm, protocol).complete(MESSAGES, task="chat")
    assert type(info.value) is ProviderError and info.value.http_status == 502
    assert "rejected the request (400): max_tokens: too large" in str(info.value)
    assert "{" not in info.value.detail  # the provider's words, not a dict repr


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_key_echoed_by_the_provider_is_redacted(llm, protocol):
    llm.fail_next("status", status=401, message=f"Incorrect API key provided: {PROVIDER_KEY}")
    with pytest.raises(ProviderError) as info:
        gateway_for(llm, protocol).complete(MESSAGES, task="chat")
    assert PROVIDER_KEY not in str(info.value)
    assert "[redacted]" in str(info.value) and "api_key" in str(info.value)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unknown_model_names_the_fix(llm, protocol):
    llm.fail_next("status", status=404)
    with pytest.raises(ProviderError, match="gateway.routes"):
        gateway_for(llm, protocol).complete(MESSAGES, task="chat")


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("stream", [False, True])
def test_timeout(llm, protocol, stream):
    llm.fail_next("delay", seconds=5)
    gateway = gateway_for(llm, protocol, timeout_seconds=0.3)
    with pytest.raises(ProviderTimeout) as info:
        if stream:
            list(gateway.stream(MESSAGES, task="chat"))
        else:
            gateway.complete(MESSAGES, task="chat")
    assert info.value.http_status == 504


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_stream_stalling_mid_way_times_out(llm, protocol):
    # anthropic lets the raw httpx2.ReadTimeout out of the stream; it is still a timeout.
    llm.fail_next("delay", seconds=5, mid_stream=True)
    with pytest.raises(ProviderTimeout):
        list(gateway_for(llm, protocol, timeout_seconds=0.3).stream(MESSAGES, task="chat"))


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("stream", [False, True])
def test_connection_refused(protocol, stream):
    port = closed_port()
    gateway = Gateway(
        GatewaySettings(
            providers={
                "p": {
                    "kind": protocol,
                    "base_url": f"http://127.0.0.1:{port}"
                    + ("/v1" if protocol == "openai" else ""),
                    "api_key": PROVIDER_KEY,
                    "max_retries": 0,
                }
            },
            routes={task: "p:m" for task in ("chat", "memory_extract", "memory_summarise")},
        )
    )
    with pytest.raises(ProviderUnavailable, match="connection failed") as info:
        list(gateway.stream(MESSAGES, task="chat")) if stream else gateway.complete(
            MESSAGES, task="chat"
        )
    assert info.value.http_status == 503


def test_a_routes_generation_settings_and_a_callers_go_over_them(llm):
    from caesar.gateway.base import Generation

    gateway = gateway_for(llm, "openai", max_tokens=300)
    gateway._settings.generation["chat"] = GenerationSettings(
        max_tokens=100, temperature=0.2, stop=["END"]
    )
    llm.replies.append("ok")
    gateway.complete(MESSAGES, task="chat")
    sent = llm.requests[-1]["json"]
    assert (sent["max_tokens"], sent["temperature"], sent["stop"]) == (100, 0.2, ["END"])
    llm.replies.append("ok")
    gateway.complete(MESSAGES, task="chat", generation=Generation(1000, 0.9, ("STOP",)))
    sent = llm.requests[-1]["json"]
    # the caller's temperature wins, its length only under the route's, stops add up
    assert (sent["max_tokens"], sent["temperature"], sent["stop"]) == (100, 0.9, ["END", "STOP"])
    llm.replies.append("ok")
    gateway.complete(MESSAGES, task="memory_summarise")  # another task: the provider's own
    sent = llm.requests[-1]["json"]
    assert sent["max_tokens"] == 300 and "temperature" not in sent and "stop" not in sent


def test_no_response_is_retried_at_once_but_a_server_keeps_its_backoff():
    """Issue #15: with nothing listening, a refused connection took ~1.3 s to report (the SDK's
    0.5 s + 1 s backoff); now ~0.2 s warm (two retries 0.1 s apart)."""
    import httpx
    from openai._models import FinalRequestOptions

    from caesar.gateway.openai_provider import NO_RESPONSE_WAIT, _Client

    client = _Client(base_url="http://127.0.0.1:1/v1", api_key="x", max_retries=2)
    options = FinalRequestOptions(method="post", url="/chat/completions")
    assert client._calculate_retry_timeout(2, options, None) == NO_RESPONSE_WAIT
    answered = client._calculate_retry_timeout(1, options, httpx.Headers({}))
    assert 0.5 <= answered <= 2.0  # the SDK's exponential backoff, jittered
    assert client._calculate_retry_timeout(2, options, httpx.Headers({"retry-after": "3"})) == 3


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_disconnect_without_answer(llm, protocol):
    llm.fail_next("disconnect")
    with pytest.raises(ProviderUnavailable):
        gateway_for(llm, protocol).complete(MESSAGES, task="chat")


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("kind", ["malformed", "truncated"])
def test_unreadable_body_is_a_bad_response(llm, protocol, kind):
    # Both SDKs let a raw json.JSONDecodeError out for these.
    llm.fail_next(kind)
    with pytest.raises(ProviderBadResponse) as info:
        gateway_for(llm, protocol).complete(MESSAGES, task="chat")
    assert info.value.http_status == 502 and "JSONDecodeError" in str(info.value)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_body_cut_at_transport_level_is_unavailable(llm, protocol):
    llm.fail_next("truncated", transport=True)
    with pytest.raises(ProviderUnavailable):
        gateway_for(llm, protocol).complete(MESSAGES, task="chat")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_broken_stream_is_unavailable(llm, protocol):
    # openai wraps the broken socket in APIConnectionError; anthropic lets httpx2's
    # RemoteProtocolError escape. Both end as ProviderUnavailable.
    llm.fail_next("broken_stream")
    with pytest.raises(ProviderUnavailable):
        list(gateway_for(llm, protocol).stream(MESSAGES, task="chat"))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_stream_closed_cleanly_before_the_end_is_a_bad_response(llm, protocol):
    llm.fail_next("broken_stream", clean=True)
    with pytest.raises(ProviderBadResponse, match="before the reply was finished"):
        list(gateway_for(llm, protocol).stream(MESSAGES, task="chat"))


def test_anthropic_stream_without_message_stop_is_a_bad_response(llm):
    # Everything up to and including message_delta (stop_reason set), but no message_stop:
    # message_start, content_block_start, ping, 3 deltas, content_block_stop, message_delta.
    llm.replies.append("one two three")
    llm.fail_next("broken_stream", clean=True, chunks=8)
    with pytest.raises(ProviderBadResponse):
        list(gateway_for(llm, "anthropic").stream(MESSAGES, task="chat"))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_malformed_stream_event_is_a_bad_response(llm, protocol):
    llm.fail_next("malformed")
    with pytest.raises(ProviderBadResponse):
        list(gateway_for(llm, protocol).stream(MESSAGES, task="chat"))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_error_event_inside_a_stream_is_unavailable(llm, protocol):
    llm.fail_next("stream_error", message="Overloaded right now")
    with pytest.raises(ProviderUnavailable, match="Overloaded right now"):
        list(gateway_for(llm, protocol).stream(MESSAGES, task="chat"))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_stream_refused_up_front(llm, protocol):
    llm.fail_next("status", status=500)
    with pytest.raises(ProviderUnavailable):
        list(gateway_for(llm, protocol).stream(MESSAGES, task="chat"))


# -- pure helpers -----------------------------------------------------------------------------
def test_retry_after_parsing():
    assert retry_after_seconds({"retry-after": "7"}) == 7.0
    assert retry_after_seconds({"retry-after": "0.5"}) == 0.5
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "soon"}) is None
    date = "Wed, 21 Oct 2015 07:28:30 GMT"
    assert retry_after_seconds({"retry-after": date}, now=1445412480.0) == 30.0


def test_redact_cuts_long_secrets_only():
    assert redact("key sk-abcdefgh1 and ollama", ["sk-abcdefgh1", "ollama"]) == (
        "key [redacted] and ollama"
    )


def test_translate_keeps_our_errors_and_names_unknown_ones():
    ours = ProviderTimeout("p", "slow")
    assert translate(None, "p", ours) is ours
    other = translate(None, "p", RuntimeError(f"boom {PROVIDER_KEY}"), [PROVIDER_KEY])
    assert type(other) is ProviderError and "RuntimeError" in str(other)
    assert PROVIDER_KEY not in str(other)
