"""Open WebUI's chat export (Settings → Data Controls → Export Chats; one chat's "Export chat
(.json)" is the same array holding one): a JSON array of `{id, title, chat, created_at,
updated_at, …}`, `chat.history` a tree of messages (`messages`: id → {parentId, childrenIds,
role, content, timestamp}) whose branch on screen ends at `history.currentId`; chats from
old versions have only the list `chat.messages`, and very old exports are the `chat` objects
themselves.

Kept: the person's and the model's messages on that branch; the reasoning, tool-call and
code-interpreter blocks Open WebUI writes into a reply (`<details type="reasoning">…`) are
taken out; an attached image is "[image]", a file "[file: name]". Times are Unix seconds
(old exports' milliseconds are recognised by their size).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from caesar.import_formats._common import (
    Unreadable,
    as_list,
    as_object,
    describe,
    each_conversation,
    file_placeholder,
    first_time,
    from_epoch,
    merged,
    text_or_none,
    with_placeholders,
)
from caesar.import_formats.source import Broken, Source, SourceMessage

NAME = "openwebui"
LABEL = "Open WebUI chat export"
MARKER = "chat"

_DETAILS = re.compile(
    r'<details\s+type="(?:reasoning|code_interpreter|tool_calls)"[^>]*>.*?</details>\s*',
    re.DOTALL,
)


def is_conversation(item: dict[str, Any]) -> bool:
    chat = item.get(MARKER)
    if isinstance(chat, dict):
        return "history" in chat or "messages" in chat
    # Very old exports: the chat object itself.
    return MARKER not in item and isinstance(item.get("history"), dict)


def read(items: list[Any]) -> Iterator[Source | Broken]:
    return each_conversation(items, NAME, ("id",), _conversation)


def _conversation(item: dict[str, Any], key: str) -> Source:
    if MARKER in item:
        chat = as_object(item[MARKER], repr(MARKER))
        started, updated = item.get("created_at"), item.get("updated_at")
    elif "history" in item or "messages" in item:  # a very old export: the chat itself
        chat, started, updated = item, item.get("timestamp"), None
    else:
        raise Unreadable(f"has no {MARKER!r}")
    turns = [_turn(m, mid) for mid, m in _kept_branch(chat)]
    messages = merged(t for t in turns if t is not None)
    created = _time(started, "created_at")
    if created is None:
        first_said = next((m.at for m in messages if m.at is not None), None)
        created = first_time(first_said, _time(updated, "updated_at"))
    if created is None:
        raise Unreadable("has no date: no created_at, updated_at or dated message")
    title = text_or_none(item.get("title")) or text_or_none(chat.get("title"))
    return Source(key, title, created, messages)


def _kept_branch(chat: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(id, message) from the first message to `history.currentId`, walked up by `parentId`;
    the list `chat.messages` when there is no history."""
    history = chat.get("history")
    tree = history.get("messages") if isinstance(history, dict) else None
    if not isinstance(history, dict) or not isinstance(tree, dict) or not tree:
        listed = as_list(chat.get("messages"), "chat.messages")
        return [(f"#{n}", as_object(m, f"message #{n}")) for n, m in enumerate(listed, start=1)]
    current = history.get("currentId")
    if current is None:
        current = _latest_leaf(tree)
    if not isinstance(current, str) or current not in tree:
        raise Unreadable(f"history.currentId {current!r} is not among its messages")
    chain: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    message_id: str | None = current
    while message_id is not None:
        if message_id in seen:
            raise Unreadable(f"the parents of message {current!r} loop back to {message_id!r}")
        seen.add(message_id)
        if message_id not in tree:
            child = chain[-1][0]
            raise Unreadable(
                f"message {child!r} names parent {message_id!r}, which is not in history"
            )
        message = as_object(tree[message_id], f"message {message_id!r}")
        chain.append((message_id, message))
        parent = message.get("parentId")
        if parent is not None and not isinstance(parent, str):
            raise Unreadable(f"the parentId of message {message_id!r} is {describe(parent)}")
        message_id = parent
    chain.reverse()
    return chain


def _latest_leaf(tree: dict[str, Any]) -> str:
    """With no `currentId` (as Open WebUI repairs it): the newest message without children."""
    best: tuple[float, str] | None = None
    for message_id, message in tree.items():
        if not isinstance(message, dict) or message.get("childrenIds"):
            continue
        stamp = message.get("timestamp")
        when = float(stamp) if isinstance(stamp, int | float) else float("-inf")
        if best is None or when >= best[0]:
            best = (when, message_id)
    if best is None:
        raise Unreadable("history has no currentId and no message without children")
    return best[1]


def _turn(message: dict[str, Any], message_id: str) -> SourceMessage | None:
    role = message.get("role")
    if role not in ("user", "assistant"):
        return None
    placeholders: list[str] = []
    for attached in as_list(message.get("files"), f"files of message {message_id!r}"):
        if isinstance(attached, dict):
            is_image = attached.get("type") == "image"
            placeholders.append("[image]" if is_image else file_placeholder(attached.get("name")))
    text = _DETAILS.sub("", _content(message.get("content")))
    at = _time(message.get("timestamp"), f"timestamp of message {message_id!r}")
    return SourceMessage(
        "user" if role == "user" else "assistant", with_placeholders(placeholders, text), at
    )


def _content(content: object) -> str:
    """A string, or the text items of an OpenAI-style content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            item["text"]
            for item in content
            if isinstance(item, dict)
            and item.get("type") == "text"
            and isinstance(item.get("text"), str)
        ]
        return "\n".join(texts)
    return ""


def _time(value: object, what: str) -> datetime | None:
    """Open WebUI writes seconds; milli-, micro- and nanoseconds are told by their size (a
    time in seconds past 1e11 is the year 5138)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        for limit, scale in ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3)):
            if abs(value) >= limit:
                return from_epoch(value / scale, what)
    return from_epoch(value, what)
