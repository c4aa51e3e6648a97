"""caesar's memory for any agent: a Model Context Protocol server (issue #14), on the official
`mcp` SDK.

Two transports, one server: `caesar mcp` speaks stdio (Claude Desktop, Claude Code, Cursor),
and `caesar serve` mounts streamable HTTP at `/mcp`, behind the API token and its failed-token
limit (api/mcp_http.py). Every tool calls the same services the HTTP API does — recall's
preview, the facts store, `caesar.memory.forget`, the importer — so nothing is implemented
twice.

Every tool call that reads or changes memory leaves one `mcp.tool_called` audit row: the tool,
`source: "mcp"`, the transport, the argument *names* (never their values: a saved
conversation is in its own chat row, and nothing a client sends lands in the log twice), what
it touched (ids, counts) and, for a refusal, why. What a call changes is audited as the API's
calls are: `memory.fact.user_edited`, `memory.user_added`, `memory.user_deleted`,
`memory.forgotten`, the imported `chat.completed` row.

Bad input is an MCP tool error with a clear message, never a crash and never half a change:
arguments are validated against the tools' JSON schemas before anything runs (lengths, ranges,
types), and caesar's own errors (an unknown conversation, a bad fact key) become `ToolError`s.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from caesar import __version__, audit
from caesar.clock import to_naive_utc, utcnow
from caesar.errors import CaesarError
from caesar.importer import import_conversations
from caesar.memory import conversations
from caesar.memory import forget as forgetting
from caesar.memory.context.build import facts_for_prompt, standing_for_prompt
from caesar.memory.facts.store import MAX_VALUE, normalise_key
from caesar.memory.forget import ForgetRequest, forget
from caesar.memory.recall.hits import TurnMemory
from caesar.memory.recall.pipeline import preview
from caesar.memory.scope import Scope
from caesar.memory.standing import kinds
from caesar.memory.standing.store import MAX_TEXT as MAX_STATEMENT
from caesar.named_time import asked_json

if TYPE_CHECKING:
    from caesar.container import Container

log = logging.getLogger(__name__)

MAX_TEXT = 20_000  # a recall / search text, a note
MAX_MESSAGE = 100_000  # one message of a saved conversation (= POST /v1/chat)
MAX_MESSAGES = 500
FACTS_URI = "caesar://facts"
EPISODES_URI = "caesar://episodes/recent"

INSTRUCTIONS = """caesar is the operator's personal memory: facts about them, what they told it
about themselves (how to answer, diet, family, …) and summaries of their past conversations,
with the excerpts that matter. Call `recall` with what the user is asking about before
answering anything personal; `remember` what they ask you to keep, `remember_about_me` what
they say holds for them; `save_conversation` to let caesar learn from a conversation held
here."""

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ADDS = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
CHANGES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]
TopK = Annotated[int, Field(ge=1, le=50, description="at most this many past conversations")]
Key = Annotated[
    str,
    Field(min_length=1, max_length=100, description="snake_case name, e.g. dog_name, home_city"),
]
Value = Annotated[str, Field(min_length=1, max_length=MAX_VALUE)]
# kinds.KINDS, spelled out for the tools' JSON schema (tests/test_standing_surfaces.py checks)
Kind = Literal["instruction", "constraint", "preference", "profile"]
MemoryId = Annotated[
    int, Field(ge=1, le=2**63 - 1, description="a statement's id, or a said memory's")
]
MAX_RECALLED_MEMORIES = 30


class _Calls:
    """The audit of tool calls, and the translation of caesar's errors into tool errors."""

    def __init__(self, services: Container, transport: str, scope: Scope) -> None:
        person = scope.person
        self.services = services
        self.transport = transport
        self.person = person

    @contextmanager
    def __call__(self, tool: str, arguments: dict[str, Any]) -> Iterator[dict[str, Any]]:
        touched: dict[str, Any] = {}
        row: dict[str, Any] = {
            "tool": tool,
            "source": "mcp",
            "transport": self.transport,
            "arguments": sorted(k for k, v in arguments.items() if v is not None),
        }
        try:
            yield touched
            row.update(ok=True, **touched)
        except CaesarError as exc:
            row.update(ok=False, error=str(exc)[:500])
            raise ToolError(str(exc)) from None
        except ToolError as exc:
            row.update(ok=False, error=str(exc)[:500])
            raise
        finally:
            try:
                with self.services.db.write() as session:
                    self.services.audit.append(
                        Scope(self.person, session), audit.MCP_TOOL_CALLED, row, subject_key=tool
                    )
            except Exception:  # noqa: BLE001 - the call's own outcome stands; the log says it
                log.exception("mcp: could not audit a call of %s", tool)


def _conversation_ids(
    services: Container, audit_ids: list[int], scope: Scope
) -> dict[int, int | None]:
    """chat row id → its conversation."""
    person = scope.person
    with services.db.read() as session:
        return audit.subjects(Scope(person, session), audit_ids)


def _episodes_json(services: Container, found: list[Any], scope: Scope) -> list[dict[str, Any]]:
    owners = _conversation_ids(services, [e.audit_log_id for e in found], scope)
    return [{**e.as_json(), "conversation_id": owners.get(e.audit_log_id)} for e in found]


def _memory_json(memory: Any) -> dict[str, Any]:
    return {
        "id": memory.id,
        "kind": memory.kind,
        "slot": memory.slot,
        "text": memory.text,
        "said_at": memory.said_at.isoformat(),
    }


def _memories_for(services: Container, text: str, now: datetime, scope: Scope) -> list[Any]:
    """The standing statements a turn saying `text` would carry in its prompt, as the brain
    chooses them (memory/standing/prompt.py), at most MAX_RECALLED_MEMORIES."""
    embed = services.episodes.embed_query_soon if services.embedder.enabled else None
    chosen = standing_for_prompt(
        services.standing,
        services.settings.memory.standing,
        services.settings.memory.facts_importance,
        now,
        TurnMemory(facts_text="", facts_used=0),
        scope=scope,
        vector=None,
        embed=None if embed is None else (lambda: embed(text)),
        zone=services.episodes.zone,
    )
    if chosen.recall_error:
        log.warning("mcp recall: standing statements failed: %s", chosen.recall_error)
    found = chosen.standing
    return found[:MAX_RECALLED_MEMORIES]


def build(services: Container, *, transport: str, scope: Scope) -> MCPServer:
    """The MCP server over `services`, for `person` (every tool and resource reads and writes
    their memory alone); `transport` ("stdio" or "http") is what its audit rows say."""
    person = scope.person
    server: MCPServer = MCPServer(
        name="caesar", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )
    calls = _Calls(services, transport, scope)
    recall_settings = services.settings.memory.episodes_recall

    @server.tool(annotations=READ_ONLY)
    def recall(text: Text, top_k: TopK | None = None) -> dict[str, Any]:
        """What caesar would bring into its own prompt for `text`: the facts it knows about
        the user (most important first), what the user told it about themselves that bears on
        `text` (`memories`: how to answer, diet, family, …, each with its kind and the date it
        was said), and the past conversations it finds relevant, best first, each with its
        date, summary, verbatim excerpts, the things said in it that bear on `text` (`said`:
        one dated sentence each, by the user or by caesar) and every score (relevance,
        keyword, recency).
        `asked` says which span of time `text` names (with its dates on the user's clock), and
        each conversation's `in_span` whether it was held then. Read-only; counts nothing as
        recalled. Use it before answering anything about the user's life, plans or past."""
        with calls("recall", {"text": text, "top_k": top_k}) as touched:
            now = utcnow()
            overrides = {"top_k": top_k} if top_k else {}
            with services.episodes.reading(person, now) as scope:
                found = preview(services.episodes, scope, recall_settings, text, **overrides)
            inject = services.settings.memory.facts_inject
            facts = facts_for_prompt(services.facts, inject, now, scope=Scope(person)).facts
            memories = _memories_for(services, text, now, Scope(person))
            touched.update(
                episodes=[e.episode_id for e in found],
                facts=len(facts),
                memories=[m.id for m in memories],
            )
            asked = services.episodes.read(text, now)
            episodes = [
                {**data, "in_span": asked.time.contains(e.created_at)}
                for e, data in zip(
                    found, _episodes_json(services, found, Scope(person)), strict=True
                )
            ]
            return {
                "facts": [{"key": f.key, "value": f.value} for f in facts],
                "memories": [_memory_json(m) for m in memories],
                "episodes": episodes,
                "asked": asked_json(asked, services.episodes.zone),
            }

    @server.tool(annotations=READ_ONLY)
    def search(query: Text, top_k: TopK = 10) -> dict[str, Any]:
        """Search all past conversations for `query`, however old and however weak the match
        (auto-recall's threshold and age limit off), best first, with their conversation ids
        (what `forget` takes). Read-only."""
        with calls("search", {"query": query, "top_k": top_k}) as touched:
            with services.episodes.reading(person, utcnow()) as scope:
                found = preview(
                    services.episodes,
                    scope,
                    recall_settings,
                    query,
                    top_k=top_k,
                    similarity_threshold=None,
                    max_age_days=None,
                )
            touched["episodes"] = [e.episode_id for e in found]
            return {"conversations": _episodes_json(services, found, Scope(person))}

    @server.tool(annotations=ADDS)
    def remember(
        text: Annotated[
            str, Field(min_length=1, max_length=MAX_VALUE, description="what to keep, in words")
        ],
        key: Key | None = None,
    ) -> dict[str, Any]:
        """Keep something the user wants caesar to remember, as a fact it puts in every
        prompt: with `key` (e.g. key="dog_name", text="Biscuit") it sets that fact, replacing
        its value; without, it is kept as a note under a key of its own. The operator's word:
        certain, and stronger than anything extracted from chats."""
        with calls("remember", {"text": text, "key": key}) as touched:
            name = key if key is not None else _note_key(text)
            fact, audit_id = services.facts.set_by_operator(name, text, scope=Scope(person))
            # a note's key holds its first words: the audit id says which, not the words
            touched.update(audit_id=audit_id, note=key is None)
            return {"key": fact.key, "value": fact.value, "audit_id": audit_id}

    @server.tool(annotations=READ_ONLY)
    def list_facts() -> dict[str, Any]:
        """Every fact caesar knows about the user, most important first, with its importance,
        confidence and when it was last said. Read-only."""
        with calls("list_facts", {}) as touched:
            facts = [f.as_json() for f in services.facts.list_all(scope=Scope(person))]
            touched["facts"] = len(facts)
            return {"facts": facts}

    @server.tool(annotations=CHANGES)
    def set_fact(key: Key, value: Value) -> dict[str, Any]:
        """Create or correct one fact about the user (key = snake_case attribute, value =
        short). The old value is kept in the fact's history, never injected again."""
        with calls("set_fact", {"key": key, "value": value}) as touched:
            fact, audit_id = services.facts.set_by_operator(key, value, scope=Scope(person))
            # a note's key holds its first words: the audit id says which, not the words
            touched.update(audit_id=audit_id, note=key is None)
            return {"key": fact.key, "value": fact.value, "audit_id": audit_id}

    @server.tool(annotations=CHANGES)
    def delete_fact(key: Key, forget_sources: bool = False) -> dict[str, Any]:
        """Delete a fact. The conversations it was learned from still say it, so recall can
        bring it back: they are listed, and `forget_sources=true` forgets them too."""
        with calls("delete_fact", {"key": key, "forget_sources": forget_sources}) as touched:
            out = forgetting.delete_fact(services, key, scope=scope, forget_sources=forget_sources)
            touched.update(
                key=out["deleted"], audit_id=out["audit_id"], learned_from=out["learned_from"]
            )
            return out

    @server.tool(annotations=READ_ONLY)
    def list_memories(
        kind: Annotated[
            Kind | None,
            Field(
                description="only this kind: instruction (how to answer), constraint, "
                "preference or profile"
            ),
        ] = None,
    ) -> dict[str, Any]:
        """What the user told caesar about themselves that holds (how to answer, diet,
        allergies, likes, family, work, …), newest first: id (what `forget_memory` takes),
        kind, slot, text, when it was said and the chat it was said in. Read-only."""
        with calls("list_memories", {"kind": kind}) as touched:
            memories = [m.as_json() for m in services.standing.list(scope=Scope(person), kind=kind)]
            touched["memories"] = len(memories)
            return {"memories": memories}

    @server.tool(annotations=ADDS)
    def remember_about_me(
        text: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_STATEMENT,
                description='in the user\'s words, e.g. "I keep a gluten-free diet"',
            ),
        ],
        kind: Annotated[
            Kind,
            Field(
                description="instruction (how to answer: units, length, language), "
                "constraint (diet, allergy, health, budget), preference (likes, dislikes) or "
                "profile (family, pets, home, work)"
            ),
        ],
        slot: Annotated[
            str | None,
            Field(max_length=40, description="what it is about: " + ", ".join(kinds.SLOTS)),
        ] = None,
    ) -> dict[str, Any]:
        """Keep something that holds for the user until they say otherwise, as they said it:
        how caesar should answer, what limits what suits them, what they like, who they are.
        caesar puts it into every prompt it bears on. Their own word: certain."""
        with calls("remember_about_me", {"text": text, "kind": kind, "slot": slot}) as touched:
            memory = services.standing.add(
                services.audit, text, kind=kind, slot=slot, scope=Scope(person)
            )
            touched.update(memory_id=memory.id, kind=memory.kind, slot=memory.slot)
            return {"memory": memory.as_json()}

    @server.tool(annotations=CHANGES)
    def forget_memory(memory_id: MemoryId) -> dict[str, Any]:
        """Forget one thing the user told caesar about themselves (by its id from
        `list_memories` or `recall`), for good; one it had replaced holds again. A thing said
        in a conversation (by its id from a recalled conversation's `said`) is forgotten the
        same way."""
        with calls("forget_memory", {"memory_id": memory_id}) as touched:
            if services.dated.owns(memory_id, scope=Scope(person)):
                services.dated.delete(services.audit, memory_id, scope=Scope(person))
            else:
                services.standing.delete(services.audit, memory_id, scope=Scope(person))
            touched["memory_id"] = memory_id
            return {"forgotten": memory_id}

    @server.tool(annotations=READ_ONLY)
    def list_conversations(
        matching: Annotated[
            str | None, Field(max_length=1000, description="only those with a turn containing this")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
    ) -> dict[str, Any]:
        """Past conversations, newest first: id (what `forget` takes), dates, number of
        turns, summary and how it opened. Read-only."""
        with calls("list_conversations", {"matching": matching, "limit": limit}) as touched:
            with services.db.read() as session:
                listed = forgetting.listed(Scope(person, session), matching=matching, limit=limit)
            touched["conversations"] = len(listed)
            return {"conversations": [c.as_json() for c in listed]}

    @server.tool(annotations=CHANGES)
    def forget_conversation(
        conversation_id: Annotated[int, Field(ge=1, le=2**31 - 1)],
    ) -> dict[str, Any]:
        """Forget one past conversation for good: its messages, its summary, the facts learned
        from it and every index entry. Irreversible; one audit row records ids and counts."""
        with calls("forget_conversation", {"conversation_id": conversation_id}) as touched:
            request = ForgetRequest(conversation_ids=[conversation_id], person=person)
            result = forget(services, request)
            touched.update(conversation_id=conversation_id, audit_id=result.audit_id)
            return result.as_json()

    @server.tool(annotations=ADDS)
    def save_conversation(
        messages: Annotated[
            list[dict[str, str]],
            Field(
                min_length=2,
                max_length=MAX_MESSAGES,
                description='[{"role": "user"|"assistant", "content": "…"}, …], ending with '
                "the assistant's reply",
            ),
        ],
        happened_at: Annotated[
            datetime | None, Field(description="when it took place (ISO-8601); default now")
        ] = None,
    ) -> dict[str, Any]:
        """Let caesar learn from a conversation held outside it (here, in another app): it is
        stored as `caesar import` stores one, then summarised and mined for facts by caesar's
        workers, and recalled like any other. Saving the same conversation twice stores it
        once."""
        with calls(
            "save_conversation", {"messages": messages, "happened_at": happened_at}
        ) as touched:
            if any(len(str(m.get("content", ""))) > MAX_MESSAGE for m in messages):
                raise ToolError(f"a message is over {MAX_MESSAGE:,} characters")
            when = to_naive_utc(happened_at) if happened_at else utcnow()
            report = import_conversations(
                services,
                [{"created_at": when.isoformat() + "Z", "messages": messages}],
                scope=Scope(person),
            )
            if report.errors:
                raise ToolError(f"not saved: {report.errors[0].error}")
            [audit_id] = report.audit_ids
            owner = _conversation_ids(services, [audit_id], Scope(person)).get(audit_id)
            touched.update(
                audit_id=audit_id, conversation_id=owner, duplicate=report.duplicates > 0
            )
            return {
                "conversation_id": owner,
                "audit_id": audit_id,
                "already_saved": report.duplicates > 0,
            }

    @server.resource(FACTS_URI, name="facts", mime_type="text/plain")
    def facts_resource() -> str:
        """The facts block exactly as caesar injects it into its system prompt now."""
        inject = services.settings.memory.facts_inject
        text = facts_for_prompt(services.facts, inject, utcnow(), scope=Scope(person)).facts_text
        return text or "(no facts yet)"

    @server.resource(EPISODES_URI, name="recent episodes", mime_type="application/json")
    def episodes_resource() -> str:
        """The 20 most recent past conversations: id, dates, turns, summary."""
        with services.db.read() as session:
            listed = conversations.recent(Scope(person, session), None, 20)
        return json.dumps([c.as_json() for c in listed], ensure_ascii=False)

    return server


def _note_key(text: str) -> str:
    """A key of its own for a note: `note_`, its first words and a hash of the whole, so the
    same note kept twice is one fact and two notes never overwrite each other."""
    words = "_".join(
        "".join(c for c in w if c.isascii() and c.isalnum()) for w in text.lower().split()[:5]
    )
    digest = hashlib.sha256(" ".join(text.split()).encode()).hexdigest()[:6]
    return normalise_key(f"note_{words.strip('_')[:50]}_{digest}")
