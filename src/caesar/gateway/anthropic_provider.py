"""Anthropic's Messages API through the official SDK (retries with backoff are the SDK's,
Retry-After capped in gateway/http.py; failures translated in gateway/errors.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anthropic

from caesar.config import ProviderSettings, reply_limit
from caesar.errors import ProviderBadResponse, ProviderError
from caesar.gateway.base import Completion, Generation, Message, StreamChunk, Usage, within
from caesar.gateway.errors import catchable, translate
from caesar.gateway.http import sdk_http_client


def split_system(messages: list[Message]) -> tuple[str, list[dict[str, str]]]:
    """Anthropic takes the system prompt apart and wants user/assistant turns alternating,
    starting with the user: merge neighbours of one role and drop a leading assistant turn."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    turns: list[dict[str, str]] = []
    for m in messages:
        if m["role"] == "system":
            continue
        if turns and turns[-1]["role"] == m["role"]:
            turns[-1] = {"role": m["role"], "content": turns[-1]["content"] + "\n\n" + m["content"]}
        else:
            turns.append({"role": m["role"], "content": m["content"]})
    while turns and turns[0]["role"] != "user":
        turns.pop(0)
    return system, turns


class AnthropicProvider:
    can_chat = True

    def __init__(self, name: str, settings: ProviderSettings) -> None:
        self.name = name
        api_key = settings.api_key.get_secret_value() if settings.api_key else None
        self._secrets = [api_key] if api_key else []
        self._max_tokens = reply_limit(settings)  # the Messages API requires one
        self._catch = catchable(anthropic)
        kwargs: dict[str, Any] = {}
        if settings.base_url:
            kwargs["base_url"] = settings.base_url
        self._client = anthropic.Anthropic(
            api_key=api_key,
            timeout=settings.timeout_seconds,
            max_retries=settings.max_retries,
            http_client=sdk_http_client(
                anthropic.DefaultHttpxClient, settings.max_retry_wait_seconds
            ),
            **kwargs,
        )

    def _error(self, exc: BaseException) -> ProviderError:
        return translate(anthropic, self.name, exc, self._secrets)

    def _params(
        self, messages: list[Message], model: str, generation: Generation | None = None
    ) -> dict[str, Any]:
        system, turns = split_system(messages)
        if not turns:
            raise ProviderError(self.name, "nothing to send: the messages hold no user turn")
        limit = within(generation, self._max_tokens)
        params: dict[str, Any] = {"model": model, "max_tokens": limit, "messages": turns}
        if generation is not None and generation.temperature is not None:
            params["temperature"] = min(generation.temperature, 1.0)  # Anthropic's range: 0–1
        if generation is not None and generation.stop:
            params["stop_sequences"] = list(generation.stop)
        if system:
            params["system"] = system
        return params

    def complete(
        self,
        messages: list[Message],
        model: str,
        *,
        task: str,
        json_mode: bool = False,
        generation: Generation | None = None,
    ) -> Completion:
        # Anthropic has no JSON mode; the memory prompts ask for JSON and replies are validated.
        params = self._params(messages, model, generation)
        started = time.perf_counter()
        try:
            response = self._client.messages.create(**params)
            text = "".join(block.text for block in response.content if block.type == "text")
            usage = Usage(response.usage.input_tokens, response.usage.output_tokens)
            finish = _finish(response.stop_reason)
        except self._catch as exc:
            raise self._error(exc) from exc
        return Completion(
            text=text,
            provider=self.name,
            model=response.model or model,
            usage=usage,
            latency_ms=(time.perf_counter() - started) * 1000,
            finish_reason=finish,
        )

    def stream(
        self,
        messages: list[Message],
        model: str,
        *,
        task: str,
        generation: Generation | None = None,
    ) -> Iterator[StreamChunk]:
        """Text as it arrives; the last chunk is empty and carries the usage. The stream must
        end with `message_stop`: a body that stops early, even cleanly, is a
        `ProviderBadResponse` (the SDK itself does not complain)."""
        params = self._params(messages, model, generation)
        stopped = False
        try:
            with self._client.messages.stream(**params) as events:
                for event in events:
                    if event.type == "content_block_delta" and event.delta.type == "text_delta":
                        yield StreamChunk(event.delta.text)
                    elif event.type == "message_stop":
                        stopped = True
                final = events.get_final_message() if stopped else None
                usage = (
                    Usage(final.usage.input_tokens, final.usage.output_tokens) if final else None
                )
        except self._catch as exc:
            raise self._error(exc) from exc
        if usage is None:
            raise ProviderBadResponse(self.name, "stream ended before the reply was finished")
        yield StreamChunk(
            "", usage=usage, finish_reason=_finish(final.stop_reason if final else None)
        )


def _finish(stop_reason: str | None) -> str:
    """Anthropic's stop_reason in OpenAI's words: a reply cut at max_tokens is "length"."""
    return "length" if stop_reason == "max_tokens" else "stop"
