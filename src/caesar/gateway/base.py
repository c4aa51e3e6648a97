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
    finish_reason: str = "stop"  # "length": cut at max_tokens


@dataclass
class StreamChunk:
    """A piece of streamed text; the last chunk of a stream carries `usage`."""

    text: str
    usage: Usage | None = None
    finish_reason: str | None = None  # on the last chunk: "stop", or "length" when cut


class Provider(Protocol):
    name: str
    can_chat: bool

    def complete(
        self,
        messages: list[Message],
        model: str,
        *,
        task: str,
        json_mode: bool = False,
        max_tokens: int | None = None,
    ) -> Completion:
        """`max_tokens`: a caller's own limit; a provider never goes past its configured one."""
        ...

    def stream(
        self, messages: list[Message], model: str, *, task: str, max_tokens: int | None = None
    ) -> Iterator[StreamChunk]: ...


def within(requested: int | None, limit: int) -> int:
    """The reply limit to send: the caller's, if lower than the operator's."""
    return min(requested, limit) if requested else limit
