"""What every provider implements: one `complete`, and `stream` where it can."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields, replace
from typing import Any, NotRequired, Protocol, TypedDict


class Message(TypedDict):
    role: str  # "system" | "user" | "assistant" | "tool"
    content: str
    # A client's tool loop (issue #26), in OpenAI's shape: an assistant's calls, and the id of
    # the call a `tool` message answers.
    tool_calls: NotRequired[list[dict[str, Any]]]
    tool_call_id: NotRequired[str]


@dataclass(frozen=True)
class ToolUse:
    """What a client asks of the model beyond text, passed through as OpenAI spells it (issue
    #26). Each provider says which of these it `takes`; the rest are dropped, and the client is
    told so."""

    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None

    def asked(self) -> list[str]:
        """The names of the parameters the client set, in OpenAI's order."""
        return [f.name for f in fields(self) if getattr(self, f.name) not in (None, ())]

    def only(self, names: Iterable[str]) -> ToolUse:
        """These parameters, the others unset."""
        keep = set(names)
        return replace(ToolUse(), **{n: getattr(self, n) for n in self.asked() if n in keep})

    def as_openai(self) -> dict[str, Any]:
        out = {n: getattr(self, n) for n in self.asked()}
        if "tools" in out:
            out["tools"] = list(self.tools)
        return out


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
    finish_reason: str = "stop"  # "length": cut at max_tokens; "tool_calls"
    # the model's calls of the client's tools, in OpenAI's shape: {id, type, function}
    tool_calls: list[dict[str, Any]] | None = None


@dataclass
class StreamChunk:
    """A piece of streamed text; the last chunk of a stream carries `usage`."""

    text: str
    usage: Usage | None = None
    finish_reason: str | None = None  # on the last chunk: "stop", or "length" when cut
    # pieces of tool calls, as OpenAI streams them: {index, id?, type?, function: {name?,
    # arguments}}; the pieces of one index joined make one call
    tool_calls: list[dict[str, Any]] | None = None


class Provider(Protocol):
    name: str
    can_chat: bool

    @property
    def takes(self) -> frozenset[str]:
        """Which of a client's ToolUse parameters this provider passes to its model."""
        ...

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
    (or empty): the provider's own. `tools`: the client's, passed through; `background`: a
    client's utility request (a title, tags), which yields to the operator's turns on a local
    model with one slot."""

    max_tokens: int | None = None
    temperature: float | None = None
    stop: tuple[str, ...] = ()
    tools: ToolUse | None = None
    background: bool = False

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
            tools=self.tools,
            background=self.background,
        )


def within(generation: Generation | None, limit: int) -> int:
    """The reply limit to send: the caller's, if lower than the operator's."""
    requested = generation.max_tokens if generation else None
    return min(requested, limit) if requested else limit


def join_tool_calls(pieces: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Streamed tool-call pieces joined into whole calls, in index order."""
    calls: dict[int, dict[str, Any]] = {}
    for piece in pieces:
        call = calls.setdefault(
            int(piece.get("index", 0)),
            {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
        )
        call["id"] = piece.get("id") or call["id"]
        function = piece.get("function") or {}
        call["function"]["name"] += function.get("name") or ""
        call["function"]["arguments"] += function.get("arguments") or ""
    return [calls[i] for i in sorted(calls)]
