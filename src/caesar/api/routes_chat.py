"""POST /v1/chat and the OpenAI-compatible POST /v1/chat/completions."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Annotated, Any, Literal

import pydantic
from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

from caesar.api.deps import Authenticated, BrainDep
from caesar.brain import CHAT, TurnKind
from caesar.errors import CaesarError, InputError, ProviderError
from caesar.gateway.base import Generation, Message
from caesar.memory import conversations

log = logging.getLogger(__name__)
router = APIRouter(dependencies=[Authenticated])

MAX_MESSAGE_CHARS = 100_000
# The client's own conversation id (memory/conversations.py): printable, no spaces.
ConversationId = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[!-~]+$")]


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    content: StrictStr = Field(max_length=MAX_MESSAGE_CHARS)


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: StrictStr = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    history: list[Turn] = Field(default_factory=list, max_length=200)
    # answered with memory, never learned from: no summary, no facts, no windows
    temporary: bool = False
    # which conversation this turn continues; with no history, its turns so far are sent to
    # the model. Without it, a resent history finds the conversation (memory/conversations.py).
    conversation_id: ConversationId | None = None

    @field_validator("message")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("message must not be empty or whitespace")
        return value


class ChatResponse(BaseModel):
    reply: str
    audit_id: int
    recalled: list[int] = Field(description="audit ids of the past conversations recalled")
    conversation_id: str | None = Field(
        description="the conversation this turn belongs to: send it back to continue it"
    )


TEMPORARY_HEADER = "x-caesar-temporary"  # the OpenAI endpoint's way to say `temporary`
# The OpenAI endpoint's way to name a conversation (or a `conversation_id` body field, which
# the SDKs send with extra_body); the response carries the conversation's id in it.
CONVERSATION_HEADER = "x-caesar-conversation"


@router.post("/v1/chat", response_model=ChatResponse)
def chat(body: ChatRequest, brain: BrainDep) -> ChatResponse:
    history: list[Message] = [{"role": t.role, "content": t.content} for t in body.history]
    kind = replace(CHAT, extra={"temporary": True}) if body.temporary else CHAT
    result = brain.turn(body.message, history, kind, conversation=body.conversation_id)
    return ChatResponse(
        reply=result.reply,
        audit_id=result.audit_id,
        recalled=[e.audit_log_id for e in result.recalled],
        conversation_id=result.conversation,
    )


class OpenAIMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: StrictStr | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")
        return self.content or ""


# Accepted and without effect on the reply (usage is always in a stream's last chunk).
HARMLESS = frozenset({"user", "metadata", "store", "stream_options"})
_CONVERSATION_ID: Any = pydantic.TypeAdapter(ConversationId)


class OpenAIChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str = "caesar"
    messages: Annotated[list[OpenAIMessage], Field(min_length=1, max_length=500)]
    stream: bool = False
    # Honoured, over gateway.generation.chat and within the provider's own max_tokens.
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    stop: str | list[str] | None = None
    n: int = 1  # 1 only: caesar answers with one choice

    def refuse_unsupported(self) -> None:
        """A 400 naming what caesar cannot do, rather than a reply that silently ignores it
        (tools, n > 1, logprobs, response_format, …)."""
        if self.n != 1:
            raise InputError("n must be 1: caesar answers with one choice")
        unknown = sorted(set(self.model_extra or {}) - HARMLESS)
        if unknown:
            raise InputError(
                f"unsupported parameter(s): {', '.join(unknown)}; caesar honours model, "
                "messages, stream, max_tokens, max_completion_tokens, temperature and stop"
            )

    def generation(self) -> Generation:
        limits = [x for x in (self.max_tokens, self.max_completion_tokens) if x]
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if len(stop) > 4:
            raise InputError("stop: at most 4 sequences")
        return Generation(min(limits) if limits else None, self.temperature, tuple(stop))


def _split(body: OpenAIChatRequest) -> tuple[str, list[Message]]:
    """The last user message is the turn; earlier user/assistant (and client system) turns are
    history. caesar's own system prompt, with memory, always comes first."""
    turns = [m for m in body.messages if m.role in ("system", "developer", "user", "assistant")]
    if not turns or turns[-1].role != "user" or not turns[-1].text().strip():
        raise InputError("the last message must be a non-empty user message")
    history: list[Message] = [
        {"role": "system" if m.role == "developer" else m.role, "content": m.text()}
        for m in turns[:-1]
    ]
    return turns[-1].text(), history


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


# The official OpenAI SDKs number their automatic retries in this header (0: the first try).
RETRY_HEADER = "x-stainless-retry-count"


def _turn_kind(request: Request) -> TurnKind:
    """A client's automatic retry of a failed request is still a turn, but its row says so
    (`client_retry`: the retry's number), so six rows of one 503 read as one failure, retried."""
    try:
        retry = int(request.headers.get(RETRY_HEADER, "0"))
    except ValueError:
        retry = 0
    extra: dict[str, Any] = {"client_retry": retry} if retry > 0 else {}
    if request.headers.get(TEMPORARY_HEADER, "").lower() in ("1", "true", "yes"):
        extra["temporary"] = True
    return replace(CHAT, extra=extra) if extra else CHAT


def _conversation(body: OpenAIChatRequest, request: Request) -> str | None:
    named = (body.model_extra or {}).pop("conversation_id", None)
    named = request.headers.get(CONVERSATION_HEADER) or named
    if named is None:
        return None
    try:
        return str(_CONVERSATION_ID.validate_python(named))
    except pydantic.ValidationError:
        raise InputError("conversation_id: 1-200 printable characters without spaces") from None


@router.post("/v1/chat/completions", response_model=None)
def chat_completions(
    body: OpenAIChatRequest, brain: BrainDep, request: Request, response: Response
) -> Any:
    named = _conversation(body, request)
    body.refuse_unsupported()
    message, history = _split(body)
    created = int(time.time())
    kind = _turn_kind(request)
    generation = body.generation()
    if not body.stream:
        result = brain.turn(message, history, kind, generation=generation, conversation=named)
        if result.conversation:
            response.headers[CONVERSATION_HEADER] = result.conversation
        return {
            "id": f"chatcmpl-caesar-{result.audit_id}",
            "object": "chat.completion",
            "created": created,
            "model": result.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": result.reply},
                    "finish_reason": result.finish_reason,
                }
            ],
            "usage": _usage(result.usage.prompt_tokens, result.usage.completion_tokens),
        }

    if named is None:
        # The headers go before the turn is written: name its conversation now, so a client
        # streaming without one is still told which it is.
        with brain.services.db.read() as session:
            named = conversations.key_for(session, history)
    ctx = brain.prepare(message, history, conversation=named)
    chunks = brain.stream(ctx, kind, generation=generation)
    # Pull the first chunk before answering, so a provider that fails outright still gets a
    # proper 502/503/504 instead of a broken 200 stream.
    first = next(chunks, None)
    _provider, model = brain.services.gateway.route("chat")
    stream_id = f"chatcmpl-caesar-{uuid.uuid4().hex}"  # one per stream: clients key on it

    def frame(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> str:
        chunk: dict[str, Any] = {
            "id": stream_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage is not None:
            chunk["usage"] = usage
        return f"data: {json.dumps(chunk)}\n\n"

    def events() -> Iterator[str]:
        yield frame({"role": "assistant", "content": ""})
        pending = [first] if first is not None else []
        # The 200 and its headers are gone by now: a failure can only be reported in-band, the
        # way OpenAI does it (an `error` event, which its SDK raises as APIError).
        try:
            for chunk in _chain(pending, chunks):
                if chunk.text:
                    yield frame({"content": chunk.text})
                elif chunk.usage is not None:
                    usage = _usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
                    yield frame({}, chunk.finish_reason or "stop", usage)
        except ProviderError as exc:  # already audited as chat.failed by the brain
            log.warning("chat stream failed: %s", exc)
            yield _error_event(
                "provider_error", str(exc), provider=exc.provider, status=exc.http_status
            )
        except CaesarError as exc:
            log.warning("chat stream failed: %s", exc)
            yield _error_event("unavailable", str(exc))
        except Exception:  # an unexpected bug: logged whole, answered without internals
            log.exception("chat stream failed")
            yield _error_event("internal_error", "internal error; see the server log")
        yield "data: [DONE]\n\n"

    headers = {CONVERSATION_HEADER: named} if named else None
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


@router.get("/v1/models")
def list_models() -> dict[str, Any]:
    """What an OpenAI client can ask for: caesar itself, whatever model its `chat` route uses
    (the `model` a client sends is not a routing choice; gateway.routes.chat is)."""
    return {
        "object": "list",
        "data": [{"id": "caesar", "object": "model", "created": 0, "owned_by": "caesar"}],
    }


def _error_event(kind: str, message: str, **extra: Any) -> str:
    return f"data: {json.dumps({'error': {'type': kind, 'message': message, **extra}})}\n\n"


def _chain(first: list[Any], rest: Iterator[Any]) -> Iterator[Any]:
    yield from first
    yield from rest
