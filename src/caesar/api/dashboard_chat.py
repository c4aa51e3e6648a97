"""The dashboard's chat page: talk to caesar, and see beside each reply what was remembered for
it (issue #25).

    GET  /dashboard/chat                        the conversations, and a new chat
    GET  /dashboard/chat/{id}                   one conversation to read and continue, each reply
                                                with its memory; ?saved= ?forgot= notices
    POST /dashboard/chat/send                   (form: message, conversation_id?, csrf) with
                                                `Accept: text/event-stream`: the reply streamed;
                                                without: the turn, then 303 to its conversation
    GET  /dashboard/chat/turns/{id}/memory      "remembered for this reply": an HTML fragment

A turn here is a brain turn like any other (`Brain.prepare` and `Brain.stream`, as the OpenAI
endpoint streams them), in a conversation named by its key, so the history is the
conversation's own. The stream carries text as JSON events that `static/chat.js` inserts as
text; once the turn is recorded, the script fetches the memory panel, rendered here by Jinja
(escaped like every page) from the turn's audit rows (`turn_memory.py`). Editing a fact and
forgetting a conversation are the facts and episodes pages' own forms, sent back here.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi import Path as FastAPIPath
from fastapi.responses import Response, StreamingResponse

from caesar import audit
from caesar.api.dashboard_episodes import forgotten_row
from caesar.api.dashboard_render import (
    MAX_ID,
    SCRIPTED_HEADERS,
    SECURITY_HEADERS,
    HtmlErrors,
    page,
    redirect,
)
from caesar.api.dashboard_session import FormViewerDep, Viewer, ViewerDep
from caesar.api.deps import BrainDep, ServicesDep
from caesar.api.routes_chat import MAX_MESSAGE_CHARS, STREAM_NOT_SAVED
from caesar.api.turn_memory import read_turn_memory
from caesar.brain import Brain, TurnContext
from caesar.db.engine import UNAVAILABLE, outage
from caesar.errors import CaesarError, InputError, NotFound
from caesar.memory import conversations
from caesar.memory.render import SPEAKERS
from caesar.memory.scope import Scope
from caesar.memory.transcript import conversation_turns
from caesar.services import Services

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from caesar.db.models import AuditLog

log = logging.getLogger(__name__)
router = APIRouter(route_class=HtmlErrors)

LISTED = 50  # conversations in the list; older ones are on the episodes page
HERE = "/dashboard/chat"


def chat_url(conversation_id: int | None) -> str:
    return f"{HERE}/{conversation_id}" if conversation_id else HERE


@router.get("/chat")
def new_chat(
    request: Request,
    viewer: ViewerDep,
    services: ServicesDep,
    forgot: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> Response:
    return _chat_page(request, viewer, services, None, saved=None, forgot=forgot)


@router.get("/chat/{conversation_id}")
def chat_page(
    request: Request,
    viewer: ViewerDep,
    services: ServicesDep,
    conversation_id: Annotated[int, FastAPIPath(ge=1, le=MAX_ID)],
    saved: Annotated[str | None, Query(max_length=200)] = None,
    forgot: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> Response:
    return _chat_page(request, viewer, services, conversation_id, saved=saved, forgot=forgot)


def _chat_page(
    request: Request,
    viewer: Viewer,
    services: Services,
    conversation_id: int | None,
    *,
    saved: str | None,
    forgot: int | None,
) -> Response:
    person = viewer.person
    with services.db.read() as session:
        listed = conversations.recent(Scope(person, session), limit=LISTED)
        current = None
        turns: list[dict[str, Any]] = []
        if conversation_id is not None:
            found = conversations.recent(Scope(person, session), [conversation_id], 1)
            if not found:
                raise NotFound(f"no conversation #{conversation_id} (it may have been forgotten)")
            current = found[0]
            turns = _turns(Scope(person, session), conversation_id)
        forgotten = forgotten_row(Scope(person, session), forgot)
    context = {
        "conversations": listed,
        "conversation": current,
        "turns": turns,
        "here": chat_url(conversation_id),
        "saved": saved,
        "forgotten": forgotten,
        "inject": services.settings.memory.facts_inject,
        "speakers": SPEAKERS,
        "max_chars": MAX_MESSAGE_CHARS,
        "listed": LISTED,
    }
    return page(request, viewer, "chat.html", context, headers=SCRIPTED_HEADERS)


def _turns(scope: Scope, conversation_id: int) -> list[dict[str, Any]]:
    """The conversation's turns (its latest row holds them all), each reply with the memory
    panel of the row that answered it. A reply with no row of its own (an imported
    conversation's, or one shared with the conversation it forked from) has none, nor has one
    whose row kept no record of its prompt's memory (an import's)."""
    session = scope.session
    rows = conversations.turn_rows(scope, conversation_id)
    # where each row's reply sits in the transcript: after the turns it was sent
    answered = {len(conversation_turns(r.payload)) - 1: r for r in rows}
    transcript = conversation_turns(rows[-1].payload) if rows else []
    turns = []
    for i, turn in enumerate(transcript):
        row = answered.get(i) if turn["role"] == "assistant" else None
        payload = row.payload if row is not None and isinstance(row.payload, dict) else {}
        panel = _panel(session, row) if row and isinstance(payload.get("memory"), dict) else None
        turns.append({"role": turn["role"], "content": turn["content"], "panel": panel})
    return turns


def _panel(session: Session, row: AuditLog) -> dict[str, Any]:
    """What the "remembered for this reply" panel shows of a turn: its facts and recalled
    conversations (each with the conversation it belongs to now, to open or forget it)."""
    remembered = read_turn_memory(session, row)
    chats = [
        p["audit_log_id"] for p in remembered.recalled if isinstance(p.get("audit_log_id"), int)
    ]
    conversation_of = audit.subjects(Scope(row.person_id, session), chats)
    memory = remembered.memory or {}
    named = memory.get("episodes_recalled")
    recalled = [
        {**p, "conversation_id": conversation_of.get(p.get("audit_log_id"))}  # type: ignore[arg-type]
        for p in remembered.recalled
    ]
    return {
        "audit_id": row.id,
        "conversation_id": row.subject_id,
        "recorded": remembered.memory is not None,
        "facts": remembered.facts,
        "facts_injected": memory.get("facts_injected", 0),
        "recalled": recalled,
        # recalled then, gone since: forgotten, or swept by retention
        "gone": max(0, len(named) - len(recalled)) if isinstance(named, list) else 0,
        "asked": remembered.asked,
    }


@router.get("/chat/turns/{audit_id}/memory")
def turn_memory(
    request: Request,
    viewer: ViewerDep,
    services: ServicesDep,
    audit_id: Annotated[int, FastAPIPath(ge=1, le=MAX_ID)],
) -> Response:
    """The panel of one answered turn, alone: what the chat page's script puts beside a reply
    it has just streamed."""
    with services.db.read() as session:
        row = audit.get(Scope(viewer.person, session), audit_id)
        if row is None or row.event_type != audit.CHAT_COMPLETED:
            raise NotFound(f"no answered chat turn #{audit_id}")
        panel = _panel(session, row)
    context = {
        "panel": panel,
        "here": chat_url(row.subject_id),
        "inject": services.settings.memory.facts_inject,
        "speakers": SPEAKERS,
    }
    return page(request, viewer, "chat_memory.html", context)


@router.post("/chat/send")
def send(
    request: Request,
    viewer: FormViewerDep,
    services: ServicesDep,
    brain: BrainDep,
    message: Annotated[str, Form(max_length=MAX_MESSAGE_CHARS)] = "",
    conversation_id: Annotated[int | None, Form(ge=1, le=MAX_ID)] = None,
) -> Response:
    if not message.strip():
        raise InputError("message: say something first")
    key: str | None = uuid.uuid4().hex  # a new conversation, named before its first turn
    if conversation_id is not None:
        with services.db.read() as session:
            key = conversations.key_of(Scope(viewer.person, session), conversation_id)
        if key is None:
            raise NotFound(f"no conversation #{conversation_id} (it may have been forgotten)")
    # Named, and no history sent: the conversation's own turns are the history.
    ctx = brain.prepare(message, conversation=key, scope=Scope(viewer.person))
    if "text/event-stream" not in request.headers.get("accept", ""):
        result = brain.answer(ctx)  # a form sent without the script: the page, reloaded
        return redirect(chat_url(_conversation_of(services, result.audit_id, Scope(viewer.person))))
    return StreamingResponse(
        _events(brain, services, ctx), media_type="text/event-stream", headers=SECURITY_HEADERS
    )


def _conversation_of(services: Services, audit_id: int, scope: Scope) -> int | None:
    person = scope.person
    with services.db.read() as session:
        row = audit.get(Scope(person, session), audit_id)
        return row.subject_id if row is not None else None


def _conversation_named(services: Services, key: str | None, scope: Scope) -> int | None:
    person = scope.person
    if key is None:
        return None
    with services.db.read() as session:
        return conversations.id_of(Scope(person, session), key)


def _event(kind: str, **data: Any) -> str:
    return f"data: {json.dumps({'type': kind, **data}, ensure_ascii=False)}\n\n"


def _events(brain: Brain, services: Services, ctx: TurnContext) -> Iterator[str]:
    """`text` events as the reply comes, then `done` (the turn's row, its conversation, where
    its memory panel is) or `error` (the turn is audited as chat.failed by the brain; its
    conversation, when the turn named one, so that sending again continues it)."""
    finish = "stop"
    try:
        for chunk in brain.stream(ctx):
            if chunk.text:
                yield _event("text", text=chunk.text)
            finish = chunk.finish_reason or finish
    except CaesarError as exc:
        log.warning("dashboard chat stream failed: %s", exc)
        failed_in = _conversation_named(services, ctx.conversation, Scope(ctx.person))
        yield _event(
            "error",
            message=f"The model did not answer: {exc}",
            conversation_id=failed_in,
            url=chat_url(failed_in),
        )
        return
    except UNAVAILABLE as exc:  # the database went down before the turn was written
        log.warning("dashboard chat stream failed: database unavailable: %s", outage(exc))
        yield _event("error", message=STREAM_NOT_SAVED)
        return
    except Exception:  # an unexpected bug: logged whole, answered without internals
        log.exception("dashboard chat stream failed")
        yield _event("error", message="Internal error; see the server log.")
        return
    assert ctx.audit_id is not None  # set by Brain.stream once the turn is recorded
    conversation_id = _conversation_of(services, ctx.audit_id, Scope(ctx.person))
    yield _event(
        "done",
        audit_id=ctx.audit_id,
        conversation_id=conversation_id,
        url=chat_url(conversation_id),
        memory_url=f"{HERE}/turns/{ctx.audit_id}/memory",
        finish_reason=finish,
    )
