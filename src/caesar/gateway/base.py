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
        generation: Generation | None = None,
    ) -> Completion:
        """`generation`: the route's and the caller's limits; a provider never goes past its
        own `max_tokens`."""
        ...

    def stream(
        self,
        messages: list[Message],
        model: str,
        *,
        task: str,
        generation: Generation | None = None,
    ) -> Iterator[StreamChunk]: ...


@dataclass(frozen=True)
class Generation:
    """How a reply is generated: a limit on its length, the temperature, stop sequences. None
    (or empty): the provider's own."""

    max_tokens: int | None = None
    temperature: float | None = None
    stop: tuple[str, ...] = ()

    def over(self, base: Generation | None) -> Generation:
        """These values where set, `base`'s elsewhere; the lower max_tokens of the two; the stop
        sequences of both (at most 4, as OpenAI allows)."""
        if base is None:
            return self
        limits = [x for x in (self.max_tokens, base.max_tokens) if x]
        return Generation(
            max_tokens=min(limits) if limits else None,
            temperature=self.temperature if self.temperature is not None else base.temperature,
            stop=tuple(dict.fromkeys((*base.stop, *self.stop)))[:4],
        )


def within(generation: Generation | None, limit: int) -> int:
    """The reply limit to send: the caller's, if lower than the operator's."""
    requested = generation.max_tokens if generation else None
    return min(requested, limit) if requested else limit
