"""POST /v1/chat and the OpenAI-compatible POST /v1/chat/completions."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Annotated, Any, Literal, NamedTuple

import pydantic
from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

from caesar.api.background import TEMPORARY_HEADER, Task, background_task
from caesar.api.deps import Authenticated, BrainDep, ScopeDep
from caesar.brain import CHAT, Brain, TurnContext, TurnKind, background_kind
from caesar.config import BACKGROUND_TASK, CHAT_TASK
from caesar.db.engine import UNAVAILABLE, outage
from caesar.errors import CaesarError, InputError, ProviderError
from caesar.gateway import client_tasks
from caesar.gateway.base import Generation, Message, ToolUse
from caesar.memory import conversations
from caesar.memory.scope import Scope

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


# The OpenAI endpoint's way to name a conversation (or a `conversation_id` body field, which
# the SDKs send with extra_body); the response carries the conversation's id in it. Open
# WebUI's chat id names one too (it sends it on every request of a chat).
CONVERSATION_HEADER = "x-caesar-conversation"
CLIENT_CONVERSATION_HEADERS = (CONVERSATION_HEADER, "x-openwebui-chat-id")
# What the chat route's provider could not take of a request (tools, with a model whose chat
# template has none): answered without it, and said here.
IGNORED_HEADER = "x-caesar-ignored"


@router.post("/v1/chat", response_model=ChatResponse)
def chat(body: ChatRequest, brain: BrainDep, scope: ScopeDep) -> ChatResponse:
    history: list[Message] = [{"role": t.role, "content": t.content} for t in body.history]
    kind = replace(CHAT, extra={"temporary": True}) if body.temporary else CHAT
    result = brain.turn(body.message, history, kind, conversation=body.conversation_id, scope=scope)
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
    tool_calls: list[dict[str, Any]] | None = Field(default=None, max_length=128)
    tool_call_id: str | None = Field(default=None, max_length=200)

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")
        return self.content or ""

    def as_message(self) -> Message:
        """As the model sees it: a client's system and developer messages are system ones."""
        role = "system" if self.role == "developer" else self.role
        out: Message = {"role": role, "content": self.text()}
        if self.tool_calls and self.role == "assistant":
            out["tool_calls"] = self.tool_calls
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id or ""
        return out

    def spoken(self) -> bool:
        """Part of what was said: not a tool's result, nor an assistant turn that called tools
        (its words belong to the tool loop; the loop's final reply is the answer)."""
        return self.role != "tool" and not (self.role == "assistant" and self.tool_calls)


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
    # A client's tools, passed through to a provider that takes them (issue #26).
    tools: list[dict[str, Any]] | None = Field(default=None, max_length=128)
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None

    def refuse_unsupported(self) -> None:
        """A 400 naming what caesar cannot do, rather than a reply that silently ignores it
        (n > 1, logprobs, …)."""
        if self.n != 1:
            raise InputError("n must be 1: caesar answers with one choice")
        unknown = sorted(set(self.model_extra or {}) - HARMLESS)
        if unknown:
            raise InputError(
                f"unsupported parameter(s): {', '.join(unknown)}; caesar honours model, "
                "messages, stream, max_tokens, max_completion_tokens, temperature, stop, "
                "tools, tool_choice, parallel_tool_calls and response_format"
            )

    def generation(self) -> Generation:
        limits = [x for x in (self.max_tokens, self.max_completion_tokens) if x]
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if len(stop) > 4:
            raise InputError("stop: at most 4 sequences")
        return Generation(min(limits) if limits else None, self.temperature, tuple(stop))

    def tool_use(self) -> ToolUse:
        return ToolUse(
            tuple(self.tools or ()),
            self.tool_choice,
            self.parallel_tool_calls,
            self.response_format,
        )


class Sent(NamedTuple):
    """An OpenAI request's messages, read (issue #26 for tool loops)."""

    message: str  # the operator's last message: the turn, and what memory is recalled for
    history: list[Message]  # what was said before it: recognises the conversation
    wire: list[Message]  # everything before it, as the model sees it (tool calls and results)
    tail: list[Message]  # after it: the model's calls of the client's tools and their results


def _split(body: OpenAIChatRequest) -> Sent:
    """The last user message is the turn; earlier user/assistant (and client system) turns are
    history. After it may come a tool loop: the model's calls and their results, the last
    message a result. caesar's own system prompt, with memory, always comes first."""
    last = max((i for i, m in enumerate(body.messages) if m.role == "user"), default=None)
    after = body.messages[last + 1 :] if last is not None else []
    looping = bool(after) and after[-1].role == "tool"
    if (
        last is None
        or not body.messages[last].text().strip()
        or (after and not looping)
        or any(not (m.role == "tool" or m.tool_calls) for m in after)
    ):
        raise InputError(
            "the last message must be a non-empty user message, or a tool result that follows "
            "the tool calls answering one"
        )
    before = [m for m in body.messages[:last] if m.role != "tool" or m.tool_call_id]
    return Sent(
        body.messages[last].text(),
        [m.as_message() for m in before if m.spoken()],
        [m.as_message() for m in before],
        [m.as_message() for m in after],
    )


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
    return replace(CHAT, extra=extra) if extra else CHAT


def _conversation(body: OpenAIChatRequest, request: Request) -> str | None:
    named = (body.model_extra or {}).pop("conversation_id", None)
    headers = (request.headers.get(h) for h in CLIENT_CONVERSATION_HEADERS)
    named = next((h for h in headers if h), None) or named
    if named is None:
        return None
    try:
        return str(_CONVERSATION_ID.validate_python(named))
    except pydantic.ValidationError:
        raise InputError("conversation_id: 1-200 printable characters without spaces") from None


@router.post("/v1/chat/completions", response_model=None)
def chat_completions(
    body: OpenAIChatRequest,
    brain: BrainDep,
    request: Request,
    response: Response,
    scope: ScopeDep,
) -> Any:
    person = scope.person
    named = _conversation(body, request)
    body.refuse_unsupported()
    generation, headers, sent = _passthrough(body, brain, _split(body), _caller(request))
    task = background_task(
        sent.message,
        request.headers.get(TEMPORARY_HEADER),
        brain.settings.clients.background_markers,
    )
    if task is not None:
        ctx = brain.prepare_background([m.as_message() for m in body.messages], scope=scope)
        kind = background_kind(task.kind, named, _task_route(brain, task))
        generation = _for_task(generation, task)
    else:
        kind = _turn_kind(request)
        if body.stream and named is None:
            # The headers go before the turn is written: name its conversation now, so a client
            # streaming without one is still told which it is.
            with brain.services.db.read() as session:
                named = conversations.key_for(Scope(person, session), sent.history)
        ctx = brain.prepare(
            sent.message,
            sent.history,
            conversation=named,
            scope=scope,
            wire=sent.wire,
            tail=sent.tail,
        )
    if not body.stream:
        result = brain.answer(ctx, kind, generation)
        if result.conversation:
            headers[CONVERSATION_HEADER] = result.conversation
        response.headers.update(headers)
        message: dict[str, Any] = {"role": "assistant", "content": result.reply}
        if result.tool_calls:
            message["content"] = result.reply or None
            message["tool_calls"] = result.tool_calls
        return {
            "id": f"chatcmpl-caesar-{result.audit_id}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": result.model,
            "choices": [{"index": 0, "message": message, "finish_reason": result.finish_reason}],
            "usage": _usage(result.usage.prompt_tokens, result.usage.completion_tokens),
        }
    if named and kind.remembered:
        headers[CONVERSATION_HEADER] = named
    return _stream(brain, ctx, kind, generation, headers)


# (who called, the parameter) already named in the log by this process: a client that sends
# tools with every request gets one line each, not one a request
_SAID_IGNORED: set[tuple[str, str]] = set()
_SAID_IGNORED_MAX = 10_000
_SAID_LOCK = threading.Lock()


def _say_ignored(provider: str, ignored: list[str], caller: str) -> None:
    """A warning (seen at the default log level) naming each parameter the chat provider
    cannot take, once per parameter and caller in this process."""
    with _SAID_LOCK:
        new = [name for name in ignored if (caller, name) not in _SAID_IGNORED]
        if len(_SAID_IGNORED) < _SAID_IGNORED_MAX:
            _SAID_IGNORED.update((caller, name) for name in new)
    for name in new:
        log.warning(
            "the chat provider %s cannot take the client's %r: answered without it (the reply "
            "says so in X-Caesar-Ignored; said once per parameter and token)",
            provider,
            name,
        )


def _caller(request: Request) -> str:
    """Who is calling, as a key that holds no secret: a hash of their bearer token."""
    raw = request.headers.get("authorization", "")
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def _passthrough(
    body: OpenAIChatRequest, brain: Brain, sent: Sent, caller: str = ""
) -> tuple[Generation, dict[str, str], Sent]:
    """The request's generation, with the tool parameters the chat route's provider takes;
    what it cannot take is dropped, logged and named in a response header. To a provider that
    takes no tools, a tool loop in the history is sent as what was said."""
    generation = body.generation()
    asked = body.tool_use()
    if not asked.asked() and sent.wire == sent.history and not sent.tail:
        return generation, {}, sent
    provider, _model = brain.services.gateway.route("chat")
    if "tools" not in provider.takes:
        sent = sent._replace(wire=sent.history, tail=[])
    ignored = [name for name in asked.asked() if name not in provider.takes]
    headers = {}
    if ignored:
        _say_ignored(provider.name, ignored, caller)
        headers[IGNORED_HEADER] = ", ".join(ignored)
    kept = asked.only(provider.takes)
    return replace(generation, tools=kept if kept.asked() else None), headers, sent


def _task_route(brain: Brain, task: Task) -> str:
    """Where a background request is answered: the `chat_background` route for a client's
    task, unless it routes offline and the task is one the offline provider cannot answer
    (then the chat model, as before issue #49). A temporary chat is the operator speaking: the
    chat route."""
    if task.kind == "temporary":
        return CHAT_TASK
    provider, _model = brain.services.gateway.route(BACKGROUND_TASK)
    if provider.can_chat or task.kind in client_tasks.ANSWERED:
        return BACKGROUND_TASK
    return CHAT_TASK


def _for_task(generation: Generation, task: Task) -> Generation:
    """A background request: its kind's reply limit, under the client's own; and it yields to
    the operator's turns on a one-slot local model."""
    limits = [x for x in (generation.max_tokens, task.max_tokens) if x]
    return replace(generation, max_tokens=min(limits) if limits else None, background=True)


def _stream(
    brain: Brain,
    ctx: TurnContext,
    kind: TurnKind,
    generation: Generation,
    headers: dict[str, str],
) -> StreamingResponse:
    created = int(time.time())
    chunks = brain.stream(ctx, kind, generation=generation)
    # Pull the first chunk before answering, so a provider that fails outright still gets a
    # proper 502/503/504 instead of a broken 200 stream.
    first = next(chunks, None)
    _provider, model = brain.services.gateway.route(kind.task)
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
                if chunk.tool_calls:
                    yield frame({"tool_calls": chunk.tool_calls})
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
        except UNAVAILABLE as exc:  # the database went down before the turn was written
            log.warning("chat stream failed: database unavailable: %s", outage(exc))
            yield _error_event("database_unavailable", STREAM_NOT_SAVED)
        except Exception:  # an unexpected bug: logged whole, answered without internals
            log.exception("chat stream failed")
            yield _error_event("internal_error", "internal error; see the server log")
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers=headers or None)


@router.get("/v1/models")
def list_models() -> dict[str, Any]:
    """What an OpenAI client can ask for: caesar itself, whatever model its `chat` route uses
    (the `model` a client sends is not a routing choice; gateway.routes.chat is)."""
    return {
        "object": "list",
        "data": [{"id": "caesar", "object": "model", "created": 0, "owned_by": "caesar"}],
    }


STREAM_NOT_SAVED = "The database became unavailable: this reply was not saved."


def _error_event(kind: str, message: str, **extra: Any) -> str:
    return f"data: {json.dumps({'error': {'type': kind, 'message': message, **extra}})}\n\n"


def _chain(first: list[Any], rest: Iterator[Any]) -> Iterator[Any]:
    yield from first
    yield from rest
