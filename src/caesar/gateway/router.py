"""Task routing (ADR-0026): each task names "provider:model" in `gateway.routes`.

Providers are built on first use and kept: one SDK client (and connection pool) per provider.
Their modules are imported only then, so a process that never chats through Anthropic never
pays for importing its SDK (about a second of start-up each).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from caesar.config import GatewaySettings
from caesar.errors import ConfigError
from caesar.gateway.base import Completion, Generation, Message, Provider, StreamChunk


def build_provider(name: str, settings: GatewaySettings) -> Provider:
    spec = settings.providers[name]
    if spec.kind == "openai":
        from caesar.gateway.openai_provider import OpenAIProvider

        return OpenAIProvider(name, spec)
    if spec.kind == "gguf":
        from caesar.gateway.gguf_provider import GGUFProvider

        return GGUFProvider(name, spec)
    if spec.kind == "anthropic":
        from caesar.gateway.anthropic_provider import AnthropicProvider

        return AnthropicProvider(name, spec)
    from caesar.gateway.offline import OfflineProvider

    return OfflineProvider(name)


class Gateway:
    def __init__(self, settings: GatewaySettings) -> None:
        self._settings = settings
        self._providers: dict[str, Provider] = {}
        # Requests and workers route from several threads; build each provider only once.
        self._lock = threading.Lock()

    def route(self, task: str) -> tuple[Provider, str]:
        target = self._settings.routes.get(task)
        if target is None:
            raise ConfigError(f"no route for task {task!r}; add gateway.routes.{task}")
        provider_name, _, model = target.partition(":")
        provider = self._providers.get(provider_name)
        if provider is None:
            with self._lock:
                provider = self._providers.get(provider_name)
                if provider is None:
                    provider = build_provider(provider_name, self._settings)
                    self._providers[provider_name] = provider
        return provider, model

    def complete(
        self,
        messages: list[Message],
        *,
        task: str,
        json_mode: bool = False,
        generation: Generation | None = None,
    ) -> Completion:
        """`generation`: the caller's, over the route's (gateway.generation.<task>)."""
        provider, model = self.route(task)
        return provider.complete(
            messages, model, task=task, json_mode=json_mode, generation=self._for(task, generation)
        )

    def stream(
        self, messages: list[Message], *, task: str, generation: Generation | None = None
    ) -> Iterator[StreamChunk]:
        provider, model = self.route(task)
        return provider.stream(messages, model, task=task, generation=self._for(task, generation))

    def _for(self, task: str, caller: Generation | None) -> Generation | None:
        spec = self._settings.generation.get(task)
        route = Generation(spec.max_tokens, spec.temperature, tuple(spec.stop)) if spec else None
        return caller.over(route) if caller is not None else route
