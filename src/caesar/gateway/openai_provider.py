"""Any OpenAI-compatible server (Ollama's /v1, vLLM, llama.cpp, LM Studio, OpenAI) through the
official SDK. Transient errors (connection, 408/409/429/5xx) are retried by the SDK itself with
bounded exponential backoff that honours Retry-After (capped, see gateway/http.py); whatever
is left is translated once, in gateway/errors.py."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

import openai

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

from caesar.config import ProviderSettings, reply_limit
from caesar.errors import ProviderBadResponse, ProviderError
from caesar.gateway.base import (
    Completion,
    Generation,
    Message,
    StreamChunk,
    ToolUse,
    Usage,
    within,
)
from caesar.gateway.errors import catchable, translate
from caesar.gateway.http import sdk_http_client

# Servers that need no key (Ollama, llama.cpp) still get one: the SDK refuses to start without.
NO_KEY = "not-needed"


def _sdk_messages(messages: list[Message]) -> list[ChatCompletionMessageParam]:
    # Our Message is the SDK's param shape; only the typing differs. An assistant turn that
    # only called tools has no content: null, as OpenAI sends it.
    sent = [
        {**m, "content": None} if m.get("tool_calls") and not m["content"] else m for m in messages
    ]
    return cast("list[ChatCompletionMessageParam]", sent)


# Every parameter of a client's tool loop passes: OpenAI's protocol is the one they speak.
TAKES = frozenset(ToolUse.__dataclass_fields__)


# The wait before retrying a request that got no response at all (refused, reset, timed out).
NO_RESPONSE_WAIT = 0.1


class _Client(openai.OpenAI):
    """The SDK's client, but a request that got no response is retried after NO_RESPONSE_WAIT
    instead of the SDK's 0.5–8 s backoff: with nothing listening (Ollama not started) a refused
    connection took ~1.3 s to report, and waiting longer cannot make a server appear (issue
    #15). A server that answered — 429, 5xx, Retry-After — keeps the SDK's own backoff."""

    def _calculate_retry_timeout(
        self, remaining_retries: int, options: Any, response_headers: Any = None
    ) -> float:
        if response_headers is None:
            return NO_RESPONSE_WAIT
        wait: float = super()._calculate_retry_timeout(remaining_retries, options, response_headers)
        return wait


class OpenAIProvider:
    can_chat = True
    takes = TAKES

    def __init__(self, name: str, settings: ProviderSettings) -> None:
        self.name = name
        api_key = settings.api_key.get_secret_value() if settings.api_key else NO_KEY
        self._secrets = [api_key]
        self._catch = catchable(openai)
        self._max_tokens = reply_limit(settings)
        self._client = _Client(
            base_url=settings.base_url,
            api_key=api_key,
            timeout=settings.timeout_seconds,
            max_retries=settings.max_retries,
            http_client=sdk_http_client(openai.DefaultHttpxClient, settings.max_retry_wait_seconds),
        )

    def _generation(self, generation: Generation | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"max_tokens": within(generation, self._max_tokens)}
        if generation is not None and generation.temperature is not None:
            kwargs["temperature"] = generation.temperature
        if generation is not None and generation.stop:
            kwargs["stop"] = list(generation.stop)
        if generation is not None and generation.tools is not None:
            kwargs.update(generation.tools.as_openai())
        return kwargs

    def _error(self, exc: BaseException) -> ProviderError:
        return translate(openai, self.name, exc, self._secrets)

    def complete(
        self,
        messages: list[Message],
        model: str,
        *,
        task: str,
        json_mode: bool = False,
        generation: Generation | None = None,
    ) -> Completion:
        kwargs = self._generation(generation)
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        started = time.perf_counter()
        try:
            response = self._client.chat.completions.create(
                model=model,
                messages=_sdk_messages(messages),
                **kwargs,
            )
            message = response.choices[0].message
            text = message.content
            calls = [c.model_dump(exclude_none=True) for c in message.tool_calls or []]
            finish = response.choices[0].finish_reason or "stop"
            usage = Usage()
            if response.usage is not None:
                usage = Usage(response.usage.prompt_tokens, response.usage.completion_tokens)
        except self._catch as exc:
            raise self._error(exc) from exc
        if text is None and not calls:
            raise ProviderBadResponse(self.name, "response had no message content")
        return Completion(
            text=text or "",
            provider=self.name,
            model=response.model or model,
            usage=usage,
            latency_ms=(time.perf_counter() - started) * 1000,
            finish_reason=finish,
            tool_calls=calls or None,
        )

    def stream(
        self,
        messages: list[Message],
        model: str,
        *,
        task: str,
        generation: Generation | None = None,
        on_open: Callable[[Any], None] | None = None,
    ) -> Iterator[StreamChunk]:
        """Text as it arrives; the last chunk is empty and carries the usage. A stream that
        ends before any choice reported a finish_reason is a `ProviderBadResponse`: the SDK
        itself is silent when the `[DONE]` marker never comes. `on_open` gets the HTTP
        response once the server has accepted the request (the embedded model hangs it up)."""
        try:
            events = self._client.chat.completions.create(
                model=model,
                messages=_sdk_messages(messages),
                stream=True,
                stream_options={"include_usage": True},
                **self._generation(generation),
            )
            if on_open is not None:
                on_open(events.response)
            usage = Usage()
            finished = False
            finish = "stop"
            with events:
                for event in events:
                    if event.usage is not None:
                        usage = Usage(event.usage.prompt_tokens, event.usage.completion_tokens)
                    for choice in event.choices:
                        if choice.delta and choice.delta.content:
                            yield StreamChunk(choice.delta.content)
                        if choice.delta and choice.delta.tool_calls:
                            pieces = [
                                c.model_dump(exclude_none=True) for c in choice.delta.tool_calls
                            ]
                            yield StreamChunk("", tool_calls=pieces)
                        if choice.finish_reason is not None:
                            finished, finish = True, choice.finish_reason
        except self._catch as exc:
            raise self._error(exc) from exc
        if not finished:
            raise ProviderBadResponse(self.name, "stream ended before the reply was finished")
        yield StreamChunk("", usage=usage, finish_reason=finish)
