"""One brain turn: a chat message from the operator, or a proactive run caesar starts itself.

    1. facts, ranked by importance, capped           (facts block)
    2. embed the message (on another thread, while 1 and what needs no vector are read),
       auto-recall episodes, with the excerpts of each that match, under one character budget
                                                     (past conversations block)
       (both gathered by memory/context/build.py)
    3. system prompt = base + facts + episodes + operator prompt; for a small model (the
       chat route's `prompt`, "small" for the embedded one): a short system prompt, and the
       memory as plain sentences in the operator's turn (memory/recall/plain.py)
    4. gateway.complete(messages, task="chat")
    5. one write transaction: chat.completed (or chat.failed), memory.episode.recalled rows,
       recall counters bumped, the turn joined to its conversation (memory/conversations.py)

Memory never breaks a turn: a recall failure is audited and the turn goes on without it.
Nothing slow runs inside a database transaction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from caesar import audit
from caesar.clock import utcnow
from caesar.config import CHAT_TASK
from caesar.errors import ProviderError
from caesar.gateway.base import (
    Completion,
    Generation,
    Message,
    StreamChunk,
    Usage,
    join_tool_calls,
)
from caesar.memory import conversations
from caesar.memory.context.build import (
    SentenceVectors,
    facts_for_prompt,
    plain_memory,
    standing_for_prompt,
)
from caesar.memory.recall import pipeline, plain
from caesar.memory.recall.hits import RecalledEpisode, TurnMemory
from caesar.memory.recall.question import NOTHING, Asked
from caesar.memory.render import system_prompt
from caesar.memory.scope import Scope
from caesar.named_time import asked_json, named

if TYPE_CHECKING:
    from caesar.container import Container

log = logging.getLogger(__name__)

MAX_HISTORY_TURNS = 100


@dataclass
class TurnContext:
    now: datetime
    message: str
    history: list[Message]
    messages: list[Message]
    facts_used: int
    # whose turn it is (issue #23): their memory is read, their rows are written
    person: int
    fact_keys: list[str] = field(default_factory=list)  # the facts injected, by key
    standing_ids: list[int] = field(default_factory=list)  # the standing statements, by id
    recalled: list[RecalledEpisode] = field(default_factory=list)
    recall_error: str | None = None
    asked: Asked = NOTHING  # the spans the message named, whether it gathers (memory/search)
    memory_ms: float = 0.0
    audit_id: int | None = None  # set once the turn is recorded
    partial_reply: str | None = None  # what was streamed before a turn broke off
    # the client's own conversation id, if it named one; the conversation's key once recorded
    conversation: str | None = None
    # the history as sent, before MAX_HISTORY_TURNS: what recognises the conversation
    sent_history: list[Message] = field(default_factory=list)
    # a client's tool loop after the operator's message: the model's calls and their results
    # (issue #26). A round with these gets the same memory as its turn, not counted again.
    tail: list[Message] = field(default_factory=list)


@dataclass
class TurnResult:
    reply: str
    audit_id: int
    provider: str
    model: str
    usage: Usage
    latency_ms: float
    recalled: list[RecalledEpisode]
    finish_reason: str = "stop"  # "length": cut at max_tokens; "tool_calls"
    conversation: str | None = None  # the conversation's key (chat turns)
    tool_calls: list[dict[str, Any]] | None = None  # the model's calls of the client's tools


@dataclass(frozen=True)
class TurnKind:
    completed: str
    failed: str
    extra: dict[str, Any] = field(default_factory=dict)
    subject_key: str | None = None  # proactive runs: the run's name, so its last run is indexed
    conversational: bool = False  # its turns belong to a conversation (memory/conversations.py)
    # False: a client's background request (api/background.py), whose row holds none of its
    # text: not the operator speaking, so nothing of it is kept
    remembered: bool = True
    task: str = CHAT_TASK  # the gateway's route for the reply


CHAT = TurnKind(audit.CHAT_COMPLETED, audit.CHAT_FAILED, conversational=True)


def background_kind(task: str, conversation: str | None, route: str = CHAT_TASK) -> TurnKind:
    """A client's background request of kind `task` ("title", "tags", … "temporary"), answered
    on the gateway's `route`."""
    extra: dict[str, Any] = {"task": task}
    if conversation:
        extra["conversation"] = conversation
    return TurnKind(
        audit.CHAT_BACKGROUND, audit.CHAT_BACKGROUND, extra, remembered=False, task=route
    )


def proactive_kind(name: str) -> TurnKind:
    return TurnKind(
        audit.PROACTIVE_COMPLETED, audit.PROACTIVE_FAILED, {"proactive": name}, subject_key=name
    )


class Brain:
    def __init__(self, services: Container) -> None:
        self.services = services
        self.settings = services.settings
        self.small = self.settings.chat_prompt() == "small"
        self._vectors = SentenceVectors(services.embedder) if services.embedder.enabled else None

    # -- step 1-3 ---------------------------------------------------------------------------
    def prepare(
        self,
        message: str,
        history: list[Message] | None = None,
        now: datetime | None = None,
        conversation: str | None = None,
        *,
        scope: Scope,
        wire: list[Message] | None = None,
        tail: list[Message] | None = None,
    ) -> TurnContext:
        """`person`'s turn: their memory alone is read for it. `conversation`: the client's
        id for it; with no `history`, the conversation's turns
        so far are the history (a client may name the conversation instead of resending it).
        A client's tool loop: `history` is what was said (recognises the conversation), `wire`
        the same with its tool calls and results, as the model sees it, and `tail` the calls
        and results after `message` (issue #26)."""
        person = scope.person
        started = time.perf_counter()
        now = now or utcnow()
        sent = list(history or [])
        if conversation is not None and not sent:
            with self.services.db.read() as session:
                sent = conversations.transcript_of(Scope(person, session), conversation) or []
        history = sent[-MAX_HISTORY_TURNS:]
        recall = self.settings.memory.episodes_recall
        recalling = recall.enabled and self.services.embedder.enabled
        # The message is embedded on another thread while its facts are read.
        vector = self.services.episodes.embed_query_soon(message) if recalling else None
        inject = self.settings.memory.facts_inject
        memory = facts_for_prompt(
            self.services.facts, inject, now, scope=scope, sentences=self.small
        )
        if recalling:
            episodes = self.services.episodes
            with episodes.reading(person, now) as scope:
                found = pipeline.recall(
                    episodes,
                    scope,
                    message,
                    current=conversations.Current.of(conversation, sent),
                    vector=vector,
                )
            memory.episodes_text, memory.recalled = found.text, found.episodes
            memory.asked, memory.recall_error = found.asked, found.error
        # after recall: by then the message's vector is there (recall overlaps its embedding
        # with the reads that need none); without recall it is embedded only for a person
        # with statements
        embed = self.services.episodes.embed_query_soon if self.services.embedder.enabled else None
        standing_for_prompt(
            self.services.standing,
            self.settings.memory.standing,
            self.settings.memory.facts_importance,
            now,
            memory,
            scope=scope,
            vector=vector,
            embed=None if embed is None else (lambda: embed(message)),
            zone=self.services.episodes.zone,
            small=self.small,
        )
        ctx = TurnContext(
            now,
            message,
            history,
            [],
            facts_used=memory.facts_used,
            person=person,
            fact_keys=memory.fact_keys,
        )
        ctx.conversation, ctx.sent_history = conversation, sent
        ctx.tail = list(tail or [])
        ctx.recalled, ctx.recall_error = memory.recalled, memory.recall_error
        ctx.standing_ids = memory.standing_ids
        ctx.asked = memory.asked
        system, said = self._prompt(memory, message, now)
        ctx.messages = [
            {"role": "system", "content": system},
            *(history if wire is None else wire[-MAX_HISTORY_TURNS:]),
            {"role": "user", "content": said},
            *ctx.tail,
        ]
        ctx.memory_ms = (time.perf_counter() - started) * 1000
        return ctx

    def _prompt(self, memory: TurnMemory, message: str, now: datetime) -> tuple[str, str]:
        """(system prompt, the operator's turn as the model reads it)."""
        operator = self.settings.operator_prompt
        if not self.small:
            facts, episodes = memory.facts_text, memory.episodes_text
            prompt = system_prompt(
                self.settings.system_prompt, facts, episodes, operator, memory.standing_text
            )
            return prompt, message
        # the operator's own base prompt, if they set one; else the short one
        chosen = "system_prompt" in self.settings.model_fields_set
        base = self.settings.system_prompt if chosen else plain.SMALL_SYSTEM_PROMPT
        zone = self.services.episodes.zone
        block = plain_memory(memory, message, now, zone, self._vectors)
        system = "\n\n".join(part for part in (base, operator) if part)
        return system, plain.with_memory(block, message)

    def prepare_background(self, messages: list[Message], *, scope: Scope) -> TurnContext:
        """A client's background request (api/background.py): its own messages, no memory;
        its row is `person`'s."""
        person = scope.person
        said = [m["content"] for m in messages if m["role"] == "user"]
        return TurnContext(
            utcnow(), said[-1] if said else "", [], list(messages), facts_used=0, person=person
        )

    # -- step 5 -----------------------------------------------------------------------------
    def _record(
        self,
        ctx: TurnContext,
        kind: TurnKind,
        completion: Completion | None,
        error: ProviderError | None,
        latency_ms: float,
    ) -> int:
        memory = {
            "facts_injected": ctx.facts_used,
            # keys, not values: a value forgotten later must not live on in every turn's row
            "fact_keys": ctx.fact_keys,
            "episodes_recalled": [e.audit_log_id for e in ctx.recalled],
            # ids, not text: a statement forgotten later must not live on in every turn's row
            "standing_injected": ctx.standing_ids,
            "memory_ms": round(ctx.memory_ms, 2),
        }
        if named(ctx.asked):
            # Only when the message named a span or gathers: most turns don't, and every turn
            # writes this row. The spans on the operator's clock too, as they meant them.
            memory["asked"] = asked_json(ctx.asked, self.services.episodes.zone)
        if ctx.asked.time.spans:  # the recalled conversations held in them (chat row ids)
            memory["episodes_in_span"] = [
                e.audit_log_id for e in ctx.recalled if ctx.asked.time.contains(e.created_at)
            ]
        question: Message = {"role": "user", "content": ctx.message}
        sent = [*ctx.history, question]
        if not kind.remembered:
            return self._record_unremembered(ctx, kind, completion, error, latency_ms)
        if ctx.tail:
            memory["tool_round"] = True
        if completion is not None and completion.tool_calls:
            return self._record_tool_calls(ctx, completion, memory, latency_ms)
        if completion is not None:
            row = audit.AuditEntry(
                kind.completed,
                {
                    **kind.extra,
                    "messages": sent,
                    "reply": completion.text,
                    "provider": completion.provider,
                    "model": completion.model,
                    "usage": completion.usage.as_dict(),
                    "latency_ms": round(latency_ms, 2),
                    "memory": memory,
                    # a tool loop's calls and results: kept with the turn, never learned from
                    **({"tool_exchange": ctx.tail} if ctx.tail else {}),
                },
                subject_key=kind.subject_key,
                created_at=ctx.now,
            )
        else:
            assert error is not None
            # the server's log says it too, not only the audit row (issue #15)
            log.warning("%s after %.0f ms: %s", kind.failed, latency_ms, error)
            row = audit.AuditEntry(
                kind.failed,
                {
                    **kind.extra,
                    "messages": sent,
                    "provider": error.provider,
                    "error": error.detail,
                    "error_type": type(error).__name__,
                    "status": error.http_status,
                    "latency_ms": round(latency_ms, 2),
                    "memory": memory,
                    **({"partial_reply": ctx.partial_reply} if ctx.partial_reply else {}),
                },
                subject_key=kind.subject_key,
                created_at=ctx.now,
            )

        # append_many, not append: no ORM flush per row (this runs on every turn). The turn's
        # row goes first, alone: the rows after it carry its id.
        def write(session: Session) -> tuple[int, str | None]:
            # The append lock before the conversation is looked up (PostgreSQL): a forget
            # holding it may be deleting that conversation (memory/forget.py).
            audit.serialise_appends(session)
            entry, conversation = row, None
            if kind.conversational:
                conversation = conversations.resolve(
                    Scope(ctx.person, session), ctx.sent_history, ctx.now, ctx.conversation
                )
                key = None
                if completion is not None:  # what the next turn's history will be
                    reply: Message = {"role": "assistant", "content": completion.text}
                    key = conversations.turns_key([*ctx.sent_history, question, reply])
                entry = row._replace(subject_id=conversation.id, subject_key=key)
            [turn_id] = self.services.audit.append_many(Scope(ctx.person, session), [entry])
            if conversation is not None and completion is not None:
                conversations.record_turn(session, conversation, turn_id, ctx.now)
            if ctx.recall_error:
                self.services.audit.append_many(
                    Scope(ctx.person, session),
                    [
                        audit.AuditEntry(
                            audit.RECALL_FAILED,
                            {"error": ctx.recall_error, "turn_audit_id": turn_id},
                        )
                    ],
                )
            # Only an answered turn counts as a recall: a failed one (and a client's automatic
            # retries of it) must not raise an episode's weight (issue #13). Its row still
            # names the episodes that were in its prompt. A tool round's were counted when its
            # turn began.
            if ctx.recalled and completion is not None and not ctx.tail:
                self.services.episodes.record_recalls(
                    Scope(ctx.person, session),
                    ctx.recalled,
                    now=ctx.now,
                    context={"turn_audit_id": turn_id},
                )
            return int(turn_id), (conversation.key if conversation else None)

        turn_id, ctx.conversation = self.services.db.write_retrying(write)
        return turn_id

    def _record_tool_calls(
        self, ctx: TurnContext, completion: Completion, memory: dict[str, Any], latency_ms: float
    ) -> int:
        """The model called the client's tools: the turn is not over, so it is no conversation
        turn yet; its row names the calls (not their arguments) and counts the recall once, on
        the turn's first round."""
        row = audit.AuditEntry(
            audit.CHAT_TOOL_CALLS,
            {
                "tool_calls": [
                    {"id": c.get("id", ""), "name": (c.get("function") or {}).get("name", "")}
                    for c in completion.tool_calls or []
                ],
                "provider": completion.provider,
                "model": completion.model,
                "usage": completion.usage.as_dict(),
                "latency_ms": round(latency_ms, 2),
                "memory": memory,
            },
            created_at=ctx.now,
        )

        def write(session: Session) -> int:
            audit.serialise_appends(session)
            [turn_id] = self.services.audit.append_many(Scope(ctx.person, session), [row])
            if ctx.recalled and not ctx.tail:
                self.services.episodes.record_recalls(
                    Scope(ctx.person, session),
                    ctx.recalled,
                    now=ctx.now,
                    context={"turn_audit_id": turn_id},
                )
            return int(turn_id)

        return self.services.db.write_retrying(write)

    def _record_unremembered(
        self,
        ctx: TurnContext,
        kind: TurnKind,
        completion: Completion | None,
        error: ProviderError | None,
        latency_ms: float,
    ) -> int:
        """A background request's row: which kind, who answered, how long; none of its text."""
        if completion is not None:
            payload: dict[str, Any] = {
                **kind.extra,
                "provider": completion.provider,
                "model": completion.model,
                "usage": completion.usage.as_dict(),
                "finish_reason": completion.finish_reason,
            }
        else:
            assert error is not None
            log.warning("%s (%s) failed: %s", kind.failed, kind.extra.get("task"), error)
            payload = {
                **kind.extra,
                "provider": error.provider,
                "error": error.detail,
                "error_type": type(error).__name__,
                "status": error.http_status,
            }
        payload["latency_ms"] = round(latency_ms, 2)
        entry = audit.AuditEntry(kind.completed, payload, created_at=ctx.now)

        def write(session: Session) -> int:
            audit.serialise_appends(session)
            [row_id] = self.services.audit.append_many(Scope(ctx.person, session), [entry])
            return int(row_id)

        return self.services.db.write_retrying(write)

    # -- a whole turn -----------------------------------------------------------------------
    def turn(
        self,
        message: str,
        history: list[Message] | None = None,
        kind: TurnKind = CHAT,
        generation: Generation | None = None,
        conversation: str | None = None,
        *,
        scope: Scope,
    ) -> TurnResult:
        """`person`'s turn. `generation`: the caller's (never past the provider's own
        max_tokens); `conversation`: the client's id for it (see `prepare`)."""
        ctx = self.prepare(message, history, conversation=conversation, scope=scope)
        return self.answer(ctx, kind, generation)

    def answer(
        self, ctx: TurnContext, kind: TurnKind = CHAT, generation: Generation | None = None
    ) -> TurnResult:
        """The reply to a prepared turn, recorded."""
        started = time.perf_counter()
        try:
            completion = self.services.gateway.complete(
                ctx.messages, task=kind.task, generation=generation
            )
        except ProviderError as exc:
            self._record(ctx, kind, None, exc, (time.perf_counter() - started) * 1000)
            raise
        latency = (time.perf_counter() - started) * 1000
        audit_id = self._record(ctx, kind, completion, None, latency)
        return TurnResult(
            reply=completion.text,
            audit_id=audit_id,
            provider=completion.provider,
            model=completion.model,
            usage=completion.usage,
            latency_ms=latency,
            recalled=ctx.recalled,
            finish_reason=completion.finish_reason,
            conversation=ctx.conversation,
            tool_calls=completion.tool_calls,
        )

    def stream(
        self, ctx: TurnContext, kind: TurnKind = CHAT, generation: Generation | None = None
    ) -> Iterator[StreamChunk]:
        """Stream the reply of a prepared turn; audits once the stream ends (or breaks) and sets
        `ctx.audit_id`. The last chunk is empty and carries the usage."""
        provider, model = self.services.gateway.route(kind.task)
        started = time.perf_counter()
        parts: list[str] = []
        calls: list[dict[str, Any]] = []
        usage = Usage()
        finish = "stop"
        try:
            chunks = self.services.gateway.stream(
                ctx.messages, task=kind.task, generation=generation
            )
            for chunk in chunks:
                if chunk.usage is not None:
                    usage = chunk.usage
                if chunk.finish_reason is not None:
                    finish = chunk.finish_reason
                calls += chunk.tool_calls or []
                if chunk.text:
                    parts.append(chunk.text)
                if chunk.text or chunk.tool_calls:
                    yield chunk
        except ProviderError as exc:
            self._record(ctx, kind, None, exc, (time.perf_counter() - started) * 1000)
            raise
        except GeneratorExit:
            # The client went away mid-stream: the turn still leaves its row, with what was said.
            gone = ProviderError(provider.name, "client disconnected before the reply finished")
            ctx.partial_reply = "".join(parts)
            self._record(ctx, kind, None, gone, (time.perf_counter() - started) * 1000)
            raise
        latency = (time.perf_counter() - started) * 1000
        completion = Completion("".join(parts), provider.name, model, usage, latency, finish)
        completion.tool_calls = join_tool_calls(calls) if calls else None
        ctx.audit_id = self._record(ctx, kind, completion, None, latency)
        yield StreamChunk("", usage=usage, finish_reason=finish)
