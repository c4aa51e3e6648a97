"""Anthropic's Messages API through the official SDK (retries with backoff are the SDK's)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anthropic

from caesar.config import ProviderSettings
from caesar.errors import (
    ProviderBadResponse,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
)
from caesar.gateway.base import Completion, Message, StreamChunk, Usage

MAX_TOKENS = 4096


def translate_anthropic_error(provider: str, exc: Exception) -> ProviderError:
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderTimeout(provider, "timed out")
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderUnavailable(provider, f"cannot connect: {exc}")
    if isinstance(exc, anthropic.RateLimitError):
        return ProviderUnavailable(provider, "rate limited (429) after retries")
    if isinstance(exc, anthropic.APIStatusError):
        if exc.status_code >= 500:
            return ProviderUnavailable(provider, f"server error {exc.status_code}")
        return ProviderError(provider, f"rejected the request ({exc.status_code}): {exc.message}")
    return ProviderBadResponse(provider, f"unreadable response: {type(exc).__name__}: {exc}")


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
        kwargs: dict[str, Any] = {}
        if settings.base_url:
            kwargs["base_url"] = settings.base_url
        self._client = anthropic.Anthropic(
            api_key=settings.api_key.get_secret_value() if settings.api_key else None,
            timeout=settings.timeout_seconds,
            max_retries=settings.max_retries,
            **kwargs,
        )

    def _params(self, messages: list[Message], model: str) -> dict[str, Any]:
        system, turns = split_system(messages)
        params: dict[str, Any] = {"model": model, "max_tokens": MAX_TOKENS, "messages": turns}
        if system:
            params["system"] = system
        return params

    def complete(
        self, messages: list[Message], model: str, *, task: str, json_mode: bool = False
    ) -> Completion:
        # Anthropic has no JSON mode; the memory prompts ask for JSON and replies are validated.
        started = time.perf_counter()
        try:
            response = self._client.messages.create(**self._params(messages, model))
            text = "".join(block.text for block in response.content if block.type == "text")
        except (anthropic.AnthropicError, ValueError, AttributeError, TypeError) as exc:
            raise translate_anthropic_error(self.name, exc) from exc
        return Completion(
            text=text,
            provider=self.name,
            model=response.model or model,
            usage=Usage(response.usage.input_tokens, response.usage.output_tokens),
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    def stream(self, messages: list[Message], model: str, *, task: str) -> Iterator[StreamChunk]:
        try:
            with self._client.messages.stream(**self._params(messages, model)) as events:
                for text in events.text_stream:
                    yield StreamChunk(text)
                final = events.get_final_message()
            if final.stop_reason is None:
                raise ProviderBadResponse(self.name, "stream ended before the reply was finished")
            yield StreamChunk("", usage=Usage(final.usage.input_tokens, final.usage.output_tokens))
        except (anthropic.AnthropicError, ValueError, AttributeError, TypeError) as exc:
            raise translate_anthropic_error(self.name, exc) from exc
        except Exception as exc:
            if type(exc).__module__.startswith(("httpx", "httpcore")):
                raise ProviderUnavailable(self.name, f"stream broke: {exc}") from exc
            raise
