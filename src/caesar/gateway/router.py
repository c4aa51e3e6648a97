"""Task routing (ADR-0026): each task names "provider:model" in `gateway.routes`."""

from __future__ import annotations

from collections.abc import Iterator

from caesar.config import GatewaySettings
from caesar.errors import ConfigError
from caesar.gateway.anthropic_provider import AnthropicProvider
from caesar.gateway.base import Completion, Message, Provider, StreamChunk
from caesar.gateway.offline import OfflineProvider
from caesar.gateway.openai_provider import OpenAIProvider


def build_provider(name: str, settings: GatewaySettings) -> Provider:
    spec = settings.providers[name]
    if spec.kind == "openai":
        return OpenAIProvider(name, spec)
    if spec.kind == "anthropic":
        return AnthropicProvider(name, spec)
    return OfflineProvider(name)


class Gateway:
    def __init__(self, settings: GatewaySettings) -> None:
        self._settings = settings
        self._providers: dict[str, Provider] = {}

    def route(self, task: str) -> tuple[Provider, str]:
        target = self._settings.routes.get(task)
        if target is None:
            raise ConfigError(f"no route for task {task!r}; add gateway.routes.{task}")
        provider_name, _, model = target.partition(":")
        if provider_name not in self._providers:
            self._providers[provider_name] = build_provider(provider_name, self._settings)
        return self._providers[provider_name], model

    def complete(self, messages: list[Message], *, task: str, json_mode: bool = False) -> Completion:
        provider, model = self.route(task)
        return provider.complete(messages, model, task=task, json_mode=json_mode)

    def stream(self, messages: list[Message], *, task: str) -> Iterator[StreamChunk]:
        provider, model = self.route(task)
        return provider.stream(messages, model, task=task)
