"""What every provider implements: one `complete`, and `stream` where it can."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol, TypedDict


class Message(TypedDict):
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


@dataclass
class Completion:
    text: str
    provider: str
    model: str
    usage: Usage = field(default_factory=Usage)
    latency_ms: float = 0.0


@dataclass
class StreamChunk:
    """A piece of streamed text; the last chunk of a stream carries `usage`."""

    text: str
    usage: Usage | None = None


class Provider(Protocol):
    name: str
    can_chat: bool

    def complete(
        self, messages: list[Message], model: str, *, task: str, json_mode: bool = False
    ) -> Completion: ...

    def stream(
        self, messages: list[Message], model: str, *, task: str
    ) -> Iterator[StreamChunk]: ...
