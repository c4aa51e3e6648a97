"""Any OpenAI-compatible server (Ollama's /v1, vLLM, llama.cpp, LM Studio, OpenAI) through the
official SDK. Transient errors (connection, 408/409/429/5xx) are retried by the SDK itself with
bounded exponential backoff that honours Retry-After; what is left is translated once here."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import openai

from caesar.config import ProviderSettings
from caesar.errors import (
    ProviderBadResponse,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
)
from caesar.gateway.base import Completion, Message, StreamChunk, Usage


def translate_openai_error(provider: str, exc: Exception) -> ProviderError:
    if isinstance(exc, openai.APITimeoutError):
        return ProviderTimeout(provider, "timed out")
    if isinstance(exc, openai.APIConnectionError):
        return ProviderUnavailable(provider, f"cannot connect: {exc}")
    if isinstance(exc, openai.RateLimitError):
        return ProviderUnavailable(provider, "rate limited (429) after retries")
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code >= 500:
            return ProviderUnavailable(provider, f"server error {exc.status_code}")
        return ProviderError(provider, f"rejected the request ({exc.status_code}): {exc.message}")
    return ProviderBadResponse(provider, f"unreadable response: {type(exc).__name__}: {exc}")


class OpenAIProvider:
    can_chat = True

    def __init__(self, name: str, settings: ProviderSettings) -> None:
        self.name = name
        api_key = settings.api_key.get_secret_value() if settings.api_key else "not-needed"
        self._client = openai.OpenAI(
            base_url=settings.base_url,
            api_key=api_key,
            timeout=settings.timeout_seconds,
            max_retries=settings.max_retries,
        )

    def complete(
        self, messages: list[Message], model: str, *, task: str, json_mode: bool = False
    ) -> Completion:
        kwargs: dict[str, Any] = {}
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        started = time.perf_counter()
        try:
            response = self._client.chat.completions.create(
                model=model, messages=list(messages), **kwargs  # type: ignore[arg-type]
            )
            text = response.choices[0].message.content
        except (openai.OpenAIError, ValueError, IndexError, AttributeError, TypeError) as exc:
            raise translate_openai_error(self.name, exc) from exc
        if text is None:
            raise ProviderBadResponse(self.name, "response had no message content")
        usage = Usage()
        if response.usage is not None:
            usage = Usage(response.usage.prompt_tokens, response.usage.completion_tokens)
        return Completion(
            text=text,
            provider=self.name,
            model=response.model or model,
            usage=usage,
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    def stream(self, messages: list[Message], model: str, *, task: str) -> Iterator[StreamChunk]:
        try:
            events = self._client.chat.completions.create(
                model=model,
                messages=list(messages),  # type: ignore[arg-type]
                stream=True,
                stream_options={"include_usage": True},
            )
            usage = Usage()
            finished = False
            for event in events:
                if event.usage is not None:
                    usage = Usage(event.usage.prompt_tokens, event.usage.completion_tokens)
                for choice in event.choices:
                    if choice.delta and choice.delta.content:
                        yield StreamChunk(choice.delta.content)
                    finished = finished or choice.finish_reason is not None
            if not finished:
                raise ProviderBadResponse(self.name, "stream ended before the reply was finished")
            yield StreamChunk("", usage=usage)
        except (openai.OpenAIError, ValueError, AttributeError, TypeError) as exc:
            raise translate_openai_error(self.name, exc) from exc
        except Exception as exc:  # httpx read errors when the stream breaks mid-way
            if type(exc).__module__.startswith(("httpx", "httpcore")):
                raise ProviderUnavailable(self.name, f"stream broke: {exc}") from exc
            raise
